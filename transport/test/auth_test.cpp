#include "ramp/transport/auth.h"

#include <gtest/gtest.h>

#include <string>

#include "core/sha256.h"

namespace ramp::transport {
namespace {

std::string Hex(const Digest& d) {
  static const char* digits = "0123456789abcdef";
  std::string s;
  for (uint8_t b : d) {
    s += digits[b >> 4];
    s += digits[b & 15];
  }
  return s;
}

std::string Sha(const std::string& s) {
  return Hex(Sha256(s.data(), s.size()));
}

// FIPS 180-2 appendix B and the NIST example vectors.
TEST(Sha256, FipsVectors) {
  EXPECT_EQ(Sha(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(Sha("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(Sha("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(Sha("abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopq"
                "klmnopqrlmnopqrsmnopqrstnopqrstu"),
            "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");
  EXPECT_EQ(Sha(std::string(1000000, 'a')),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(Sha256, IncrementalEqualsOneShot) {
  std::string data;
  for (int i = 0; i < 1000; i++) data += static_cast<char>(i * 7);
  for (size_t split : {0ul, 1ul, 55ul, 56ul, 63ul, 64ul, 65ul, 500ul, 1000ul}) {
    Sha256Context ctx;
    ctx.Update(data.data(), split);
    ctx.Update(data.data() + split, data.size() - split);
    EXPECT_EQ(Hex(ctx.Finish()), Sha(data)) << split;
  }
}

std::string Hmac(const std::string& key, const std::string& data) {
  return Hex(HmacSha256(key, data.data(), data.size()));
}

// RFC 4231 test cases 1-4, 6, 7 (case 5 truncates the output).
TEST(HmacSha256, Rfc4231Vectors) {
  EXPECT_EQ(Hmac(std::string(20, '\x0b'), "Hi There"),
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
  EXPECT_EQ(Hmac("Jefe", "what do ya want for nothing?"),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  EXPECT_EQ(Hmac(std::string(20, '\xaa'), std::string(50, '\xdd')),
            "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe");
  std::string key4;
  for (int i = 1; i <= 25; i++) key4 += static_cast<char>(i);
  EXPECT_EQ(Hmac(key4, std::string(50, '\xcd')),
            "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b");
  EXPECT_EQ(
      Hmac(std::string(131, '\xaa'), "Test Using Larger Than Block-Size Key - Hash Key First"),
      "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
  EXPECT_EQ(Hmac(std::string(131, '\xaa'),
                 "This is a test using a larger than block-size key and a larger than block-size "
                 "data. The key needs to be hashed before being used by the HMAC algorithm."),
            "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2");
}

TEST(Auth, ProofsBindRoleNoncesAndToken) {
  Nonce cn, sn;
  RandomNonce(&cn);
  RandomNonce(&sn);
  EXPECT_NE(cn, sn);  // 2^-256 chance of a false failure
  const Digest client = Proof("token", "ramp-client", cn, sn);
  EXPECT_TRUE(DigestEqual(client, Proof("token", "ramp-client", cn, sn)));
  EXPECT_FALSE(DigestEqual(client, Proof("token", "ramp-server", cn, sn)));
  EXPECT_FALSE(DigestEqual(client, Proof("tokeN", "ramp-client", cn, sn)));
  EXPECT_FALSE(DigestEqual(client, Proof("token", "ramp-client", sn, cn)));
  // role || client_nonce || server_nonce, as auth.h documents.
  std::string msg = "ramp-client";
  msg.append(reinterpret_cast<const char*>(cn.data()), cn.size());
  msg.append(reinterpret_cast<const char*>(sn.data()), sn.size());
  EXPECT_TRUE(DigestEqual(client, HmacSha256("token", msg.data(), msg.size())));
  Digest other = client;
  other[31] ^= 1;
  EXPECT_FALSE(DigestEqual(client, other));
  EXPECT_NE(RandomU64(), RandomU64());
}

}  // namespace
}  // namespace ramp::transport
