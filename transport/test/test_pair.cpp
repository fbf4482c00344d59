#include "test_pair.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <thread>

namespace ramp::transport::testing {

std::vector<ProviderCase> AllProviders() {
  return {{"shm", Provider::kShm, true},
          {"tcp_responder", Provider::kTcp, true},
          {"tcp_inline", Provider::kTcp, false},
          {"verbs", Provider::kVerbs, true}};
}

std::string CaseName(const ProviderCase& c) {
  return c.name;
}

TempDir::TempDir() {
  char tmpl[] = "/tmp/ramp-test-XXXXXX";
  char* p = mkdtemp(tmpl);
  if (p == nullptr) abort();
  path_ = p;
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

TransportOptions TestOptions(const ProviderCase& c) {
  TransportOptions o;
  o.token = "test-cluster-token";
  o.ring_bytes = 64 * 1024;
  o.responder_thread = c.responder_thread;
  o.connect_timeout_ms = 10000;
  o.handshake_timeout_ms = 10000;
  return o;
}

Endpoint ListenEndpoint(const ProviderCase& c, const TempDir& dir, const std::string& name) {
  Endpoint e;
  e.provider = c.provider;
  if (c.provider == Provider::kShm) {
    e.path = dir.path() + "/" + name + ".sock";
  } else {
    e.host = "127.0.0.1";
    e.port = 0;
  }
  return e;
}

Status ConnectAccepted(Listener* listener, const TransportOptions& client_options,
                       std::shared_ptr<Memory> client_memory, std::unique_ptr<Connection>* client,
                       std::unique_ptr<Connection>* server) {
  Status accepted;
  std::thread t([&] { accepted = listener->Accept(30000, server); });
  Status connected =
      Connect(listener->endpoint(), client_options, std::move(client_memory), client);
  t.join();
  RAMP_RETURN_IF_ERROR(connected);
  return accepted;
}

Status MakePair(const ProviderCase& c, const TempDir& dir, const TransportOptions& server_options,
                const TransportOptions& client_options, Pair* pair) {
  if (!pair->server_memory) pair->server_memory = Memory::Create();
  if (!pair->client_memory) pair->client_memory = Memory::Create();
  if (!pair->listener) {
    RAMP_RETURN_IF_ERROR(
        Listen(ListenEndpoint(c, dir), server_options, pair->server_memory, &pair->listener));
  }
  return ConnectAccepted(pair->listener.get(), client_options, pair->client_memory, &pair->client,
                         &pair->server);
}

bool DriveUntil(const std::function<bool()>& pred, std::initializer_list<Connection*> drive,
                int timeout_ms) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (uint64_t spins = 0;; spins++) {
    if (pred()) return true;
    if (std::chrono::steady_clock::now() > deadline) return false;
    for (Connection* c : drive) c->Poll(nullptr, 0);
    // Spinning two threads on two cores starves everything else: yield now and then.
    if (spins % 64 == 63) std::this_thread::yield();
  }
}

Completion NextCompletion(Connection* c, std::initializer_list<Connection*> others) {
  Completion out;
  out.status = Status::Timeout("no completion");
  bool got = false;
  std::vector<Connection*> all(others);
  DriveUntil(
      [&] {
        if (c->Poll(&out, 1) == 1) got = true;
        for (Connection* o : all) o->Poll(nullptr, 0);
        return got;
      },
      {});
  return out;
}

bool ReceiveString(Connection* c, std::string* out, std::initializer_list<Connection*> others,
                   int timeout_ms) {
  std::vector<Connection*> all(others);
  bool got = false;
  DriveUntil(
      [&] {
        MessageView m;
        if (c->Receive(&m)) {
          out->assign(reinterpret_cast<const char*>(m.data), m.size);
          c->Release();
          got = true;
        }
        for (Connection* o : all) o->Poll(nullptr, 0);
        return got || c->closed();
      },
      {}, timeout_ms);
  return got;
}

Status SendString(Connection* c, const std::string& s, std::initializer_list<Connection*> others) {
  std::vector<Connection*> all(others);
  Status st;
  DriveUntil(
      [&] {
        st = c->Send(s.data(), s.size());
        if (st.Is(Status::Code::kBusy)) {
          c->Poll(nullptr, 0);
          for (Connection* o : all) o->Poll(nullptr, 0);
          return false;
        }
        return true;
      },
      {});
  return st;
}

void FillPattern(uint8_t* p, size_t n, uint64_t seed) {
  uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
  for (size_t i = 0; i < n; i++) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    p[i] = static_cast<uint8_t>(x);
  }
}

std::string Pattern(size_t n, uint64_t seed) {
  std::string s(n, '\0');
  FillPattern(reinterpret_cast<uint8_t*>(s.data()), n, seed);
  return s;
}

std::string EncodeRegion(const RemoteRegion& r) {
  return std::string(reinterpret_cast<const char*>(&r), sizeof(r));
}

RemoteRegion DecodeRegion(const std::string& s) {
  RemoteRegion r;
  EXPECT_EQ(s.size(), sizeof(r));
  std::memcpy(&r, s.data(), std::min(s.size(), sizeof(r)));
  return r;
}

}  // namespace ramp::transport::testing
