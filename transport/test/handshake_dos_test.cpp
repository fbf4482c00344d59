// Idle and slow unauthenticated connections must not keep anyone out of a stream listener:
// handshakes run side by side, each has a deadline, and their number is bounded in total and
// per source address (TransportOptions::pending_handshake_timeout_ms, max_pending_handshakes,
// max_pending_handshakes_per_source).
//
// Attackers connect from other loopback addresses (127.0.0.2, ...: the whole of 127/8 is
// local on Linux) than the authenticated client (127.0.0.1), as they would across hosts.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "core/control_channel.h"
#include "core/stream_listener.h"
#include "core/wire.h"
#include "ramp/log.h"
#include "ramp/transport/auth.h"
#include "test_pair.h"

namespace ramp::transport::testing {
namespace {

// Raises the soft limit on open files as far as the hard limit allows; returns it.
rlim_t RaiseFdLimit() {
  rlimit r{};
  getrlimit(RLIMIT_NOFILE, &r);
  if (r.rlim_cur < r.rlim_max) {
    r.rlim_cur = r.rlim_max;
    setrlimit(RLIMIT_NOFILE, &r);
    getrlimit(RLIMIT_NOFILE, &r);
  }
  return r.rlim_cur;
}

// A raw stream socket to the listener; tcp ones from `source` (an IPv4 loopback address).
// Non-blocking connect: it does not wait for the server to accept.
int RawConnect(const Endpoint& e, const char* source = "127.0.0.1") {
  int fd;
  if (e.provider == Provider::kShm) {
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::strncpy(a.sun_path, e.path.c_str(), sizeof(a.sun_path) - 1);
    if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
      close(fd);
      return -1;
    }
    return fd;
  }
  fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  sockaddr_in from{};
  from.sin_family = AF_INET;
  inet_pton(AF_INET, source, &from.sin_addr);
  if (bind(fd, reinterpret_cast<sockaddr*>(&from), sizeof(from)) != 0) {
    close(fd);
    return -1;
  }
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(e.port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 && errno != EINPROGRESS) {
    close(fd);
    return -1;
  }
  return fd;
}

std::string LocalName(int fd) {
  sockaddr_in a{};
  socklen_t len = sizeof(a);
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  char host[INET_ADDRSTRLEN];
  inet_ntop(AF_INET, &a.sin_addr, host, sizeof(host));
  return "tcp://" + std::string(host) + ":" + std::to_string(ntohs(a.sin_port));
}

// True once the server closed the socket (EOF or reset), within timeout_ms. Bytes the
// server sent before closing are skipped.
bool ClosedByServer(int fd, int timeout_ms) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (std::chrono::steady_clock::now() < end) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 50) <= 0) continue;
    char buf[256];
    ssize_t n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
      return true;
    }
  }
  return false;
}

// Open from the client's side: connected and not closed by the server.
bool StillOpen(int fd) {
  int err = 0;
  socklen_t len = sizeof(err);
  if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0 || err != 0) return false;
  pollfd p{fd, POLLIN | POLLOUT, 0};
  if (poll(&p, 1, 0) < 0) return false;
  if (!(p.revents & POLLOUT)) return false;  // connect not complete
  if (p.revents & (POLLERR | POLLHUP)) return false;
  if (p.revents & POLLIN) {
    char c;
    ssize_t n = recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
    return n > 0;
  }
  return true;
}

std::vector<uint8_t> HelloBytes(Provider provider) {
  wire::Hello h;
  h.provider = static_cast<uint8_t>(provider);
  RandomNonce(&h.client_nonce);
  std::vector<uint8_t> payload;
  wire::EncodeHello(h, &payload);
  std::vector<uint8_t> out(wire::kHeaderBytes);
  wire::EncodeHeader(static_cast<uint8_t>(wire::Type::kHello),
                     static_cast<uint32_t>(payload.size()), out.data());
  out.insert(out.end(), payload.begin(), payload.end());
  return out;
}

// Sends HELLO and reads the server's answer: CHALLENGE for an admitted connection (which then
// stalls, waiting for our proof), an ERROR for a refused one.
detail::ControlMessage HelloAndAnswer(int fd, Provider provider) {
  detail::ControlChannel ch(fd, "server");
  std::vector<uint8_t> hello = HelloBytes(provider);
  pollfd p{fd, POLLOUT, 0};
  poll(&p, 1, 10000);
  EXPECT_EQ(send(fd, hello.data(), hello.size(), MSG_NOSIGNAL), static_cast<ssize_t>(hello.size()));
  detail::ControlMessage m;
  Status s = ch.Receive(&m, detail::Deadline::After(10000), nullptr, "the answer to HELLO");
  EXPECT_TRUE(s.ok()) << s.ToString();
  return m;
}

