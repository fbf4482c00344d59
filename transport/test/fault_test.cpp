// Faults: a peer process killed mid-transfer, a connection closed abruptly. Survivors see
// Unavailable, nothing hangs, and the listener keeps serving others.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>

#include "test_pair.h"

namespace ramp::transport::testing {
namespace {

class FaultTest : public ::testing::TestWithParam<ProviderCase> {
 protected:
  void SetUp() override {
    std::string why;
    if (!ProviderAvailable(GetParam().provider, &why)) GTEST_SKIP() << why;
    opts_ = TestOptions(GetParam());
  }
  TempDir dir_;
  TransportOptions opts_;
};

constexpr size_t kChildRegion = 1 << 20;

// The child: connects, shares a region, then streams messages and serves reads until it is
// killed. No gtest in here; any failure is an exit code.
[[noreturn]] void RunChildPeer(const Endpoint& e, const TransportOptions& o) {
  auto mem = Memory::Create();
  std::unique_ptr<Connection> c;
  if (!Connect(e, o, mem, &c).ok()) _exit(2);
  uint8_t* base;
  RemoteRegion r;
  if (!mem->Allocate(kChildRegion, kAccessRead, &base).ok()) _exit(3);
  FillPattern(base, kChildRegion, 9);
  if (!mem->Register(base, kChildRegion, kAccessRead, &r).ok() || !c->Expose(r).ok()) _exit(4);
  std::string handle = EncodeRegion(r);
  if (!c->Send(handle.data(), handle.size()).ok()) _exit(5);
  std::string msg = Pattern(16384, 3);
  for (;;) {
    if (c->queued_bytes() < (1u << 20)) {
      Status s = c->Send(msg.data(), msg.size());
      if (!s.ok() && !s.Is(Status::Code::kBusy)) _exit(6);
    } else {
      (void)c->Wait(100);
    }
    c->Poll(nullptr, 0);
  }
}

TEST_P(FaultTest, PeerProcessKilledMidTransfer) {
  auto memory = Memory::Create();
  std::unique_ptr<Listener> listener;
  ASSERT_TRUE(Listen(ListenEndpoint(GetParam(), dir_), opts_, memory, &listener).ok());
  // Fork before this process starts any thread (tcp responders start at Accept).
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) RunChildPeer(listener->endpoint(), opts_);

  std::unique_ptr<Connection> conn;
  Status s = listener->Accept(30000, &conn);
  if (!s.ok()) kill(pid, SIGKILL);
  ASSERT_TRUE(s.ok()) << s.ToString();
  std::string handle;
  ASSERT_TRUE(ReceiveString(conn.get(), &handle));
  const RemoteRegion r = DecodeRegion(handle);
  uint8_t* local;
  ASSERT_TRUE(memory->Allocate(16 * 4096, kAccessReadWrite, &local).ok());
  std::string expect(kChildRegion, '\0');
  FillPattern(reinterpret_cast<uint8_t*>(expect.data()), kChildRegion, 9);

  // Mid-transfer: reads in flight and messages streaming in.
  int messages = 0, reads_ok = 0, other = 0;
  uint64_t next = 0;
  auto pump = [&] {
    while (conn->outstanding() < 16 && !conn->closed()) {
      const uint64_t slot = next % 16;
      const uint64_t off = (next * 4096) % kChildRegion;
      if (!conn->PostRead(local + slot * 4096, r, off, 4096, next).ok()) break;
      next++;
    }
    Completion c[16];
    int n = conn->Poll(c, 16);
    for (int i = 0; i < n; i++) {
      if (c[i].status.ok()) {
        const uint64_t off = (c[i].wr_id * 4096) % kChildRegion;
        EXPECT_EQ(std::memcmp(local + (c[i].wr_id % 16) * 4096, expect.data() + off, 4096), 0);
        reads_ok++;
      } else {
        EXPECT_TRUE(c[i].status.Is(Status::Code::kUnavailable)) << c[i].status.ToString();
        other++;
      }
    }
    MessageView m;
    while (conn->Receive(&m)) {
      messages++;
      conn->Release();
    }
  };
  bool progressed = DriveUntil(
      [&] {
        pump();
        return (messages >= 50 && reads_ok >= 200) || conn->closed();
      },
      {});
  const bool closed_before_kill = conn->closed();
  const Status why_closed_early = conn->close_status();
  kill(pid, SIGKILL);
  int wstatus = 0;
  waitpid(pid, &wstatus, 0);
  ASSERT_TRUE(WIFSIGNALED(wstatus)) << "child exited early with " << WEXITSTATUS(wstatus);
  ASSERT_TRUE(progressed) << "messages " << messages << " reads " << reads_ok;
  ASSERT_FALSE(closed_before_kill) << why_closed_early.ToString();

