// NodeChannel and the client library's wait policy against peers in this process: a socket
// that never answers, a server that authenticates but never answers HELLO, one with another
// token, and a Waiter on its own (deadline, hook, sleeps).
#include "client/node_channel.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <thread>

namespace ramp {
namespace {

using Clock = std::chrono::steady_clock;

int64_t MsSince(Clock::time_point t0) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count();
}

std::unique_ptr<ChannelContext> Context(const std::string& token, int timeout_ms) {
  auto c = std::make_unique<ChannelContext>();
  c->options.token = token;
  c->options.timeout_ms = timeout_ms;
  c->options.connect_timeout_ms = timeout_ms;
  c->memory = transport::Memory::Create();
  c->client_id = 7;
  return c;
}

// A tcp socket on loopback that listens and never accepts: connecting succeeds (the
// kernel completes it), the transport's handshake never gets an answer.
class SilentSocket {
 public:
  SilentSocket() {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    EXPECT_EQ(listen(fd_, 16), 0);
    socklen_t len = sizeof a;
    EXPECT_EQ(getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len), 0);
    endpoint_.provider = transport::Provider::kTcp;
    endpoint_.host = "127.0.0.1";
    endpoint_.port = ntohs(a.sin_port);
  }
  ~SilentSocket() { close(fd_); }
  const transport::Endpoint& endpoint() const { return endpoint_; }

 private:
  int fd_ = -1;
  transport::Endpoint endpoint_;
};

// A transport listener that accepts one connection (running the token handshake) on a
// thread of its own and then says nothing.
class MuteServer {
 public:
  explicit MuteServer(const std::string& token) {
    transport::TransportOptions t;
    t.token = token;
    t.handshake_timeout_ms = 2000;
    transport::Endpoint ep;
    EXPECT_TRUE(transport::Endpoint::Parse("tcp://127.0.0.1:0", &ep).ok());
    Status st = transport::Listen(ep, t, transport::Memory::Create(), &listener_);
    EXPECT_TRUE(st.ok()) << st.ToString();
    thread_ = std::thread([this] { accept_status_ = listener_->Accept(5000, &conn_); });
  }
  ~MuteServer() {
    if (thread_.joinable()) thread_.join();
    if (conn_) conn_->Close();
    listener_->Close();
  }
  const transport::Endpoint& endpoint() const { return listener_->endpoint(); }
  // Waits for the accept to finish; its status.
  Status Accepted() {
    if (thread_.joinable()) thread_.join();
    return accept_status_;
  }

 private:
  std::unique_ptr<transport::Listener> listener_;
  std::unique_ptr<transport::Connection> conn_;
  Status accept_status_;
  std::thread thread_;
};

TEST(NodeChannelTest, SilentListenerTimesOutWithinTheConnectTimeout) {
  SilentSocket silent;
  auto ctx = Context("token", 300);
  int hooks = 0;
  ctx->options.wait_hook = [&] {
    hooks++;
    return Status::OK();
  };
  DoorbellSet doorbells;
  NodeChannel ch;
  ch.Setup(ctx.get(), &doorbells, 3, "node 3 (silent)");
  ch.SetEndpoint(silent.endpoint());
  const auto t0 = Clock::now();
  Status st = ch.Open();
  EXPECT_TRUE(st.Is(Status::Code::kTimeout)) << st.ToString();
  EXPECT_NE(st.message().find("cannot connect to node 3 (silent) at tcp://127.0.0.1:"),
            std::string::npos)
      << st.message();
  EXPECT_GE(MsSince(t0), 250);
  EXPECT_LT(MsSince(t0), 5000);
  EXPECT_GT(hooks, 0) << "the wait hook runs while connecting";
  EXPECT_FALSE(ch.is_open());
  EXPECT_TRUE(ch.last_error().Is(Status::Code::kTimeout)) << ch.last_error().ToString();
  EXPECT_EQ(doorbells.size(), 0u);
}

TEST(NodeChannelTest, ServerThatNeverAnswersHelloTimesOutWithAClearMessage) {
  MuteServer mute("token");
  auto ctx = Context("token", 300);
  int hooks = 0;
  ctx->options.wait_hook = [&] {
    hooks++;
    return Status::OK();
  };
  DoorbellSet doorbells;
  uint64_t sleeps = 0, timeouts = 0;
  doorbells.CountInto(&sleeps, &timeouts);
  NodeChannel ch;
  ch.Setup(ctx.get(), &doorbells, 0, "node 0 (mute)");
  ch.SetEndpoint(mute.endpoint());
  const auto t0 = Clock::now();
  Status st = ch.Open();
  const int64_t took = MsSince(t0);
  ASSERT_TRUE(mute.Accepted().ok()) << mute.Accepted().ToString();
  EXPECT_TRUE(st.Is(Status::Code::kTimeout)) << st.ToString();
  EXPECT_EQ(st.message(), "HELLO to node 0 (mute): no reply from node 0 (mute) within 300 ms");
  EXPECT_GE(took, 300);
  EXPECT_LT(took, 3000);
  // The wait slept on the doorbell (at most WaitPolicy::kMaxSleepMs at a time) and ran
  // the hook after every sleep.
  EXPECT_GE(sleeps, 3u);
  EXPECT_GE(hooks, static_cast<int>(sleeps));
  EXPECT_FALSE(ch.is_open());
  EXPECT_EQ(doorbells.size(), 0u) << "a reset channel leaves the doorbell set";
}

