// The provider-independent suite: every test runs on every provider available here (shm,
// tcp with a responder thread, tcp served inline by the owner; verbs skips without a device).
#include <gtest/gtest.h>
#include <poll.h>

#include <atomic>
#include <cstring>
#include <random>
#include <thread>

#include "test_pair.h"

namespace ramp::transport::testing {
namespace {

class ProviderTest : public ::testing::TestWithParam<ProviderCase> {
 protected:
  void SetUp() override {
    std::string why;
    if (!ProviderAvailable(GetParam().provider, &why)) GTEST_SKIP() << why;
    opts_ = TestOptions(GetParam());
  }
  void Connect(Pair* p) { Connect(p, opts_, opts_); }
  void Connect(Pair* p, const TransportOptions& server, const TransportOptions& client) {
    Status s = MakePair(GetParam(), dir_, server, client, p);
    ASSERT_TRUE(s.ok()) << s.ToString();
  }
  // The server allocates `len` bytes, fills them, registers them with `access`, exposes
  // them and sends the handle to the client as a message, as engine code does.
  RemoteRegion Share(Pair& p, size_t len, uint32_t access, uint8_t** base, uint64_t seed = 1) {
    EXPECT_TRUE(p.server_memory->Allocate(len, access, base).ok());
    FillPattern(*base, len, seed);
    RemoteRegion r;
    EXPECT_TRUE(p.server_memory->Register(*base, len, access, &r).ok());
    EXPECT_TRUE(p.server->Expose(r).ok());
    EXPECT_TRUE(SendString(p.server.get(), EncodeRegion(r), {p.client.get()}).ok());
    std::string msg;
    EXPECT_TRUE(ReceiveString(p.client.get(), &msg, {p.server.get()}));
    return DecodeRegion(msg);
  }
  // Local buffers live in registered memory so that every provider (verbs too) can use them.
  uint8_t* LocalBuffer(Pair& p, size_t len) {
    uint8_t* b = nullptr;
    EXPECT_TRUE(p.client_memory->Allocate(len, kAccessReadWrite, &b).ok());
    return b;
  }
  TempDir dir_;
  TransportOptions opts_;
};

TEST_P(ProviderTest, OneSidedReadAndWriteAtSeveralSizes) {
  Pair p;
  ASSERT_NO_FATAL_FAILURE(Connect(&p));
  uint8_t* remote_base;
  const size_t region_len = 64 * 1024;
  RemoteRegion r = Share(p, region_len, kAccessReadWrite, &remote_base);
  EXPECT_EQ(r.length, region_len);
  uint8_t* local = LocalBuffer(p, region_len);
  uint64_t wr = 0;
  for (size_t size : {size_t{64}, size_t{1024}, size_t{8192}}) {
    for (uint64_t offset : {uint64_t{0}, uint64_t{4093}, uint64_t{region_len - size}}) {
      std::memset(local, 0, size);
      ASSERT_TRUE(p.client->PostRead(local, r, offset, size, ++wr).ok());
      Completion c = NextCompletion(p.client.get(), {p.server.get()});
      ASSERT_TRUE(c.status.ok()) << c.status.ToString();
      EXPECT_EQ(c.wr_id, wr);
      ASSERT_EQ(std::memcmp(local, remote_base + offset, size), 0) << size << "@" << offset;

      FillPattern(local, size, 1000 + wr);
      ASSERT_TRUE(p.client->PostWrite(local, r, offset, size, ++wr).ok());
      c = NextCompletion(p.client.get(), {p.server.get()});
      ASSERT_TRUE(c.status.ok()) << c.status.ToString();
      EXPECT_EQ(c.wr_id, wr);
      ASSERT_EQ(std::memcmp(local, remote_base + offset, size), 0);
    }
  }
  EXPECT_EQ(p.client->outstanding(), 0u);
  ConnectionStats st = p.client->stats();
  EXPECT_EQ(st.reads_posted, 9u);
  EXPECT_EQ(st.writes_posted, 9u);
  EXPECT_EQ(st.bytes_read, 3u * (64 + 1024 + 8192));
  EXPECT_EQ(st.bytes_written, st.bytes_read);
}

TEST_P(ProviderTest, ManyOutstandingReadsCompleteInOrderOfPosting) {
  Pair p;
  ASSERT_NO_FATAL_FAILURE(Connect(&p));
  uint8_t* remote_base;
  RemoteRegion r = Share(p, 1 << 20, kAccessRead, &remote_base);
  const int n = 256;
  uint8_t* local = LocalBuffer(p, n * 1024);
  for (int i = 0; i < n; i++) {
    ASSERT_TRUE(p.client
                    ->PostRead(local + i * 1024, r, (i * 4099) % ((1 << 20) - 1024), 1024,
                               static_cast<uint64_t>(i))
                    .ok());
  }
  EXPECT_EQ(p.client->outstanding(), static_cast<size_t>(n));
  std::vector<uint64_t> ids;
  ASSERT_TRUE(DriveUntil(
      [&] {
        Completion c[16];
        int got = p.client->Poll(c, 16);
        for (int i = 0; i < got; i++) {
          EXPECT_TRUE(c[i].status.ok()) << c[i].status.ToString();
          ids.push_back(c[i].wr_id);
        }
        return ids.size() == static_cast<size_t>(n);
      },
      {p.server.get()}));
  for (int i = 0; i < n; i++) {
    EXPECT_EQ(ids[i], static_cast<uint64_t>(i));
    ASSERT_EQ(std::memcmp(local + i * 1024, remote_base + (i * 4099) % ((1 << 20) - 1024), 1024),
              0);
  }
}

TEST_P(ProviderTest, IovecRegistrationAddressedByOffsetAcrossBuffers) {
  Pair p;
  ASSERT_NO_FATAL_FAILURE(Connect(&p));
  uint8_t* a;
  uint8_t* b;
  ASSERT_TRUE(p.server_memory->Allocate(8192, kAccessReadWrite, &a).ok());
  ASSERT_TRUE(p.server_memory->Allocate(4096, kAccessReadWrite, &b).ok());
  FillPattern(a, 8192, 7);
  FillPattern(b, 4096, 8);
  // Three discrete buffers, one handle (paper 003): [a+100,+1000) [b,+3000) [a+5000,+2000)
  iovec iov[3] = {{a + 100, 1000}, {b, 3000}, {a + 5000, 2000}};
  RemoteRegion r;
  ASSERT_TRUE(p.server_memory->RegisterV(iov, 3, kAccessReadWrite, &r).ok());
  ASSERT_TRUE(p.server->Expose(r).ok());
  std::string flat;
  for (auto& v : iov) flat.append(static_cast<char*>(v.iov_base), v.iov_len);

  uint8_t* local = LocalBuffer(p, 6000);
  // A read across all three buffers.
  ASSERT_TRUE(p.client->PostRead(local, r, 500, 4000, 1).ok());
  Completion c = NextCompletion(p.client.get(), {p.server.get()});
  ASSERT_TRUE(c.status.ok()) << c.status.ToString();
  EXPECT_EQ(std::string(reinterpret_cast<char*>(local), 4000), flat.substr(500, 4000));
  // A write across the second/third boundary lands in both buffers.
  FillPattern(local, 2000, 99);
  ASSERT_TRUE(p.client->PostWrite(local, r, 3000, 2000, 2).ok());
  c = NextCompletion(p.client.get(), {p.server.get()});
  ASSERT_TRUE(c.status.ok()) << c.status.ToString();
  EXPECT_EQ(std::memcmp(b + 2000, local, 1000), 0);
  EXPECT_EQ(std::memcmp(a + 5000, local + 1000, 1000), 0);
}

TEST_P(ProviderTest, CompletionByCallback) {
  Pair p;
  ASSERT_NO_FATAL_FAILURE(Connect(&p));
  uint8_t* remote_base;
  RemoteRegion r = Share(p, 65536, kAccessReadWrite, &remote_base);
  uint8_t* local = LocalBuffer(p, 65536);
  std::vector<int> order;
  for (int i = 0; i < 10; i++) {
    ASSERT_TRUE(p.client
                    ->PostRead(local + i * 64, r, i * 64, 64,
                               [&order, i](const Status& s) {
                                 EXPECT_TRUE(s.ok()) << s.ToString();
                                 order.push_back(i);
                               })
                    .ok());
  }
  // A callback that posts the next operation from inside Poll.
  bool chained = false;
  ASSERT_TRUE(p.client
                  ->PostWrite(local, r, 8192, 640,
                              [&](const Status& s) {
                                EXPECT_TRUE(s.ok());
                                EXPECT_TRUE(p.client
                                                ->PostRead(local + 1000, r, 8192, 640,
                                                           [&](const Status& s2) {
                                                             EXPECT_TRUE(s2.ok());
                                                             chained = true;
                                                           })
                                                .ok());
                              })
                  .ok());
  Completion none[4];
  ASSERT_TRUE(DriveUntil(
      [&] {
        EXPECT_EQ(p.client->Poll(none, 4), 0);  // callbacks never show up as entries
        return chained;
      },
      {p.server.get()}));
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
  // A callback that polls the same connection (re-entrancy) delivers nothing twice.
  int reentrant = 0;
  for (int i = 0; i < 3; i++) {
    ASSERT_TRUE(p.client
                    ->PostRead(local, r, 0, 64,
                               [&](const Status&) {
                                 reentrant++;
                                 Completion c[4];
                                 EXPECT_EQ(p.client->Poll(c, 4), 0);
                               })
                    .ok());
  }
  ASSERT_TRUE(DriveUntil([&] { return reentrant == 3; }, {p.client.get(), p.server.get()}));
  EXPECT_EQ(reentrant, 3);
  EXPECT_EQ(std::memcmp(local, remote_base, 640), 0);
  EXPECT_EQ(std::memcmp(local + 1000, remote_base + 8192, 640), 0);
  EXPECT_EQ(p.client->outstanding(), 0u);
}

TEST_P(ProviderTest, MessagesSmallLargeAndFragmented) {
  opts_.ring_bytes = 256 * 1024;
  Pair p;
  ASSERT_NO_FATAL_FAILURE(Connect(&p));
  const size_t max_body = 128 * 1024 - 16;
  std::vector<size_t> sizes = {0, 1, 7, 100, 4096, max_body, max_body + 1, 3u << 20, 5};
  for (size_t i = 0; i < sizes.size(); i++) {
    std::string out = Pattern(sizes[i], i);
    ASSERT_TRUE(SendString(p.client.get(), out, {p.server.get()}).ok());
    std::string in;
    ASSERT_TRUE(ReceiveString(p.server.get(), &in, {p.client.get()})) << sizes[i];
    ASSERT_EQ(in.size(), out.size());
    ASSERT_TRUE(in == out) << "message " << i << " of " << sizes[i] << " bytes differs";
  }
  // And the other direction, with SendV gathering pieces.
  std::string a = Pattern(300000, 1), b = Pattern(5, 2), c = Pattern(70000, 3);
  iovec iov[3] = {{a.data(), a.size()}, {b.data(), b.size()}, {c.data(), c.size()}};
  ASSERT_TRUE(p.server->SendV(iov, 3).ok());
  std::string in;
  ASSERT_TRUE(ReceiveString(p.client.get(), &in, {p.server.get()}));
  EXPECT_TRUE(in == a + b + c);
  EXPECT_EQ(p.server->stats().messages_received, sizes.size());
}

TEST_P(ProviderTest, ReceiveViewStaysValidUntilRelease) {
  Pair p;
  ASSERT_NO_FATAL_FAILURE(Connect(&p));
  ASSERT_TRUE(SendString(p.client.get(), "first", {}).ok());
  ASSERT_TRUE(SendString(p.client.get(), "second", {}).ok());
  MessageView m;
  ASSERT_TRUE(DriveUntil([&] { return p.server->Receive(&m); }, {p.client.get()}));
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(m.data), m.size), "first");
  MessageView again;
  ASSERT_TRUE(p.server->Receive(&again));  // not released: the same message
  EXPECT_EQ(again.data, m.data);
  p.server->Release();
  ASSERT_TRUE(DriveUntil([&] { return p.server->Receive(&m); }, {p.client.get()}));
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(m.data), m.size), "second");
  p.server->Release();
}