  // The survivor notices, completes everything outstanding, and does not hang.
  ASSERT_TRUE(DriveUntil(
      [&] {
        pump();
        return conn->closed() && conn->outstanding() == 0;
      },
      {}));
  EXPECT_TRUE(conn->close_status().Is(Status::Code::kUnavailable))
      << conn->close_status().ToString();
  EXPECT_TRUE(conn->PostRead(local, r, 0, 64, 1).Is(Status::Code::kUnavailable));
  EXPECT_TRUE(conn->Wait(1000).Is(Status::Code::kUnavailable));

  // The listener keeps serving.
  std::unique_ptr<Connection> c2, s2;
  s = ConnectAccepted(listener.get(), opts_, Memory::Create(), &c2, &s2);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_TRUE(SendString(c2.get(), "after", {s2.get()}).ok());
  std::string in;
  ASSERT_TRUE(ReceiveString(s2.get(), &in, {c2.get()}));
  EXPECT_EQ(in, "after");
}

TEST_P(FaultTest, AbruptCloseWhileOperationsAndMessagesAreInFlight) {
  Pair p;
  ASSERT_TRUE(MakePair(GetParam(), dir_, opts_, opts_, &p).ok());
  uint8_t* base;
  ASSERT_TRUE(p.server_memory->Allocate(1 << 20, kAccessReadWrite, &base).ok());
  RemoteRegion r;
  ASSERT_TRUE(p.server_memory->Register(base, 1 << 20, kAccessReadWrite, &r).ok());
  ASSERT_TRUE(p.server->Expose(r).ok());
  uint8_t* local;
  ASSERT_TRUE(p.client_memory->Allocate(1 << 20, kAccessReadWrite, &local).ok());
  std::string big = Pattern(200000, 1);
  for (int i = 0; i < 20; i++) ASSERT_TRUE(p.client->Send(big.data(), big.size()).ok());
  int completed = 0;
  for (int i = 0; i < 64; i++) {
    ASSERT_TRUE(p.client
                    ->PostRead(local + i * 16384, r, i * 16384, 16384,
                               [&](const Status& s) {
                                 EXPECT_TRUE(s.ok() || s.Is(Status::Code::kUnavailable))
                                     << s.ToString();
                                 completed++;
                               })
                    .ok());
  }
  p.server.reset();  // gone without a word
  ASSERT_TRUE(DriveUntil([&] { return p.client->closed() && completed == 64; }, {p.client.get()}));
  EXPECT_TRUE(p.client->close_status().Is(Status::Code::kUnavailable))
      << p.client->close_status().ToString();
  EXPECT_TRUE(p.client->Send("x", 1).Is(Status::Code::kUnavailable));
  EXPECT_EQ(p.client->outstanding(), 0u);
}

INSTANTIATE_TEST_SUITE_P(Providers, FaultTest, ::testing::ValuesIn(AllProviders()),
                         [](const ::testing::TestParamInfo<ProviderCase>& i) {
                           return CaseName(i.param);
                         });

}  // namespace
}  // namespace ramp::transport::testing