// Collects the log lines.
class LogCapture {
 public:
  LogCapture() {
    SetLogSink([this](LogLevel, const std::string& line) {
      std::lock_guard<std::mutex> lock(mu_);
      lines_.push_back(line);
    });
  }
  ~LogCapture() { SetLogSink(nullptr); }
  bool Contains(const std::string& a, const std::string& b = "") {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& l : lines_) {
      if (l.find(a) != std::string::npos && l.find(b) != std::string::npos) return true;
    }
    return false;
  }
  std::string All() {
    std::lock_guard<std::mutex> lock(mu_);
    std::string s;
    for (const auto& l : lines_) s += l + "\n";
    return s;
  }

 private:
  std::mutex mu_;
  std::vector<std::string> lines_;
};

// Runs Accept in a loop on a thread (what rampd's acceptor does), keeping what it accepts.
class Acceptor {
 public:
  explicit Acceptor(Listener* l) : listener_(l) {
    thread_ = std::thread([this] {
      while (!stop_.load()) {
        std::unique_ptr<Connection> c;
        Status s = listener_->Accept(100, &c);
        if (s.ok()) {
          std::lock_guard<std::mutex> lock(mu_);
          accepted_.push_back(std::move(c));
        }
      }
    });
  }
  ~Acceptor() { Stop(); }
  void Stop() {
    stop_.store(true);
    if (thread_.joinable()) thread_.join();
  }
  // Waits for the next accepted connection.
  std::unique_ptr<Connection> Next(int timeout_ms = 10000) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    while (std::chrono::steady_clock::now() < end) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (!accepted_.empty()) {
          auto c = std::move(accepted_.front());
          accepted_.erase(accepted_.begin());
          return c;
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return nullptr;
  }

 private:
  Listener* listener_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  std::mutex mu_;
  std::vector<std::unique_ptr<Connection>> accepted_;
};

// Sends one byte of a HELLO at a time to each socket, every interval_ms, until stopped.
class Trickler {
 public:
  Trickler(std::vector<int> fds, Provider provider, int interval_ms) : fds_(std::move(fds)) {
    thread_ = std::thread([this, provider, interval_ms] {
      const std::vector<uint8_t> hello = HelloBytes(provider);
      for (size_t i = 0; !stop_.load(); i++) {
        for (int fd : fds_) {
          (void)send(fd, &hello[i % hello.size()], 1, MSG_NOSIGNAL | MSG_DONTWAIT);
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(interval_ms));
      }
    });
  }
  ~Trickler() {
    stop_.store(true);
    thread_.join();
  }