TEST_P(ProviderTest, WrapAroundKeepsOrderAndContent) {
  Pair p;
  ASSERT_NO_FATAL_FAILURE(Connect(&p));  // 64 KiB rings: odd-sized messages wrap many times
  std::mt19937 rng(5);
  for (int i = 0; i < 3000; i++) {
    std::string out = Pattern(std::uniform_int_distribution<size_t>(0, 3000)(rng), i);
    ASSERT_TRUE(SendString(p.client.get(), out, {p.server.get()}).ok());
    std::string in;
    ASSERT_TRUE(ReceiveString(p.server.get(), &in, {p.client.get()}));
    ASSERT_TRUE(in == out) << i;
  }
}

TEST_P(ProviderTest, CreditStallsLoseNothing) {
  Pair p;
  ASSERT_NO_FATAL_FAILURE(Connect(&p));
  // The sender runs far ahead of a receiver that does not look: the ring fills, the rest
  // waits in the outgoing queue, and everything arrives once the receiver drains.
  const int n = 3000;
  for (int i = 0; i < n; i++) {
    std::string out = Pattern(500 + i % 700, i);
    ASSERT_TRUE(p.client->Send(out.data(), out.size()).ok()) << i;
  }
  EXPECT_GT(p.client->queued_bytes(), 0u);
  for (int i = 0; i < n; i++) {
    std::string in;
    ASSERT_TRUE(ReceiveString(p.server.get(), &in, {p.client.get()})) << i;
    ASSERT_TRUE(in == Pattern(500 + i % 700, i)) << i;
  }
  ASSERT_TRUE(DriveUntil([&] { return p.client->queued_bytes() == 0; }, {p.client.get()}));
}

