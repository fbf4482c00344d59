// Wire formats: round trips, and every truncation of a valid message is refused.
#include "core/wire.h"

#include <gtest/gtest.h>

#include "ramp/transport/ring.h"

namespace ramp::transport::wire {
namespace {

template <class T, class Decode>
void ExpectTruncationsRefused(const std::vector<uint8_t>& full, Decode decode) {
  for (size_t n = 0; n < full.size(); n++) {
    T out;
    Status s = decode(full.data(), n, &out);
    EXPECT_TRUE(s.Is(Status::Code::kCorruption)) << "prefix of " << n << ": " << s.ToString();
  }
  std::vector<uint8_t> longer = full;
  longer.push_back(0);
  T out;
  EXPECT_FALSE(decode(longer.data(), longer.size(), &out).ok()) << "trailing byte accepted";
}

TEST(Wire, Hello) {
  Hello h;
  h.provider = 2;
  h.client_nonce[5] = 9;
  std::vector<uint8_t> b;
  EncodeHello(h, &b);
  Hello out;
  ASSERT_TRUE(DecodeHello(b.data(), b.size(), &out).ok());
  EXPECT_EQ(out.provider, 2);
  EXPECT_EQ(out.version, kProtocolVersion);
  EXPECT_EQ(out.client_nonce, h.client_nonce);
  ExpectTruncationsRefused<Hello>(b, DecodeHello);
  b[0] = 'X';
  Status s = DecodeHello(b.data(), b.size(), &out);
  EXPECT_NE(s.message().find("bad magic"), std::string::npos);
}

TEST(Wire, ChallengeProofReason) {
  Challenge c;
  c.server_nonce[0] = 1;
  c.server_proof[31] = 2;
  std::vector<uint8_t> b;
  EncodeChallenge(c, &b);
  Challenge out;
  ASSERT_TRUE(DecodeChallenge(b.data(), b.size(), &out).ok());
  EXPECT_EQ(out.server_proof, c.server_proof);
  ExpectTruncationsRefused<Challenge>(b, DecodeChallenge);

  b.clear();
  EncodeProof(c.server_proof, &b);
  ExpectTruncationsRefused<Digest>(b, DecodeProof);

  b.clear();
  EncodeReason(Status::Code::kPermissionDenied, "no", &b);
  Status::Code code;
  std::string reason;
  ASSERT_TRUE(DecodeReason(b.data(), b.size(), &code, &reason).ok());
  EXPECT_EQ(code, Status::Code::kPermissionDenied);
  EXPECT_EQ(reason, "no");
  b[0] = 200;  // no such status code
  EXPECT_FALSE(DecodeReason(b.data(), b.size(), &code, &reason).ok());
}

TEST(Wire, SetupValidatesWhatPeersSend) {
  wire::Setup s;
  s.ring_bytes = 1 << 16;
  s.max_message_bytes = 1 << 20;
  s.block = RemoteRegion{7, 99, (1 << 16) + 128, kAccessReadWrite, 0};
  s.block_segment_id = 3;
  std::vector<uint8_t> b;
  EncodeSetup(s, &b);
  wire::Setup out;
  ASSERT_TRUE(DecodeSetup(b.data(), b.size(), &out).ok());
  EXPECT_EQ(out.block, s.block);
  EXPECT_EQ(out.block_segment_id, 3u);
  ExpectTruncationsRefused<wire::Setup>(b, DecodeSetup);

  auto refused = [&](wire::Setup bad) {
    std::vector<uint8_t> e;
    EncodeSetup(bad, &e);
    wire::Setup o;
    return DecodeSetup(e.data(), e.size(), &o).Is(Status::Code::kCorruption);
  };
  wire::Setup bad = s;
  bad.ring_bytes = 4100;  // not a multiple of 16
  EXPECT_TRUE(refused(bad));
  bad = s;
  bad.ring_bytes = 1ull << 40;
  EXPECT_TRUE(refused(bad));
  bad = s;
  bad.block.length = s.ring_bytes;  // no room for the control words
  EXPECT_TRUE(refused(bad));
  bad = s;
  bad.block.access = kAccessRead;
  EXPECT_TRUE(refused(bad));
}

TEST(Wire, SegmentsAndExpose) {
  std::vector<SegmentInfo> segs = {{1, 4096, true}, {2, 8192, false}};
  std::vector<uint8_t> b;
  EncodeSegments(segs, &b);
  std::vector<SegmentInfo> out;
  ASSERT_TRUE(DecodeSegments(b.data(), b.size(), &out).ok());
  ASSERT_EQ(out.size(), 2u);
  EXPECT_FALSE(out[1].writable);
  ExpectTruncationsRefused<std::vector<SegmentInfo>>(b, DecodeSegments);

  Expose e;
  e.region = RemoteRegion{5, 6, 300, kAccessRead, 0};
  e.pieces = {{1, 0, 100}, {2, 4000, 200}};
  b.clear();
  EncodeExpose(e, &b);
  Expose eo;
  ASSERT_TRUE(DecodeExpose(b.data(), b.size(), &eo).ok());
  EXPECT_EQ(eo.pieces.size(), 2u);
  EXPECT_EQ(eo.pieces[1].offset, 4000u);
  ExpectTruncationsRefused<Expose>(b, DecodeExpose);
  e.region.length = 301;  // pieces do not add up
  b.clear();
  EncodeExpose(e, &b);
  EXPECT_FALSE(DecodeExpose(b.data(), b.size(), &eo).ok());
}

TEST(Wire, VerbsExpose) {
  VerbsExpose e;
  e.region = RemoteRegion{5, 6, 300, kAccessReadWrite, 0};
  e.pieces = {{0x7f0000001000, 0x1234, 100}, {0x7f0000009000, 0x5678, 200}};
  std::vector<uint8_t> b;
  EncodeVerbsExpose(e, &b);
  VerbsExpose out;
  ASSERT_TRUE(DecodeVerbsExpose(b.data(), b.size(), &out).ok());
  ASSERT_EQ(out.pieces.size(), 2u);
  EXPECT_EQ(out.pieces[1].rkey, 0x5678u);
  EXPECT_EQ(out.pieces[0].addr, 0x7f0000001000u);
  ExpectTruncationsRefused<VerbsExpose>(b, DecodeVerbsExpose);
  e.pieces[0].addr = ~uint64_t{0} - 10;  // wraps the address space
  b.clear();
  EncodeVerbsExpose(e, &b);
  EXPECT_FALSE(DecodeVerbsExpose(b.data(), b.size(), &out).ok());
}

TEST(Wire, DataPathOps) {
  RemoteRegion r{11, 12, 1000, kAccessReadWrite, 0};
  std::vector<uint8_t> b;
  AppendRead(5, r, 64, 128, &b);
  AppendWriteHeader(6, r, 8, 3, &b);
  b.insert(b.end(), {'a', 'b', 'c'});
  AppendWriteU64(r, 1032, 777, &b);
  AppendResponseHeader(Type::kReadResponse, 5, Status::OK(), 2, &b);
  b.insert(b.end(), {'x', 'y'});
  AppendResponseHeader(Type::kWriteResponse, 6, Status::PermissionDenied("ro"), 0, &b);

  size_t at = 0;
  std::vector<Op> ops;
  while (at < b.size()) {
    uint8_t type;
    uint32_t len;
    ASSERT_TRUE(DecodeHeader(b.data() + at, 1 << 20, &type, &len).ok());
    Op op;
    Status s = DecodeOp(type, b.data() + at + kHeaderBytes, len, &op);
    ASSERT_TRUE(s.ok()) << s.ToString();
    ops.push_back(op);
    // Every truncation of every op is refused or, for ops carrying data, yields less data.
    for (uint32_t n = 0; n < len; n++) {
      Op t;
      Status ts = DecodeOp(type, b.data() + at + kHeaderBytes, n, &t);
      if (ts.ok()) {
        EXPECT_LT(t.data_length, op.data_length + 1);
      }
    }
    at += kHeaderBytes + len;
  }
  ASSERT_EQ(ops.size(), 5u);
  EXPECT_EQ(ops[0].type, Type::kRead);
  EXPECT_EQ(ops[0].target.id, 11u);
  EXPECT_EQ(ops[0].target.key, 12u);
  EXPECT_EQ(ops[0].length, 128u);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(ops[1].data), ops[1].data_length), "abc");
  EXPECT_EQ(ops[2].value, 777u);
  EXPECT_EQ(ops[3].data_length, 2u);
  EXPECT_EQ(ops[4].code, Status::Code::kPermissionDenied);
  EXPECT_EQ(ops[4].reason, "ro");

  uint8_t type;
  uint32_t len;
  uint8_t huge[5] = {0xff, 0xff, 0xff, 0x7f, 32};
  EXPECT_TRUE(DecodeHeader(huge, 1 << 20, &type, &len).Is(Status::Code::kCorruption));
  Op op;
  EXPECT_FALSE(DecodeOp(99, b.data(), 10, &op).ok());
  uint8_t tiny_frame[24 + 4] = {};
  EXPECT_FALSE(
      DecodeOp(static_cast<uint8_t>(Type::kFrame), tiny_frame, sizeof(tiny_frame), &op).ok());
}

}  // namespace
}  // namespace ramp::transport::wire
