// Endpoint: where a peer listens. "tcp://host:port", "shm:///path/to/socket",
// "verbs://host:port". The provider is the scheme.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ramp/status.h"

namespace ramp::transport {

enum class Provider : uint8_t { kTcp = 1, kShm = 2, kVerbs = 3 };

const char* ProviderName(Provider p);  // "tcp", "shm", "verbs"
Status ParseProvider(std::string_view name, Provider* out);

struct Endpoint {
  Provider provider = Provider::kTcp;
  std::string host;   // tcp, verbs: host name or address
  uint16_t port = 0;  // tcp, verbs: 0 = any free port when listening
  std::string path;   // shm: path of the unix socket

  // Parses a URI; errors name what is wrong ("missing port in 'tcp://h'").
  static Status Parse(std::string_view uri, Endpoint* out);
  std::string ToString() const;
  bool operator==(const Endpoint&) const = default;
};

// Parses a comma-separated list of endpoints ("tcp://a:1,tcp://b:2").
Status ParseEndpointList(std::string_view list, std::vector<Endpoint>* out);

}  // namespace ramp::transport
