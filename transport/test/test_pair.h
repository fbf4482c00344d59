// Helpers for the provider suite: real listeners and connections on every provider that
// can run here, driven the way a single-threaded owner drives them.
#pragma once

#include <functional>
#include <initializer_list>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "ramp/transport/transport.h"

namespace ramp::transport::testing {

struct ProviderCase {
  const char* name;
  Provider provider;
  bool responder_thread;
};
std::vector<ProviderCase> AllProviders();
// gtest prints parameters with this (instead of raw bytes).
inline void PrintTo(const ProviderCase& c, std::ostream* os) {
  *os << c.name;
}
std::string CaseName(const ProviderCase& c);

// A private directory for unix sockets, removed at destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Options the tests start from: a token, small rings so that wrap and credits get exercised.
TransportOptions TestOptions(const ProviderCase& c);
Endpoint ListenEndpoint(const ProviderCase& c, const TempDir& dir, const std::string& name = "s");

struct Pair {
  std::shared_ptr<Memory> server_memory;
  std::shared_ptr<Memory> client_memory;
  std::unique_ptr<Listener> listener;
  std::unique_ptr<Connection> server;
  std::unique_ptr<Connection> client;
};

// Listens (unless pair->listener is set), connects a client and accepts it.
Status MakePair(const ProviderCase& c, const TempDir& dir, const TransportOptions& server_options,
                const TransportOptions& client_options, Pair* pair);
// Connect + Accept on an existing listener (Accept on a helper thread).
Status ConnectAccepted(Listener* listener, const TransportOptions& client_options,
                       std::shared_ptr<Memory> client_memory, std::unique_ptr<Connection>* client,
                       std::unique_ptr<Connection>* server);

// Polls every connection in `drive` until pred() holds; false after timeout_ms. Generous
// timeouts only guard against hangs: no test depends on how fast anything is.
bool DriveUntil(const std::function<bool()>& pred, std::initializer_list<Connection*> drive,
                int timeout_ms = 30000);
// One completion from c (driving the others too).
Completion NextCompletion(Connection* c, std::initializer_list<Connection*> others = {});
// Receives one message from c as a string (driving the others).
bool ReceiveString(Connection* c, std::string* out, std::initializer_list<Connection*> others = {},
                   int timeout_ms = 30000);
// Sends, retrying while Busy (driving the others).
Status SendString(Connection* c, const std::string& s,
                  std::initializer_list<Connection*> others = {});

// Deterministic test bytes.
std::string Pattern(size_t n, uint64_t seed);
void FillPattern(uint8_t* p, size_t n, uint64_t seed);

// A RemoteRegion as message bytes and back (what engine code does with handles).
std::string EncodeRegion(const RemoteRegion& r);
RemoteRegion DecodeRegion(const std::string& s);

}  // namespace ramp::transport::testing