TEST_P(ProviderTest, QueueBoundGivesBusyThenRecovers) {
  TransportOptions client = opts_;
  client.max_queued_bytes = 200 * 1024;
  Pair p;
  ASSERT_NO_FATAL_FAILURE(Connect(&p, opts_, client));
  std::string msg = Pattern(1000, 3);
  int accepted = 0;
  Status s;
  while ((s = p.client->Send(msg.data(), msg.size())).ok()) accepted++;
  EXPECT_TRUE(s.Is(Status::Code::kBusy)) << s.ToString();
  EXPECT_GE(p.client->stats().send_busy, 1u);
  EXPECT_LE(p.client->queued_bytes(), client.max_queued_bytes);
  for (int i = 0; i < accepted; i++) {
    std::string in;
    ASSERT_TRUE(ReceiveString(p.server.get(), &in, {p.client.get()}));
    ASSERT_TRUE(in == msg);
  }
  EXPECT_TRUE(SendString(p.client.get(), msg, {p.server.get()}).ok());
}

// "c<i>r<round>", built by appending (g++ 12 -Wrestrict false positive on "x" + string&&).
std::string Tag(const char* prefix, int i, int round) {
  std::string s = prefix;
  s += std::to_string(i);
  s += 'r';
  s += std::to_string(round);
  return s;
}

