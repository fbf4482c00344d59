#include "ramp/transport/ring.h"

#include <gtest/gtest.h>

#include <cstring>
#include <deque>
#include <random>
#include <string>
#include <vector>

namespace ramp::transport::ring {
namespace {

// Writes a frame the way a provider does: size, body, trail, then the lead.
void WriteFrame(uint8_t* ring, const Sender::Placement& p, uint64_t size_field,
                const std::string& body) {
  if (p.wrap) {
    EncodeSize(ring + p.wrap_position, kWrapMarker);
    ring[p.wrap_position + kLeadOffset] = kIndicator;
  }
  uint8_t* f = ring + p.position;
  EncodeSize(f, size_field);
  std::memcpy(f + kBodyOffset, body.data(), body.size());
  f[kBodyOffset + body.size()] = kIndicator;
  f[kLeadOffset] = kIndicator;
}

struct RingPair {
  explicit RingPair(size_t capacity) : mem(capacity, 0), rx(mem.data(), capacity), tx(capacity) {}
  // Places and writes; false when credits are short.
  bool Send(const std::string& body, bool more = false) {
    Sender::Placement p;
    Status s = tx.Place(body.size(), &p);
    if (s.Is(Status::Code::kBusy)) return false;
    EXPECT_TRUE(s.ok()) << s.ToString();
    WriteFrame(mem.data(), p, body.size() | (more ? kMoreFragments : 0), body);
    tx.Commit(p);
    return true;
  }
  // Returns credits the way a connection does: zero what was consumed, then publish.
  void Publish() {
    rx.ZeroConsumed();
    tx.UpdateCredits(rx.consumed());
    rx.MarkPublished();
  }
  bool Receive(std::string* out, bool* more = nullptr) {
    const uint8_t* d;
    size_t n;
    bool m;
    Status s = rx.Peek(&d, &n, &m);
    if (s.Is(Status::Code::kNotFound)) return false;
    EXPECT_TRUE(s.ok()) << s.ToString();
    out->assign(reinterpret_cast<const char*>(d), n);
    if (more) *more = m;
    rx.Consume();
    return true;
  }
  std::vector<uint8_t> mem;
  Receiver rx;
  Sender tx;
};

std::string Body(size_t n, int seed) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; i++) s[i] = static_cast<char>((i * 31 + seed) & 0xff);
  return s;
}

TEST(Ring, FrameGeometry) {
  EXPECT_EQ(FrameBytes(0), 16u);
  EXPECT_EQ(FrameBytes(6), 16u);
  EXPECT_EQ(FrameBytes(7), 32u);
  EXPECT_EQ(MaxBody(4096), 2032u);
  EXPECT_EQ(FrameBytes(MaxBody(4096)), 2048u);  // a largest frame is half the ring
  uint8_t head[8];
  EncodeSize(head, 0x0102);
  EXPECT_EQ(head[0], 0x02);
  EXPECT_EQ(head[1], 0x01);
}

TEST(Ring, RoundTripInOrderWithWrap) {
  RingPair r(4096);
  std::string got;
  EXPECT_FALSE(r.Receive(&got));
  int sent = 0, received = 0;
  // Sizes chosen so that frames wrap at different positions.
  for (int round = 0; round < 200; round++) {
    size_t n = (round * 37) % 700;
    while (!r.Send(Body(n, sent))) {
      ASSERT_TRUE(r.Receive(&got));
      EXPECT_EQ(got, Body(got.size(), received)) << received;
      received++;
      r.Publish();
    }
    sent++;
  }
  while (r.Receive(&got)) {
    EXPECT_EQ(got, Body(got.size(), received));
    received++;
  }
  EXPECT_EQ(sent, received);
  // Consumed bytes are zeroed in a batch, before credits go back.
  bool dirty = false;
  for (uint8_t b : r.mem) dirty |= b != 0;
  EXPECT_TRUE(dirty);
  r.rx.ZeroConsumed();
  for (uint8_t b : r.mem) ASSERT_EQ(b, 0);
}

