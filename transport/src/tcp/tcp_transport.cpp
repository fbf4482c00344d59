// Listen and Connect for the tcp provider.
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>

#include "core/providers.h"
#include "core/ring_connection.h"
#include "core/stream_listener.h"
#include "tcp/tcp_connection.h"

namespace ramp::transport::detail {
namespace {

std::string AddressName(const sockaddr* sa) {
  char host[INET6_ADDRSTRLEN] = "?";
  uint16_t port = 0;
  if (sa->sa_family == AF_INET) {
    auto* in = reinterpret_cast<const sockaddr_in*>(sa);
    inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
    port = ntohs(in->sin_port);
    return "tcp://" + std::string(host) + ":" + std::to_string(port);
  }
  if (sa->sa_family == AF_INET6) {
    auto* in6 = reinterpret_cast<const sockaddr_in6*>(sa);
    inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
    port = ntohs(in6->sin6_port);
    return "tcp://[" + std::string(host) + "]:" + std::to_string(port);
  }
  return "tcp://?";
}

std::string PeerName(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return "tcp://?";
  return AddressName(reinterpret_cast<sockaddr*>(&ss));
}

Status Resolve(const Endpoint& e, bool passive, addrinfo** out) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = passive ? AI_PASSIVE : 0;
  const std::string port = std::to_string(e.port);
  int rc = getaddrinfo(e.host.c_str(), port.c_str(), &hints, out);
  if (rc != 0) {
    return Status::InvalidArgument("cannot resolve host '" + e.host + "': " + gai_strerror(rc));
  }
  return Status::OK();
}

void SetNoDelay(int fd) {
  int one = 1;
  // Small frames and responses must not wait for Nagle.
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

Status EstablishTcp(UniqueFd sock, const std::string& peer, bool server,
                    const TransportOptions& options, std::shared_ptr<Memory> memory,
                    std::unique_ptr<Connection>* out) {
  SetNoDelay(sock.get());
  return TcpConnection::Establish(std::move(sock), peer, server, options, std::move(memory), out);
}

// An accepted peer: its name, its source address (the per-source bound), no Nagle.
void AdmitTcp(int fd, std::string* peer, std::string* source) {
  SetNoDelay(fd);
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) {
    *peer = "tcp://?";
    *source = "?";
    return;
  }
  *peer = AddressName(reinterpret_cast<sockaddr*>(&ss));
  char host[INET6_ADDRSTRLEN] = "?";
  if (ss.ss_family == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(&ss)->sin_addr, host, sizeof(host));
  } else if (ss.ss_family == AF_INET6) {
    inet_ntop(AF_INET6, &reinterpret_cast<sockaddr_in6*>(&ss)->sin6_addr, host, sizeof(host));
  }
  *source = host;
}

Status SetUpAcceptedTcp(UniqueFd sock, ControlChannel* channel, const std::string& peer,
                        const TransportOptions& options, std::shared_ptr<Memory> memory,
                        std::unique_ptr<Connection>* out) {
  return TcpConnection::SetUpAccepted(std::move(sock), channel, peer, options, std::move(memory),
                                      out);
}

}  // namespace

Status TcpListen(const Endpoint& endpoint, const TransportOptions& options,
                 std::shared_ptr<Memory> memory, std::unique_ptr<Listener>* out) {
  RAMP_RETURN_IF_ERROR(ValidateOptions(options));
  RAMP_RETURN_IF_ERROR(ValidateListenOptions(options));
  addrinfo* list = nullptr;
  RAMP_RETURN_IF_ERROR(Resolve(endpoint, true, &list));
  Status last = Status::InvalidArgument("no address for " + endpoint.ToString());
  UniqueFd fd;
  for (addrinfo* ai = list; ai != nullptr; ai = ai->ai_next) {
    UniqueFd s(socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!s.valid()) {
      last = Status::FromErrno("socket", errno);
      continue;
    }
    int one = 1;
    setsockopt(s.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(s.get(), ai->ai_addr, ai->ai_addrlen) != 0) {
      last = Status::FromErrno("bind " + endpoint.ToString(), errno);
      continue;
    }
    if (listen(s.get(), 128) != 0) {
      last = Status::FromErrno("listen " + endpoint.ToString(), errno);
      continue;
    }
    fd = std::move(s);
    break;
  }
  freeaddrinfo(list);
  if (!fd.valid()) return last;
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  Endpoint bound = endpoint;
  if (getsockname(fd.get(), reinterpret_cast<sockaddr*>(&ss), &len) == 0) {
    if (ss.ss_family == AF_INET) {
      bound.port = ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
    } else if (ss.ss_family == AF_INET6) {
      bound.port = ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port);
    }
  }
  *out = std::make_unique<StreamListener>(std::move(fd), bound, options, std::move(memory),
                                          Provider::kTcp, AdmitTcp, SetUpAcceptedTcp, nullptr);
  return Status::OK();
}

Status TcpConnect(const Endpoint& endpoint, const TransportOptions& options,
                  std::shared_ptr<Memory> memory, std::unique_ptr<Connection>* out) {
  RAMP_RETURN_IF_ERROR(ValidateOptions(options));
  addrinfo* list = nullptr;
  RAMP_RETURN_IF_ERROR(Resolve(endpoint, false, &list));
  const Deadline deadline = Deadline::After(options.connect_timeout_ms);
  Status last = Status::Unavailable("no address for " + endpoint.ToString());
  UniqueFd fd;
  for (addrinfo* ai = list; ai != nullptr && !fd.valid(); ai = ai->ai_next) {
    UniqueFd s(socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!s.valid()) {
      last = Status::FromErrno("socket", errno);
      continue;
    }
    int rc = connect(s.get(), ai->ai_addr, ai->ai_addrlen);
    if (rc != 0 && errno != EINPROGRESS) {
      last = Status::Unavailable(
          Status::FromErrno("connect to " + endpoint.ToString(), errno).message());
      continue;
    }
    if (rc != 0) {
      Status w = WaitFd(s.get(), POLLOUT, deadline, options.wait_hook,
                        "connect to " + endpoint.ToString());
      if (!w.ok()) {
        freeaddrinfo(list);
        return w;
      }
      int err = 0;
      socklen_t len = sizeof(err);
      getsockopt(s.get(), SOL_SOCKET, SO_ERROR, &err, &len);
      if (err != 0) {
        last = Status::Unavailable(
            Status::FromErrno("connect to " + endpoint.ToString(), err).message());
        continue;
      }
    }
    fd = std::move(s);
  }
  freeaddrinfo(list);
  if (!fd.valid()) return last;
  const std::string peer = PeerName(fd.get());
  return EstablishTcp(std::move(fd), peer, /*server=*/false, options, std::move(memory), out);
}

}  // namespace ramp::transport::detail