 private:
  std::vector<int> fds_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

struct Fds {
  std::vector<int> fds;
  ~Fds() {
    for (int fd : fds)
      if (fd >= 0) close(fd);
  }
};

// The authenticated client's connection works: one message each way.
void ExpectWorkingPair(Connection* client, Connection* server) {
  ASSERT_NE(client, nullptr);
  ASSERT_NE(server, nullptr);
  ASSERT_TRUE(SendString(client, "request", {server}).ok());
  std::string in;
  ASSERT_TRUE(ReceiveString(server, &in, {client}));
  EXPECT_EQ(in, "request");
  ASSERT_TRUE(SendString(server, "reply", {client}).ok());
  ASSERT_TRUE(ReceiveString(client, &in, {server}));
  EXPECT_EQ(in, "reply");
}

const ProviderCase kTcp{"tcp_responder", Provider::kTcp, true};

// (1) A thousand idle connections and some that send a byte at a time, all admitted and held
// open (bounds raised, long deadline): an authenticated client connects within its normal
// timeouts and its connection works. On a listener whose handshakes run one after another
// the client times out behind the first idle connection.
TEST(HandshakeDosTest, ThousandIdleAndSlowConnectionsDoNotKeepAClientOut) {
  int idle = 1000;
  const int slow = 20;
  const rlim_t limit = RaiseFdLimit();
  if (limit < static_cast<rlim_t>(2 * (idle + slow) + 200)) {
    // Each attacker socket costs two descriptors here (both ends): fewer, and say so.
    idle = static_cast<int>(limit / 2) - slow - 100;
    std::printf("note: RLIMIT_NOFILE %llu: %d idle connections instead of 1000\n",
                static_cast<unsigned long long>(limit), idle);
    ASSERT_GT(idle, 100);
  }
  TempDir dir;
  TransportOptions server = TestOptions(kTcp);
  server.handshake_timeout_ms = 60000;
  server.pending_handshake_timeout_ms = 60000;
  server.max_pending_handshakes = 2000;
  server.max_pending_handshakes_per_source = 2000;
  std::unique_ptr<Listener> listener;
  ASSERT_TRUE(Listen(ListenEndpoint(kTcp, dir), server, Memory::Create(), &listener).ok());
  const Endpoint e = listener->endpoint();

  Fds attackers;
  auto acceptor = std::make_unique<Acceptor>(listener.get());
  // In batches that the listen backlog (128) takes without dropping SYNs; each batch
  // connected before the next.
  auto open_batch = [&](const char* source, int n, std::vector<int>* out) {
    std::vector<int> batch;
    for (int i = 0; i < n; i++) {
      int fd = RawConnect(e, source);
      ASSERT_GE(fd, 0) << strerror(errno);
      attackers.fds.push_back(fd);
      batch.push_back(fd);
      if (out) out->push_back(fd);
    }
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    for (int fd : batch) {
      while (!StillOpen(fd) && std::chrono::steady_clock::now() < end) {
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
      }
    }
  };
  for (int done = 0; done < idle; done += 50) {
    open_batch("127.0.0.2", std::min(50, idle - done), nullptr);
  }
  std::vector<int> slow_fds;
  open_batch("127.0.0.3", slow, &slow_fds);
  Trickler trickler(slow_fds, Provider::kTcp, 200);

  TransportOptions client = TestOptions(kTcp);
  client.connect_timeout_ms = 5000;  // the defaults
  client.handshake_timeout_ms = 5000;
  std::unique_ptr<Connection> c;
  Status s = Connect(e, client, Memory::Create(), &c);
  ASSERT_TRUE(s.ok()) << s.ToString();
  std::unique_ptr<Connection> sv = acceptor->Next();
  ExpectWorkingPair(c.get(), sv.get());

  // The attack was real: the server holds every one of them, handshaking (a connection
  // whose SYN the backlog dropped once may come in late: keep accepting a while).
  acceptor->Stop();
  auto* stream = dynamic_cast<detail::StreamListener*>(listener.get());
  ASSERT_NE(stream, nullptr);
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(15);
  while (stream->pending_handshakes() < static_cast<size_t>(idle + slow) &&
         std::chrono::steady_clock::now() < end) {
    std::unique_ptr<Connection> none;
    (void)listener->Accept(50, &none);
  }
  EXPECT_EQ(stream->pending_handshakes(), static_cast<size_t>(idle + slow));
  int open = 0;
  for (int fd : attackers.fds) open += StillOpen(fd) ? 1 : 0;
  EXPECT_EQ(open, idle + slow);
}

// (2) An idle connection, and one that sends a byte at a time, are closed by the server after
// the handshake deadline and logged with their address; the listener keeps serving.
class HandshakeDeadlineTest : public ::testing::TestWithParam<ProviderCase> {};

TEST_P(HandshakeDeadlineTest, IdleAndTricklingConnectionsAreClosedAfterTheDeadline) {
  TempDir dir;
  LogCapture log;
  TransportOptions server = TestOptions(GetParam());
  server.pending_handshake_timeout_ms = 300;  // handshake_timeout_ms stays 10000
  std::unique_ptr<Listener> listener;
  ASSERT_TRUE(Listen(ListenEndpoint(GetParam(), dir), server, Memory::Create(), &listener).ok());
  const Endpoint e = listener->endpoint();
  Acceptor acceptor(listener.get());
  Fds fds;
  const auto start = std::chrono::steady_clock::now();
  int silent = RawConnect(e);
  int trickling = RawConnect(e);
  ASSERT_GE(silent, 0);
  ASSERT_GE(trickling, 0);
  fds.fds = {silent, trickling};
  {
    Trickler trickler({trickling}, GetParam().provider, 20);
    EXPECT_TRUE(ClosedByServer(silent, 20000));
    EXPECT_TRUE(ClosedByServer(trickling, 20000));
  }
  // Not before the deadline (a lower bound only: no test depends on how fast anything is).
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(300));
  const std::string peer =
      GetParam().provider == Provider::kTcp ? LocalName(silent) : std::string("shm://");
  EXPECT_TRUE(log.Contains("dropped " + peer, "handshake not finished within 300 ms")) << log.All();
  if (GetParam().provider == Provider::kTcp) {
    EXPECT_TRUE(log.Contains("dropped " + LocalName(trickling), "handshake not finished"))
        << log.All();
  }
  std::unique_ptr<Connection> c;
  Status s = Connect(e, TestOptions(GetParam()), Memory::Create(), &c);
  ASSERT_TRUE(s.ok()) << s.ToString();
  std::unique_ptr<Connection> sv = acceptor.Next();
  ExpectWorkingPair(c.get(), sv.get());
}

INSTANTIATE_TEST_SUITE_P(Providers, HandshakeDeadlineTest,
                         ::testing::Values(ProviderCase{"shm", Provider::kShm, true},
                                           ProviderCase{"tcp", Provider::kTcp, true}),
                         [](const ::testing::TestParamInfo<ProviderCase>& i) {
                           return CaseName(i.param);
                         });