TEST_P(ProviderTest, ManyConnectionsToOneListener) {
  Pair first;
  ASSERT_NO_FATAL_FAILURE(Connect(&first));
  const int n = 12;
  std::vector<std::unique_ptr<Connection>> clients(n), servers(n);
  for (int i = 0; i < n; i++) {
    Status s =
        ConnectAccepted(first.listener.get(), opts_, first.client_memory, &clients[i], &servers[i]);
    ASSERT_TRUE(s.ok()) << s.ToString();
  }
  for (int round = 0; round < 20; round++) {
    for (int i = 0; i < n; i++) {
      ASSERT_TRUE(SendString(clients[i].get(), Tag("c", i, round), {servers[i].get()}).ok());
    }
    for (int i = 0; i < n; i++) {
      std::string in;
      ASSERT_TRUE(ReceiveString(servers[i].get(), &in, {clients[i].get()}));
      EXPECT_EQ(in, Tag("c", i, round));
      ASSERT_TRUE(SendString(servers[i].get(), std::string("echo:") + in, {clients[i].get()}).ok());
    }
    for (int i = 0; i < n; i++) {
      std::string in;
      ASSERT_TRUE(ReceiveString(clients[i].get(), &in, {servers[i].get()}));
      EXPECT_EQ(in, Tag("echo:c", i, round));
    }
  }
}

