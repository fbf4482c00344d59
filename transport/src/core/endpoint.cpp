#include "ramp/transport/endpoint.h"

#include <sys/un.h>

#include <string>

namespace ramp::transport {
namespace {

// Built by appending: g++ 12 warns falsely (-Wrestrict, PR 105329) on "x" + std::string&&.
std::string Quote(std::string_view s) {
  std::string q;
  q.reserve(s.size() + 2);
  q += '\'';
  q.append(s);
  q += '\'';
  return q;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\n')) {
    s.remove_prefix(1);
  }
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\n')) {
    s.remove_suffix(1);
  }
  return s;
}

// "host:port" or "[v6addr]:port".
Status ParseHostPort(std::string_view rest, std::string_view uri, Endpoint* out) {
  std::string_view host;
  std::string_view port;
  if (!rest.empty() && rest.front() == '[') {
    size_t close = rest.find(']');
    if (close == std::string_view::npos) {
      return Status::InvalidArgument("unterminated '[' in " + Quote(uri));
    }
    host = rest.substr(1, close - 1);
    std::string_view after = rest.substr(close + 1);
    if (after.empty()) return Status::InvalidArgument("missing port in " + Quote(uri));
    if (after.front() != ':') {
      return Status::InvalidArgument("expected ':' after ']' in " + Quote(uri));
    }
    port = after.substr(1);
  } else {
    size_t colon = rest.rfind(':');
    if (colon == std::string_view::npos) {
      return Status::InvalidArgument("missing port in " + Quote(uri));
    }
    host = rest.substr(0, colon);
    port = rest.substr(colon + 1);
    if (host.find(':') != std::string_view::npos) {
      return Status::InvalidArgument("IPv6 addresses need brackets ([::1]:7400) in " + Quote(uri));
    }
  }
  if (host.empty()) return Status::InvalidArgument("missing host in " + Quote(uri));
  if (port.empty()) return Status::InvalidArgument("missing port in " + Quote(uri));
  if (host.find('/') != std::string_view::npos) {
    return Status::InvalidArgument("unexpected '/' in host of " + Quote(uri));
  }
  uint32_t value = 0;
  for (char c : port) {
    if (c < '0' || c > '9') {
      return Status::InvalidArgument("port " + Quote(port) + " is not a number in " + Quote(uri));
    }
    value = value * 10 + static_cast<uint32_t>(c - '0');
    if (value > 65535) {
      return Status::InvalidArgument("port " + std::string(port) + " out of range (0-65535) in " +
                                     Quote(uri));
    }
  }
  out->host = std::string(host);
  out->port = static_cast<uint16_t>(value);
  return Status::OK();
}

}  // namespace

const char* ProviderName(Provider p) {
  switch (p) {
    case Provider::kTcp:
      return "tcp";
    case Provider::kShm:
      return "shm";
    case Provider::kVerbs:
      return "verbs";
  }
  return "unknown";
}

Status ParseProvider(std::string_view name, Provider* out) {
  if (name == "tcp")
    *out = Provider::kTcp;
  else if (name == "shm")
    *out = Provider::kShm;
  else if (name == "verbs")
    *out = Provider::kVerbs;
  else {
    return Status::InvalidArgument("unknown transport " + Quote(name) +
                                   " (expected tcp, shm or verbs)");
  }
  return Status::OK();
}

Status Endpoint::Parse(std::string_view uri, Endpoint* out) {
  uri = Trim(uri);
  if (uri.empty()) return Status::InvalidArgument("empty endpoint");
  size_t sep = uri.find("://");
  if (sep == std::string_view::npos) {
    return Status::InvalidArgument("missing '<transport>://' in " + Quote(uri) +
                                   " (e.g. tcp://host:port or shm:///path)");
  }
  Endpoint e;
  Status s = ParseProvider(uri.substr(0, sep), &e.provider);
  if (!s.ok()) return s.Annotate(Quote(uri));
  std::string_view rest = uri.substr(sep + 3);
  if (e.provider == Provider::kShm) {
    if (rest.empty() || rest.front() != '/') {
      return Status::InvalidArgument(
          "shm endpoint needs an absolute socket path (shm:///path) in " + Quote(uri));
    }
    if (rest.size() >= sizeof(sockaddr_un::sun_path)) {
      return Status::InvalidArgument("shm socket path longer than " +
                                     std::to_string(sizeof(sockaddr_un::sun_path) - 1) +
                                     " bytes in " + Quote(uri));
    }
    if (rest.back() == '/') {
      return Status::InvalidArgument("shm socket path names a directory in " + Quote(uri));
    }
    e.path = std::string(rest);
  } else {
    if (rest.find('/') != std::string_view::npos) {
      return Status::InvalidArgument("unexpected path after host:port in " + Quote(uri));
    }
    RAMP_RETURN_IF_ERROR(ParseHostPort(rest, uri, &e));
  }
  *out = std::move(e);
  return Status::OK();
}

std::string Endpoint::ToString() const {
  std::string s = ProviderName(provider);
  s += "://";
  if (provider == Provider::kShm) {
    s += path;
  } else {
    const bool v6 = host.find(':') != std::string::npos;
    if (v6) s += '[';
    s += host;
    if (v6) s += ']';
    s += ':';
    s += std::to_string(port);
  }
  return s;
}

Status ParseEndpointList(std::string_view list, std::vector<Endpoint>* out) {
  std::vector<Endpoint> result;
  const std::string_view whole = list;
  if (Trim(list).empty()) return Status::InvalidArgument("empty endpoint list");
  size_t index = 0;
  while (true) {
    size_t comma = list.find(',');
    std::string_view item = Trim(list.substr(0, comma));
    if (item.empty()) {
      return Status::InvalidArgument("empty entry " + std::to_string(index + 1) +
                                     " in endpoint list " + Quote(whole));
    }
    Endpoint e;
    Status s = Endpoint::Parse(item, &e);
    if (!s.ok()) return s.Annotate("endpoint " + std::to_string(index + 1) + " of list");
    result.push_back(std::move(e));
    index++;
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 1);
  }
  *out = std::move(result);
  return Status::OK();
}

}  // namespace ramp::transport
