// Pipelining and batching (issue 15, "tcp that scales"): the tcp provider holds what Send
// wrote until the owner polls, arms, finds nothing more to receive, closes, or a batch is
// full. These tests run on every provider (the contract is the same) and check what an owner
// keeping to the contract must see: every message and reply, in order, intact, with many in
// flight on several connections, across partial sends and reads; replies that leave although
// the owner only ever calls Receive and Send; messages sent right before Close. No test
// depends on timing: the waits are guards against hangs.
#include <gtest/gtest.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <thread>

#include "test_pair.h"

namespace ramp::transport::testing {
namespace {

class BatchingTest : public ::testing::TestWithParam<ProviderCase> {
 protected:
  void SetUp() override {
    std::string why;
    if (!ProviderAvailable(GetParam().provider, &why)) GTEST_SKIP() << why;
    opts_ = TestOptions(GetParam());
  }
  // n connections to one listener.
  void ConnectMany(int n, Pair* first, std::vector<std::unique_ptr<Connection>>* clients,
                   std::vector<std::unique_ptr<Connection>>* servers) {
    Status s = MakePair(GetParam(), dir_, opts_, opts_, first);
    ASSERT_TRUE(s.ok()) << s.ToString();
    clients->push_back(std::move(first->client));
    servers->push_back(std::move(first->server));
    for (int i = 1; i < n; i++) {
      std::unique_ptr<Connection> c, sv;
      s = ConnectAccepted(first->listener.get(), opts_, first->client_memory, &c, &sv);
      ASSERT_TRUE(s.ok()) << s.ToString();
      clients->push_back(std::move(c));
      servers->push_back(std::move(sv));
    }
  }
  TempDir dir_;
  TransportOptions opts_;
};

// Request i on connection c: its sequence number first, then pattern bytes. Every 50th is
// larger than a tcp batch (64 KiB) and several ring frames, so batches fill mid-run and large
// messages are fragmented between small ones.
std::string Request(int c, uint32_t i) {
  const size_t len = (i % 50 == 7) ? 70000 + (i % 3) * 1000 : 8 + (i * 37 + c * 11) % 300;
  std::string s = Pattern(len, static_cast<uint64_t>(c) * 1000003 + i);
  std::memcpy(s.data(), &i, 4);
  return s;
}

// A server thread drives 4 connections the way rampd's worker does (receive a run, reply to
// each, arm all and sleep on an epoll set of their wait fds); one client thread keeps up to
// 64 requests in flight on each connection and checks every reply is the echo of its
// request, in order.
TEST_P(BatchingTest, PipelinedRequestsOnSeveralConnectionsGetEveryReplyInOrder) {
  constexpr int kConns = 4;
  constexpr uint32_t kPerConn = 1500;
  constexpr uint32_t kWindow = 64;
  Pair first;
  std::vector<std::unique_ptr<Connection>> clients, servers;
  ASSERT_NO_FATAL_FAILURE(ConnectMany(kConns, &first, &clients, &servers));

  std::atomic<bool> stop{false};
  std::atomic<uint64_t> served{0};
  std::thread server([&] {
    int ep = epoll_create1(EPOLL_CLOEXEC);
    for (auto& s : servers) {
      epoll_event ev{};
      ev.events = EPOLLIN;
      epoll_ctl(ep, EPOLL_CTL_ADD, s->wait_fd(), &ev);
    }
    std::string reply;
    while (!stop.load()) {
      bool did = false;
      for (auto& s : servers) {
        s->Poll(nullptr, 0);
        MessageView m;
        for (int k = 0; k < 64 && s->Receive(&m); k++) {
          reply.assign(reinterpret_cast<const char*>(m.data), m.size);
          s->Release();
          Status st;
          while ((st = s->Send(reply.data(), reply.size())).Is(Status::Code::kBusy)) {
            s->Poll(nullptr, 0);
          }
          if (!st.ok()) {
            ADD_FAILURE() << "reply: " << st.ToString();
            stop = true;
          }
          served++;
          did = true;
        }
      }
      if (did) continue;
      bool sleep = true;
      for (auto& s : servers) sleep = sleep && s->Arm();
      if (sleep) {
        epoll_event evs[8];
        epoll_wait(ep, evs, 8, 100);
      }
    }
    close(ep);
  });

  std::vector<uint32_t> sent(kConns, 0), received(kConns, 0);
  bool failed = false;
  const bool finished = DriveUntil(
      [&] {
        for (int c = 0; c < kConns && !failed; c++) {
          Connection* conn = clients[c].get();
          // Post a run of requests: they leave together at the next Poll/Receive/Wait.
          while (sent[c] < kPerConn && sent[c] - received[c] < kWindow) {
            const std::string req = Request(c, sent[c]);
            Status st = conn->Send(req.data(), req.size());
            if (st.Is(Status::Code::kBusy)) break;
            if (!st.ok()) {
              ADD_FAILURE() << "send on " << c << ": " << st.ToString();
              failed = true;
              break;
            }
            sent[c]++;
          }
          MessageView m;
          while (conn->Receive(&m)) {
            const std::string want = Request(c, received[c]);
            if (m.size != want.size() || std::memcmp(m.data, want.data(), m.size) != 0) {
              uint32_t got = ~0u;
              if (m.size >= 4) std::memcpy(&got, m.data, 4);
              ADD_FAILURE() << "connection " << c << ": reply " << received[c] << " wrong (carries "
                            << got << ", " << m.size << " bytes)";
              failed = true;
            }
            conn->Release();
            received[c]++;
          }
          if (conn->closed()) {
            ADD_FAILURE() << "connection " << c << " closed: " << conn->close_status().ToString();
            failed = true;
          }
        }
        bool done = true;
        for (int c = 0; c < kConns; c++) done = done && received[c] == kPerConn;
        if (!done && !failed) (void)clients[0]->Wait(1);
        return done || failed;
      },
      {});
  stop = true;
  server.join();
  EXPECT_TRUE(finished) << "replies missing (a hang)";
  EXPECT_FALSE(failed);
  for (int c = 0; c < kConns; c++) EXPECT_EQ(received[c], kPerConn) << "connection " << c;
  EXPECT_EQ(served.load(), uint64_t{kConns} * kPerConn);
}

// An owner that never polls, arms or waits, only receives and replies: its replies must still
// leave (Receive that finds nothing more sends what is held), one request at a time.
TEST_P(BatchingTest, RepliesLeaveWhenTheOwnerOnlyReceivesAndSends) {
  Pair p;
  Status s = MakePair(GetParam(), dir_, opts_, opts_, &p);
  ASSERT_TRUE(s.ok()) << s.ToString();
  std::atomic<bool> stop{false};
  std::thread server([&] {
    std::string reply;
    while (!stop.load()) {
      MessageView m;
      while (p.server->Receive(&m)) {
        reply.assign("re:");
        reply.append(reinterpret_cast<const char*>(m.data), m.size);
        p.server->Release();
        if (!p.server->Send(reply.data(), reply.size()).ok()) stop = true;
      }
      std::this_thread::yield();
    }
  });
  for (int i = 0; i < 50; i++) {
    const std::string req = "q" + std::to_string(i);
    ASSERT_TRUE(p.client->Send(req.data(), req.size()).ok());
    std::string in;
    // The client drives only itself; nothing else of the server runs but its thread above.
    ASSERT_TRUE(ReceiveString(p.client.get(), &in, {}, 20000)) << "no reply to " << req;
    EXPECT_EQ(in, "re:" + req);
  }
  stop = true;
  server.join();
}

// Messages sent right before Close reach the peer: Close sends what a batch held.
TEST_P(BatchingTest, MessagesSentRightBeforeCloseArrive) {
  Pair p;
  Status s = MakePair(GetParam(), dir_, opts_, opts_, &p);
  ASSERT_TRUE(s.ok()) << s.ToString();
  constexpr int kMessages = 40;
  for (int i = 0; i < kMessages; i++) {
    const std::string m = "last words " + std::to_string(i);
    ASSERT_TRUE(p.client->Send(m.data(), m.size()).ok());
  }
  p.client->Close();
  int got = 0;
  auto drain = [&] {
    MessageView m;
    while (p.server->Receive(&m)) {
      EXPECT_EQ(std::string(reinterpret_cast<const char*>(m.data), m.size),
                "last words " + std::to_string(got));
      p.server->Release();
      got++;
    }
  };
  // Until all arrived, or the server saw the close (then whatever is in its ring is taken).
  ASSERT_TRUE(DriveUntil(
      [&] {
        const bool was_closed = p.server->closed();
        drain();
        if (got < kMessages && !was_closed) (void)p.server->Wait(10);
        return got == kMessages || was_closed;
      },
      {}, 20000));
  EXPECT_EQ(got, kMessages);
}

// Large one-sided writes, many outstanding on several connections at once: far more than the
// socket buffers hold, so sends and reads are cut short at arbitrary bytes. Every byte must
// land where it was addressed, and reading it back must return it.
TEST_P(BatchingTest, LargeWritesInFlightOnSeveralConnectionsLandIntact) {
  constexpr int kConns = 3;
  constexpr size_t kChunk = 64 * 1024 + 13;  // not a multiple of anything the stream uses
  constexpr int kChunksPerConn = 100;  // 6.5 MB per connection: more than the socket buffers hold
  Pair first;
  std::vector<std::unique_ptr<Connection>> clients, servers;
  ASSERT_NO_FATAL_FAILURE(ConnectMany(kConns, &first, &clients, &servers));
  const size_t bytes = kChunk * kChunksPerConn * kConns;
  uint8_t* target = nullptr;
  ASSERT_TRUE(first.server_memory->Allocate(bytes, kAccessReadWrite, &target).ok());
  std::memset(target, 0, bytes);
  RemoteRegion region;
  ASSERT_TRUE(first.server_memory->Register(target, bytes, kAccessReadWrite, &region).ok());
  for (auto& s : servers) ASSERT_TRUE(s->Expose(region).ok());
  uint8_t* source = nullptr;
  uint8_t* back = nullptr;
  ASSERT_TRUE(first.client_memory->Allocate(bytes, kAccessReadWrite, &source).ok());
  ASSERT_TRUE(first.client_memory->Allocate(bytes, kAccessReadWrite, &back).ok());
  FillPattern(source, bytes, 99);
  std::memset(back, 0, bytes);

  // All writes posted first (the outstanding limit allows them), then all reads.
  std::vector<Connection*> all;
  for (auto& c : clients) all.push_back(c.get());
  for (auto& s : servers) all.push_back(s.get());
  for (int pass = 0; pass < 2; pass++) {
    const bool write = pass == 0;
    for (int i = 0; i < kChunksPerConn; i++) {
      for (int c = 0; c < kConns; c++) {
        const size_t off = (static_cast<size_t>(i) * kConns + c) * kChunk;
        Status st = write ? clients[c]->PostWrite(source + off, region, off, kChunk, off)
                          : clients[c]->PostRead(back + off, region, off, kChunk, off);
        ASSERT_TRUE(st.ok()) << st.ToString();
      }
    }
    int done = 0;
    ASSERT_TRUE(DriveUntil(
        [&] {
          for (Connection* conn : all) {
            Completion cs[16];
            const bool mine =
                conn == clients[0].get() || conn == clients[1].get() || conn == clients[2].get();
            int n = conn->Poll(cs, 16);
            for (int k = 0; k < n; k++) {
              EXPECT_TRUE(mine);
              EXPECT_TRUE(cs[k].status.ok()) << cs[k].status.ToString();
              done++;
            }
          }
          return done == kConns * kChunksPerConn;
        },
        {}))
        << (write ? "writes" : "reads") << " completed: " << done;
  }
  EXPECT_EQ(std::memcmp(target, source, bytes), 0) << "a write landed wrong";
  EXPECT_EQ(std::memcmp(back, source, bytes), 0) << "a read returned wrong bytes";
}

INSTANTIATE_TEST_SUITE_P(Providers, BatchingTest, ::testing::ValuesIn(AllProviders()),
                         [](const ::testing::TestParamInfo<ProviderCase>& i) {
                           return CaseName(i.param);
                         });

}  // namespace
}  // namespace ramp::transport::testing