TEST_P(ProviderTest, TwoThreadedSenderAndReceiver) {
  Pair p;
  ASSERT_NO_FATAL_FAILURE(Connect(&p));
  const int n = 20000;
  std::atomic<bool> failed{false};
  // Each thread drives only its own connection, sleeping in Wait when it has nothing to do.
  std::thread sender([&] {
    std::mt19937 rng(11);
    for (int i = 0; i < n && !failed; i++) {
      size_t len = (i % 100 == 0) ? 100000 : std::uniform_int_distribution<size_t>(4, 600)(rng);
      std::string out = Pattern(len, i);
      std::memcpy(out.data(), &i, 4);
      Status s;
      while ((s = p.client->Send(out.data(), out.size())).Is(Status::Code::kBusy)) {
        Status w = p.client->Wait(1000);
        if (!w.ok() && !w.Is(Status::Code::kTimeout)) break;
      }
      if (!s.ok()) {
        ADD_FAILURE() << s.ToString();
        failed = true;
      }
    }
    while (p.client->queued_bytes() > 0 && !failed && !p.client->closed()) {
      (void)p.client->Wait(1000);
    }
  });
  std::thread receiver([&] {
    std::mt19937 rng(11);
    for (int i = 0; i < n && !failed;) {
      MessageView m;
      if (!p.server->Receive(&m)) {
        Status w = p.server->Wait(1000);
        if (!w.ok() && !w.Is(Status::Code::kTimeout)) {
          ADD_FAILURE() << w.ToString();
          failed = true;
        }
        continue;
      }
      size_t len = (i % 100 == 0) ? 100000 : std::uniform_int_distribution<size_t>(4, 600)(rng);
      std::string expect = Pattern(len, i);
      std::memcpy(expect.data(), &i, 4);
      if (m.size != expect.size() || std::memcmp(m.data, expect.data(), m.size) != 0) {
        int got = -1;
        if (m.size >= 4) std::memcpy(&got, m.data, 4);
        ADD_FAILURE() << "message " << i << " wrong (got seq " << got << ", " << m.size
                      << " bytes)";
        failed = true;
      }
      p.server->Release();
      i++;
    }
  });
  sender.join();
  receiver.join();
  EXPECT_FALSE(failed.load());
  EXPECT_EQ(p.server->stats().messages_received, static_cast<uint64_t>(n));
}

TEST_P(ProviderTest, WaitTimesOutThenWakesOnMessage) {
  Pair p;
  ASSERT_NO_FATAL_FAILURE(Connect(&p));
  EXPECT_TRUE(p.server->Wait(30).Is(Status::Code::kTimeout));
  std::thread later([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    EXPECT_TRUE(p.client->Send("wake", 4).ok());
    // Inline tcp: nothing else serves the client's socket; keep it moving a little.
    for (int i = 0; i < 10; i++) p.client->Poll(nullptr, 0);
  });
  MessageView m;
  bool got = false;
  for (int i = 0; i < 100 && !got; i++) {
    Status s = p.server->Wait(10000);
    ASSERT_TRUE(s.ok() || s.Is(Status::Code::kTimeout)) << s.ToString();
    got = p.server->Receive(&m);
  }
  later.join();
  ASSERT_TRUE(got);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(m.data), m.size), "wake");
  p.server->Release();
}

TEST_P(ProviderTest, WaitFdQuietsOnceTheWakeUpIsHandled) {
  Pair p;
  ASSERT_NO_FATAL_FAILURE(Connect(&p));
  auto readable = [](int fd) {
    pollfd q = {fd, POLLIN, 0};
    return poll(&q, 1, 0) > 0;
  };
  for (int round = 0; round < 3; round++) {
    // The owner arms and sleeps; a message rings it awake.
    ASSERT_TRUE(DriveUntil([&] { return p.server->Arm(); }, {p.client.get()}));
    ASSERT_TRUE(SendString(p.client.get(), "ding", {}).ok());
    ASSERT_TRUE(DriveUntil([&] { return readable(p.server->wait_fd()); }, {p.client.get()}));
    std::string in;
    ASSERT_TRUE(ReceiveString(p.server.get(), &in, {p.client.get()}));
    EXPECT_EQ(in, "ding");
    // Handled: an epoll loop over wait_fd must not keep waking up (no spinning), even
    // before the next Arm.
    EXPECT_FALSE(readable(p.server->wait_fd())) << "round " << round;
  }
}