// (3) The per-source bound refuses the excess connection, tells it why and logs it; other
// sources, and the connections already admitted, are not affected.
TEST(HandshakeDosTest, PerSourceBoundRefusesTheExcessConnection) {
  TempDir dir;
  LogCapture log;
  TransportOptions server = TestOptions(kTcp);
  server.max_pending_handshakes_per_source = 3;
  std::unique_ptr<Listener> listener;
  ASSERT_TRUE(Listen(ListenEndpoint(kTcp, dir), server, Memory::Create(), &listener).ok());
  const Endpoint e = listener->endpoint();
  Acceptor acceptor(listener.get());
  Fds fds;
  for (int i = 0; i < 3; i++) {
    int fd = RawConnect(e, "127.0.0.2");
    ASSERT_GE(fd, 0);
    fds.fds.push_back(fd);
    // Admitted: it gets the challenge (and then stalls).
    EXPECT_EQ(HelloAndAnswer(fd, Provider::kTcp).type,
              static_cast<uint8_t>(wire::Type::kChallenge));
  }
  int excess = RawConnect(e, "127.0.0.2");
  ASSERT_GE(excess, 0);
  fds.fds.push_back(excess);
  detail::ControlMessage m = HelloAndAnswer(excess, Provider::kTcp);
  ASSERT_EQ(m.type, static_cast<uint8_t>(wire::Type::kError));
  Status::Code code;
  std::string reason;
  ASSERT_TRUE(wire::DecodeReason(m.payload.data(), m.payload.size(), &code, &reason).ok());
  EXPECT_NE(reason.find("too many connections handshaking"), std::string::npos) << reason;
  EXPECT_TRUE(ClosedByServer(excess, 10000));
  EXPECT_TRUE(log.Contains("refused " + LocalName(excess), "per-source limit")) << log.All();
  for (int i = 0; i < 3; i++) EXPECT_TRUE(StillOpen(fds.fds[i])) << i;

  // Another source still gets in.
  std::unique_ptr<Connection> c;
  Status s = Connect(e, TestOptions(kTcp), Memory::Create(), &c);
  ASSERT_TRUE(s.ok()) << s.ToString();
  std::unique_ptr<Connection> sv = acceptor.Next();
  ExpectWorkingPair(c.get(), sv.get());
}

// The total bound: a new source takes the place of the busiest source's oldest handshake;
// when no source holds more than the newcomer's, the newcomer is refused.
TEST(HandshakeDosTest, TotalBoundMakesRoomForOtherSourcesOnly) {
  TempDir dir;
  LogCapture log;
  TransportOptions server = TestOptions(kTcp);
  server.max_pending_handshakes = 3;
  std::unique_ptr<Listener> listener;
  ASSERT_TRUE(Listen(ListenEndpoint(kTcp, dir), server, Memory::Create(), &listener).ok());
  const Endpoint e = listener->endpoint();
  Acceptor acceptor(listener.get());
  Fds fds;
  for (int i = 0; i < 3; i++) {
    int fd = RawConnect(e, "127.0.0.2");
    ASSERT_GE(fd, 0);
    fds.fds.push_back(fd);
    EXPECT_EQ(HelloAndAnswer(fd, Provider::kTcp).type,
              static_cast<uint8_t>(wire::Type::kChallenge));
  }
  // A newcomer from 127.0.0.3 evicts the oldest of 127.0.0.2.
  int other = RawConnect(e, "127.0.0.3");
  ASSERT_GE(other, 0);
  fds.fds.push_back(other);
  EXPECT_EQ(HelloAndAnswer(other, Provider::kTcp).type,
            static_cast<uint8_t>(wire::Type::kChallenge));
  EXPECT_TRUE(ClosedByServer(fds.fds[0], 10000));
  EXPECT_TRUE(log.Contains("dropped " + LocalName(fds.fds[0]), "to admit 127.0.0.3")) << log.All();
  // 127.0.0.2 holds 2, as many as a newcomer from there would: refused.
  int excess = RawConnect(e, "127.0.0.2");
  ASSERT_GE(excess, 0);
  fds.fds.push_back(excess);
  EXPECT_EQ(HelloAndAnswer(excess, Provider::kTcp).type, static_cast<uint8_t>(wire::Type::kError));
  EXPECT_TRUE(log.Contains("refused " + LocalName(excess), "the limit (max pending handshakes)"))
      << log.All();
  for (int i = 1; i < 4; i++) EXPECT_TRUE(StillOpen(fds.fds[i])) << i;
}

}  // namespace
}  // namespace ramp::transport::testing