TEST(NodeChannelTest, WaitHookCancelsAHello) {
  MuteServer mute("token");
  auto ctx = Context("token", 10000);
  int hooks = 0;
  DoorbellSet doorbells;
  NodeChannel ch;
  ch.Setup(ctx.get(), &doorbells, 0, "node 0 (mute)");
  ch.SetEndpoint(mute.endpoint());
  ASSERT_TRUE(ch.Connect().ok());
  EXPECT_EQ(doorbells.size(), 1u);
  ctx->options.wait_hook = [&] {
    return ++hooks >= 5 ? Status::Cancelled("query cancelled") : Status::OK();
  };
  const auto t0 = Clock::now();
  Status st = ch.SayHello();
  EXPECT_TRUE(st.Is(Status::Code::kCancelled)) << st.ToString();
  EXPECT_LT(MsSince(t0), 2000);
  EXPECT_FALSE(ch.is_open());
  EXPECT_TRUE(ch.last_error().Is(Status::Code::kCancelled));
  EXPECT_TRUE(mute.Accepted().ok());
}

TEST(NodeChannelTest, WrongTokenIsRefusedAndRemembered) {
  MuteServer other("the-cluster-token");
  auto ctx = Context("not-the-token", 2000);
  DoorbellSet doorbells;
  NodeChannel ch;
  ch.Setup(ctx.get(), &doorbells, 1, "node 1 (other)");
  ch.SetEndpoint(other.endpoint());
  Status st = ch.Open();
  EXPECT_TRUE(st.Is(Status::Code::kPermissionDenied)) << st.ToString();
  EXPECT_NE(st.message().find("cannot connect to node 1 (other)"), std::string::npos)
      << st.message();
  EXPECT_TRUE(ch.last_error().Is(Status::Code::kPermissionDenied));
  EXPECT_FALSE(ch.is_open());
  EXPECT_FALSE(other.Accepted().ok());
}

TEST(NodeChannelTest, NoEndpointIsUnavailable) {
  auto ctx = Context("token", 100);
  DoorbellSet doorbells;
  NodeChannel ch;
  ch.Setup(ctx.get(), &doorbells, 2, "node 2 (nowhere)");
  Status st = ch.Open();
  EXPECT_TRUE(st.Is(Status::Code::kUnavailable)) << st.ToString();
  EXPECT_EQ(st.message(), "node 2 (nowhere) has no endpoint");
}

TEST(WaiterTest, SpinsSleepsRunsTheHookAndTimesOut) {
  auto ctx = Context("token", 100);
  int hooks = 0;
  ctx->options.wait_hook = [&] {
    hooks++;
    return Status::OK();
  };
  DoorbellSet doorbells;  // empty: sleeps are plain timeouts
  ASSERT_TRUE(doorbells.Init().ok());
  uint64_t sleeps = 0, timeouts = 0;
  doorbells.CountInto(&sleeps, &timeouts);
  Waiter w(*ctx, &doorbells);
  // Progress never sleeps.
  for (int i = 0; i < 100; i++) ASSERT_TRUE(w.Next(true, [] { return "x"; }).ok());
  EXPECT_EQ(sleeps, 0u);
  // Idle rounds: kSpinRounds - 1 spins, then a sleep and the hook.
  for (int i = 0; i < WaitPolicy::kSpinRounds - 1; i++) {
    ASSERT_TRUE(w.Next(false, [] { return "x"; }).ok());
  }
  EXPECT_EQ(sleeps, 0u);
  EXPECT_EQ(hooks, 0);
  ASSERT_TRUE(w.Next(false, [] { return "x"; }).ok());
  EXPECT_EQ(sleeps, 1u);
  EXPECT_EQ(hooks, 1);
  const auto t0 = Clock::now();
  Status st;
  while ((st = w.Next(false, [] { return std::string("nothing within 100 ms"); })).ok()) {
  }
  EXPECT_TRUE(st.Is(Status::Code::kTimeout));
  EXPECT_EQ(st.message(), "nothing within 100 ms");
  EXPECT_LT(MsSince(t0), 1000);
  EXPECT_GE(sleeps, 3u);  // 100 ms in sleeps of at most 10 ms (fewer when the machine is busy)
  EXPECT_EQ(timeouts, sleeps);
  EXPECT_TRUE(w.expired());
}

TEST(WaiterTest, HookErrorEndsTheWaitAndHooklessWaitsIgnoreIt) {
  auto ctx = Context("token", 200);
  ctx->options.wait_hook = [] { return Status::Cancelled("cancel"); };
  DoorbellSet doorbells;
  Waiter w(*ctx, &doorbells);
  Status st;
  int rounds = 0;
  while ((st = w.Next(false, [] { return "x"; })).ok()) rounds++;
  EXPECT_TRUE(st.Is(Status::Code::kCancelled)) << st.ToString();
  EXPECT_EQ(rounds, WaitPolicy::kSpinRounds - 1);
  Waiter quiet(*ctx, &doorbells, /*hook=*/false);
  while ((st = quiet.Next(false, [] { return "drained"; })).ok()) {
  }
  EXPECT_TRUE(st.Is(Status::Code::kTimeout)) << st.ToString();
}

}  // namespace
}  // namespace ramp
