// SHA-256 (FIPS 180-4 examples) and HMAC-SHA256 (RFC 4231 test cases).
#include <gtest/gtest.h>

#include <string>

#include "common/sha256.h"

namespace zc {
namespace {

std::string FromHex(const std::string& hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2)
    out += static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16));
  return out;
}

std::string HashHex(const std::string& s) { return ToHex(Sha256::Hash(s)); }

std::string MacHex(const std::string& key, const std::string& data) {
  return ToHex(HmacSha256::Mac(key.data(), key.size(), data.data(), data.size()));
}

TEST(Sha256, FipsVectors) {
  EXPECT_EQ(HashHex(""),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(HashHex("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(HashHex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(HashHex("abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmn"
                    "hijklmnoijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu"),
            "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");
}

TEST(Sha256, MillionAInOddChunks) {
  Sha256 s;
  std::string chunk(997, 'a');  // odd size: exercises partial blocks
  size_t left = 1000000;
  while (left > 0) {
    size_t n = left < chunk.size() ? left : chunk.size();
    s.Update(chunk.data(), n);
    left -= n;
  }
  EXPECT_EQ(ToHex(s.Final()),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(Sha256, IncrementalEqualsOneShotAtEveryLength) {
  std::string data;
  for (int i = 0; i < 300; ++i) data += static_cast<char>(i * 7 + 3);
  for (size_t len = 0; len <= data.size(); ++len) {
    for (size_t split : {size_t(0), len / 3, len / 2, len}) {
      Sha256 s;
      s.Update(data.data(), split);
      s.Update(data.data() + split, len - split);
      ASSERT_EQ(ToHex(s.Final()), ToHex(Sha256::Hash(data.data(), len)))
          << "len " << len << " split " << split;
    }
  }
}

// RFC 4231 section 4.
TEST(HmacSha256, Rfc4231) {
  EXPECT_EQ(MacHex(std::string(20, '\x0b'), "Hi There"),
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
  EXPECT_EQ(MacHex("Jefe", "what do ya want for nothing?"),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  EXPECT_EQ(MacHex(std::string(20, '\xaa'), std::string(50, '\xdd')),
            "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe");
  EXPECT_EQ(MacHex(FromHex("0102030405060708090a0b0c0d0e0f10111213141516171819"),
                   std::string(50, '\xcd')),
            "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b");
  // Case 5: output truncated to 128 bits.
  EXPECT_EQ(MacHex(std::string(20, '\x0c'), "Test With Truncation").substr(0, 32),
            "a3b6167473100ee06e0c796c2955552b");
  // Cases 6 and 7: keys longer than a block are hashed first.
  EXPECT_EQ(MacHex(std::string(131, '\xaa'),
                   "Test Using Larger Than Block-Size Key - Hash Key First"),
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
  EXPECT_EQ(MacHex(std::string(131, '\xaa'),
                   "This is a test using a larger than block-size key and a "
                   "larger than block-size data. The key needs to be hashed "
                   "before being used by the HMAC algorithm."),
            "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2");
}

TEST(HmacSha256, IncrementalAndKeySensitivity) {
  HmacSha256 h("key", 3);
  h.Update("hello ", 6);
  h.Update("world", 5);
  Digest256 a = h.Final();
  Digest256 b = HmacSha256::Mac("key", 3, "hello world", 11);
  EXPECT_EQ(ToHex(a), ToHex(b));
  Digest256 c = HmacSha256::Mac("kez", 3, "hello world", 11);
  EXPECT_NE(ToHex(a), ToHex(c));
}

TEST(ConstantTimeEqual, Basics) {
  EXPECT_TRUE(ConstantTimeEqual("abcd", "abcd", 4));
  EXPECT_FALSE(ConstantTimeEqual("abcd", "abce", 4));
  EXPECT_FALSE(ConstantTimeEqual("xbcd", "abcd", 4));
  EXPECT_TRUE(ConstantTimeEqual("a", "b", 0));
}

}  // namespace
}  // namespace zc
