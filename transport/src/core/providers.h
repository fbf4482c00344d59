// Entry points of each provider; transport.cpp dispatches on Endpoint::provider.
#pragma once

#include <memory>
#include <string>

#include "ramp/transport/transport.h"

namespace ramp::transport::detail {

Status ShmListen(const Endpoint& endpoint, const TransportOptions& options,
                 std::shared_ptr<Memory> memory, std::unique_ptr<Listener>* out);
Status ShmConnect(const Endpoint& endpoint, const TransportOptions& options,
                  std::shared_ptr<Memory> memory, std::unique_ptr<Connection>* out);

Status TcpListen(const Endpoint& endpoint, const TransportOptions& options,
                 std::shared_ptr<Memory> memory, std::unique_ptr<Listener>* out);
Status TcpConnect(const Endpoint& endpoint, const TransportOptions& options,
                  std::shared_ptr<Memory> memory, std::unique_ptr<Connection>* out);

#ifdef RAMP_HAVE_VERBS
bool VerbsAvailable(std::string* why);
Status VerbsListen(const Endpoint& endpoint, const TransportOptions& options,
                   std::shared_ptr<Memory> memory, std::unique_ptr<Listener>* out);
Status VerbsConnect(const Endpoint& endpoint, const TransportOptions& options,
                    std::shared_ptr<Memory> memory, std::unique_ptr<Connection>* out);
#endif

}  // namespace ramp::transport::detail