TEST_P(ProviderTest, WaitHookCancels) {
  auto cancel = std::make_shared<std::atomic<bool>>(false);
  opts_.wait_hook = [cancel] {
    return cancel->load() ? Status::Cancelled("query cancelled") : Status::OK();
  };
  Pair p;
  ASSERT_NO_FATAL_FAILURE(Connect(&p, TestOptions(GetParam()), opts_));
  cancel->store(true);
  EXPECT_TRUE(p.client->Wait(10000).Is(Status::Code::kCancelled));
  // The hook also bounds connecting: a cancelled backend does not sit in a handshake.
  std::unique_ptr<Connection> c;
  Status s = ::ramp::transport::Connect(p.listener->endpoint(), opts_, p.client_memory, &c);
  EXPECT_TRUE(s.Is(Status::Code::kCancelled)) << s.ToString();
}

TEST_P(ProviderTest, LimitsGiveClearErrors) {
  TransportOptions client = opts_;
  client.max_outstanding = 4;
  TransportOptions server = opts_;
  server.max_message_bytes = 1000;  // the smaller limit of the two applies to sends
  Pair p;
  ASSERT_NO_FATAL_FAILURE(Connect(&p, server, client));
  EXPECT_EQ(p.client->max_message_bytes(), 1000u);
  std::string big(1001, 'x');
  Status s = p.client->Send(big.data(), big.size());
  EXPECT_TRUE(s.Is(Status::Code::kTooLarge)) << s.ToString();
  EXPECT_NE(s.message().find("max_message_bytes"), std::string::npos);

  uint8_t* remote;
  RemoteRegion r = Share(p, 4096, kAccessRead, &remote);
  uint8_t* local = LocalBuffer(p, 4096);
  for (int i = 0; i < 4; i++) ASSERT_TRUE(p.client->PostRead(local, r, 0, 64, i).ok());
  s = p.client->PostRead(local, r, 0, 64, 5);
  EXPECT_TRUE(s.Is(Status::Code::kBusy)) << s.ToString();
  EXPECT_TRUE(p.client->PostRead(local, r, 0, 1001, 6).Is(Status::Code::kTooLarge));
  for (int i = 0; i < 4; i++)
    ASSERT_TRUE(NextCompletion(p.client.get(), {p.server.get()}).status.ok());
  EXPECT_TRUE(p.client->PostRead(local, r, 0, 64, 7).ok());
  EXPECT_TRUE(NextCompletion(p.client.get(), {p.server.get()}).status.ok());
}

TEST_P(ProviderTest, CloseFailsLaterOperationsAndTellsThePeer) {
  Pair p;
  ASSERT_NO_FATAL_FAILURE(Connect(&p));
  uint8_t* remote;
  RemoteRegion r = Share(p, 4096, kAccessRead, &remote);
  uint8_t* local = LocalBuffer(p, 4096);
  p.client->Close();
  EXPECT_TRUE(p.client->closed());
  EXPECT_TRUE(p.client->PostRead(local, r, 0, 8, 1).Is(Status::Code::kUnavailable));
  EXPECT_TRUE(p.client->Send("x", 1).Is(Status::Code::kUnavailable));
  EXPECT_TRUE(p.client->Wait(1000).Is(Status::Code::kUnavailable));
  // The peer notices without any timing assumption: it wakes and reports Unavailable.
  Status s;
  ASSERT_TRUE(DriveUntil(
      [&] {
        s = p.server->Wait(1000);
        return s.Is(Status::Code::kUnavailable);
      },
      {}));
  EXPECT_TRUE(p.server->close_status().Is(Status::Code::kUnavailable))
      << p.server->close_status().ToString();
}

INSTANTIATE_TEST_SUITE_P(Providers, ProviderTest, ::testing::ValuesIn(AllProviders()),
                         [](const ::testing::TestParamInfo<ProviderCase>& i) {
                           return CaseName(i.param);
                         });

}  // namespace
}  // namespace ramp::transport::testing
