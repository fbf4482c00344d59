#include "ramp/bytes.h"

#include <gtest/gtest.h>

namespace ramp {
namespace {

TEST(Bytes, RoundTripLittleEndian) {
  std::vector<uint8_t> buf;
  ByteWriter w(&buf);
  w.PutU8(0xab);
  w.PutU16(0x1234);
  w.PutU32(0xdeadbeef);
  w.PutU64(0x0102030405060708ull);
  w.PutString("hello");
  w.PutBytes("xyz", 3);
  ASSERT_EQ(buf.size(), 1u + 2 + 4 + 8 + 4 + 5 + 3);
  EXPECT_EQ(buf[1], 0x34);  // little-endian on the wire
  EXPECT_EQ(buf[2], 0x12);

  ByteReader r(buf.data(), buf.size());
  uint8_t a;
  uint16_t b;
  uint32_t c;
  uint64_t d;
  std::string s;
  char tail[3];
  ASSERT_TRUE(r.GetU8(&a) && r.GetU16(&b) && r.GetU32(&c) && r.GetU64(&d));
  ASSERT_TRUE(r.GetString(&s, 100));
  ASSERT_TRUE(r.GetBytes(tail, 3));
  EXPECT_EQ(a, 0xab);
  EXPECT_EQ(b, 0x1234);
  EXPECT_EQ(c, 0xdeadbeefu);
  EXPECT_EQ(d, 0x0102030405060708ull);
  EXPECT_EQ(s, "hello");
  EXPECT_EQ(std::string(tail, 3), "xyz");
  EXPECT_TRUE(r.empty());
  EXPECT_TRUE(r.ExpectEnd("test").ok());
}

TEST(Bytes, OverrunFailsAndConsumesNothing) {
  const uint8_t three[3] = {1, 2, 3};
  ByteReader r(three, sizeof(three));
  uint32_t v = 77;
  EXPECT_FALSE(r.GetU32(&v));
  EXPECT_EQ(v, 77u);
  EXPECT_EQ(r.remaining(), 3u);
  const uint8_t* view = nullptr;
  EXPECT_FALSE(r.GetView(4, &view));
  EXPECT_FALSE(r.Skip(4));
  uint16_t h;
  EXPECT_TRUE(r.GetU16(&h));
  EXPECT_EQ(h, 0x0201);
  Status s = r.ExpectEnd("MSG");
  EXPECT_TRUE(s.Is(Status::Code::kCorruption));
  EXPECT_NE(s.message().find("MSG"), std::string::npos);
}

TEST(Bytes, StringLengthIsBoundedAndChecked) {
  std::vector<uint8_t> buf;
  ByteWriter w(&buf);
  w.PutU32(1000);  // claims 1000 bytes
  w.PutBytes("abc", 3);
  ByteReader r(buf.data(), buf.size());
  std::string s;
  EXPECT_FALSE(r.GetString(&s, 5000));  // truncated
  EXPECT_EQ(r.remaining(), buf.size());
  EXPECT_FALSE(r.GetString(&s, 10));  // over the caller's limit
}

TEST(Bytes, EmptyAndNullBuffers) {
  ByteReader r(nullptr, 10);  // a null buffer is empty whatever the size says
  uint8_t v;
  EXPECT_FALSE(r.GetU8(&v));
  EXPECT_TRUE(r.empty());
  std::string out;
  StringByteWriter w(&out);
  w.PutU32(7);
  EXPECT_EQ(out.size(), 4u);
  w.PatchU32(0, 0x01020304);
  ByteReader r2(out);
  uint32_t x;
  ASSERT_TRUE(r2.GetU32(&x));
  EXPECT_EQ(x, 0x01020304u);
}

}  // namespace
}  // namespace ramp