TEST(Ring, PeekReturnsSameFrameUntilConsumed) {
  RingPair r(4096);
  ASSERT_TRUE(r.Send("abc"));
  const uint8_t* d1;
  const uint8_t* d2;
  size_t n1, n2;
  bool more;
  ASSERT_TRUE(r.rx.Peek(&d1, &n1, &more).ok());
  ASSERT_TRUE(r.rx.Peek(&d2, &n2, &more).ok());
  EXPECT_EQ(d1, d2);
  EXPECT_EQ(n1, 3u);
  EXPECT_TRUE(r.rx.FrameReady());
  r.rx.Consume();
  EXPECT_FALSE(r.rx.FrameReady());
  EXPECT_TRUE(r.rx.Peek(&d1, &n1, &more).Is(Status::Code::kNotFound));
}

TEST(Ring, SenderNeverOverrunsCredits) {
  RingPair r(4096);
  int sent = 0;
  while (r.Send(Body(100, sent))) sent++;
  // 112-byte frames: 36 fit in 4096 bytes.
  EXPECT_EQ(sent, 36);
  EXPECT_LE(r.tx.written() - r.tx.credits(), 4096u);
  std::string got;
  ASSERT_TRUE(r.Receive(&got));
  EXPECT_FALSE(r.Send(Body(100, 99)));  // not until the credit arrives
  r.Publish();
  EXPECT_TRUE(r.Send(Body(100, 99)));
  // Credits beyond what was written are ignored (a broken or hostile receiver).
  r.tx.UpdateCredits(r.tx.written() + 4096);
  EXPECT_LT(r.tx.credits(), r.tx.written());
  Sender::Placement p;
  EXPECT_TRUE(r.tx.Place(MaxBody(4096) + 1, &p).Is(Status::Code::kTooLarge));
}

TEST(Ring, FragmentsFlag) {
  RingPair r(4096);
  ASSERT_TRUE(r.Send("part1", true));
  ASSERT_TRUE(r.Send("part2", false));
  std::string got;
  bool more = false;
  ASSERT_TRUE(r.Receive(&got, &more));
  EXPECT_EQ(got, "part1");
  EXPECT_TRUE(more);
  ASSERT_TRUE(r.Receive(&got, &more));
  EXPECT_EQ(got, "part2");
  EXPECT_FALSE(more);
}

Status PeekStatus(std::vector<uint8_t>& mem) {
  Receiver rx(mem.data(), mem.size());
  const uint8_t* d;
  size_t n;
  bool more;
  return rx.Peek(&d, &n, &more);
}

TEST(Ring, MalformedFramesAreCorruption) {
  std::vector<uint8_t> mem(4096, 0);
  // Size beyond what the ring can hold.
  EncodeSize(mem.data(), 1u << 20);
  mem[kLeadOffset] = kIndicator;
  Status s = PeekStatus(mem);
  EXPECT_TRUE(s.Is(Status::Code::kCorruption)) << s.ToString();
  EXPECT_NE(s.message().find("more than a 4096-byte ring can hold"), std::string::npos);

  // Lead set, trail missing.
  std::fill(mem.begin(), mem.end(), 0);
  EncodeSize(mem.data(), 40);
  mem[kLeadOffset] = kIndicator;
  s = PeekStatus(mem);
  EXPECT_TRUE(s.Is(Status::Code::kCorruption));
  EXPECT_NE(s.message().find("no trailing indicator"), std::string::npos) << s.ToString();

  // Reserved bits in the size field.
  std::fill(mem.begin(), mem.end(), 0);
  EncodeSize(mem.data(), (uint64_t{1} << 55) | 4);
  mem[kLeadOffset] = kIndicator;
  mem[kBodyOffset + 4] = kIndicator;
  EXPECT_TRUE(PeekStatus(mem).Is(Status::Code::kCorruption));

  // A lead byte that is not the indicator.
  std::fill(mem.begin(), mem.end(), 0);
  mem[kLeadOffset] = 0x7f;
  EXPECT_TRUE(PeekStatus(mem).Is(Status::Code::kCorruption));

  // A wrap marker at position 0 would loop forever.
  std::fill(mem.begin(), mem.end(), 0);
  EncodeSize(mem.data(), kWrapMarker);
  mem[kLeadOffset] = kIndicator;
  EXPECT_TRUE(PeekStatus(mem).Is(Status::Code::kCorruption));
}

