// StreamCopy and CopyForReader: the bytes arrive whole at every size and
// alignment, including the sizes around a page and the prefetch distance
// (where the copy starts prefetching pages ahead), and nothing beside the
// destination changes; PrefetchPages accepts any range.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "common/page_prefetch.h"
#include "common/stream_copy.h"

namespace {

constexpr size_t kGuard = 96;

std::vector<size_t> Sizes() {
  const size_t page = zc::kPageBytes, ahead = zc::kPrefetchAheadBytes;
  return {0,        1,        7,         15,        16,        17,       63,        64,
          65,       127,      997,       page - 1,  page,      page + 1, 3 * page + 13,
          ahead - 64, ahead - 1, ahead,  ahead + 1, ahead + 64, ahead + page, 2 * ahead + 1,
          (1u << 20) + 7, (4u << 20) - 3};
}

// dst[doff, doff + bytes) == src[soff, ...], guards around it untouched.
void CheckCopy(void (*copy)(void*, const void*, size_t), size_t bytes, size_t soff, size_t doff) {
  std::vector<uint8_t> src(bytes + soff + 1), dst(bytes + doff + 2 * kGuard);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(i * 131 + 7);
  for (auto& b : dst) b = 0xA5;
  copy(dst.data() + kGuard + doff, src.data() + soff, bytes);
  zc::StreamFence();
  for (size_t i = 0; i < kGuard + doff; ++i) ASSERT_EQ(dst[i], 0xA5) << "before the copy, byte " << i;
  for (size_t i = 0; i < bytes; ++i)
    ASSERT_EQ(dst[kGuard + doff + i], src[soff + i])
        << "bytes " << bytes << " src+" << soff << " dst+" << doff << " at " << i;
  for (size_t i = kGuard + doff + bytes; i < dst.size(); ++i) ASSERT_EQ(dst[i], 0xA5) << "after the copy";
}

TEST(StreamCopy, EverySizeAndAlignment) {
  for (size_t bytes : Sizes())
    for (size_t soff : {0, 1, 8, 15, 33})
      for (size_t doff : {0, 1, 8, 15, 48}) CheckCopy(zc::StreamCopy, bytes, soff, doff);
}

TEST(StreamCopy, RepeatedIntoTheSameBuffer) {
  // A slot written round after round: every round's bytes, not a mix.
  const size_t bytes = 3 * zc::kPrefetchAheadBytes + 100;
  std::vector<uint8_t> dst(bytes);
  for (int round = 0; round < 5; ++round) {
    std::vector<uint8_t> src(bytes, static_cast<uint8_t>(round + 1));
    zc::StreamCopy(dst.data(), src.data(), bytes);
    zc::StreamFence();
    ASSERT_EQ(dst, src) << "round " << round;
  }
}

TEST(CopyForReader, BothSidesOfTheThreshold) {
  const size_t from = 64 * 1024;
  for (size_t bytes : {size_t{0}, size_t{1}, from - 1, from, from + 4097}) {
    std::vector<uint8_t> src(bytes + 3), dst(bytes + 3, 0);
    for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(i ^ 0x5A);
    zc::CopyForReader(dst.data() + 1, src.data() + 2, bytes, from);
    for (size_t i = 0; i < bytes; ++i) ASSERT_EQ(dst[1 + i], src[2 + i]) << bytes << " at " << i;
    EXPECT_EQ(dst[0], 0);
    EXPECT_EQ(dst[bytes + 1], 0);
  }
}

TEST(PrefetchPages, AnyRange) {
  // Hints only: every range of a buffer, empty and unaligned included.
  std::vector<uint8_t> buf(5 * zc::kPageBytes + 3, 1);
  for (size_t off : {0, 1, 4095, 4096})
    for (size_t bytes : {0, 1, 4096, 4097, 3 * 4096}) {
      zc::PrefetchPages(buf.data() + off, bytes);
      zc::PrefetchPagesForWrite(buf.data() + off, bytes);
    }
  for (uint8_t b : buf) ASSERT_EQ(b, 1);
}

}  // namespace