TEST(Ring, FrameRunningPastTheEndIsCorruption) {
  // Consume a real frame so the read position is near the end, then forge one there.
  RingPair r(4096);
  std::string got;
  std::string big = Body(MaxBody(4096), 1);
  ASSERT_TRUE(r.Send(big));
  ASSERT_TRUE(r.Receive(&got));
  r.Publish();
  ASSERT_TRUE(r.Send(Body(1000, 2)));  // at 2048
  ASSERT_TRUE(r.Receive(&got));
  // Now at 3072: a 2000-byte frame fits the size limit but not before the end.
  const size_t pos = r.rx.consumed() % 4096;
  ASSERT_EQ(pos, 3072u);
  EncodeSize(r.mem.data() + pos, 2000);
  r.mem[pos + kLeadOffset] = kIndicator;
  const uint8_t* d;
  size_t n;
  bool more;
  Status s = r.rx.Peek(&d, &n, &more);
  EXPECT_TRUE(s.Is(Status::Code::kCorruption));
  EXPECT_NE(s.message().find("runs past the end"), std::string::npos) << s.ToString();
}

TEST(Ring, IdleCreditsPreventWrapDeadlock) {
  // The case ring.h describes: published at 0.4 capacity, drained at 0.6, next frame is a
  // largest one. With only the quarter rule the sender would wait forever.
  const size_t cap = 16 * 1024;
  RingPair r(cap);
  std::string got;
  auto drain = [&] {
    while (r.Receive(&got)) {
      if (r.rx.CreditsDue()) r.Publish();
    }
  };
  size_t small = 400;  // frames of 416 bytes
  while (r.tx.written() < cap * 4 / 10) {
    ASSERT_TRUE(r.Send(Body(small, 0)));
    drain();
  }
  r.Publish();
  while (r.tx.written() < cap * 6 / 10) {
    ASSERT_TRUE(r.Send(Body(small, 0)));
    drain();
  }
  EXPECT_FALSE(r.rx.CreditsDue());
  EXPECT_FALSE(r.Send(Body(MaxBody(cap), 0)));  // stalled on credits
  ASSERT_TRUE(r.rx.IdleCreditsDue());           // the empty ring says: publish
  r.Publish();
  EXPECT_TRUE(r.Send(Body(MaxBody(cap), 0)));
}

TEST(Ring, RandomSizesNeverDeadlockWithPublishRules) {
  std::mt19937 rng(42);
  for (size_t cap : {4096ul, 16384ul, 65536ul}) {
    RingPair r(cap);
    std::deque<std::string> expect;
    for (int i = 0; i < 3000; i++) {
      std::uniform_int_distribution<size_t> pick(0, 3);
      size_t n = pick(rng) == 0 ? std::uniform_int_distribution<size_t>(0, MaxBody(cap))(rng)
                                : std::uniform_int_distribution<size_t>(0, 64)(rng);
      std::string b = Body(n, i);
      int tries = 0;
      while (!r.Send(b)) {
        std::string got;
        if (r.Receive(&got)) {
          ASSERT_EQ(got, expect.front());
          expect.pop_front();
          if (r.rx.CreditsDue()) r.Publish();
        } else {
          // Empty ring and the sender still stuck: only the idle rule may help.
          ASSERT_TRUE(r.rx.IdleCreditsDue()) << "deadlock at frame " << i << " cap " << cap;
          r.Publish();
        }
        ASSERT_LT(++tries, 10000);
      }
      expect.push_back(b);
    }
  }
}

}  // namespace
}  // namespace ramp::transport::ring
