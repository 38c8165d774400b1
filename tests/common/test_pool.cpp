// Pool growth under ZC_POOL_MAX: the cap counts every chunk, and the last
// chunk is what is left of the cap, so all of it can be used.
#include <gtest/gtest.h>

#include <cstdlib>

#include "p2p/pool.h"

namespace {

struct OwnedRegion : zc::MemRegion {
  OwnedRegion(size_t bytes, uint64_t id) : zc::MemRegion(calloc(1, bytes), bytes, id) {}
  ~OwnedRegion() override { free(data()); }
};

zc::Pool MakePool(size_t chunk, size_t max, int* chunks_made) {
  static uint64_t next_id = 1;
  return zc::Pool(
      chunk, max,
      [chunks_made](size_t bytes, std::unique_ptr<zc::MemRegion>* out) {
        ++*chunks_made;
        *out = std::make_unique<OwnedRegion>(bytes, next_id++);
        return zc::Status::Ok();
      },
      [](zc::MemRegion*, bool) {}, [] { return next_id++; });
}

TEST(Pool, LastChunkIsWhatIsLeftOfTheCap) {
  int made = 0;
  zc::Pool pool = MakePool(8192, 12288, &made);
  zc::MemRegion *a, *b, *c, *d;
  ASSERT_TRUE(pool.Allocate(4096, &a).ok());
  ASSERT_TRUE(pool.Allocate(4096, &b).ok());
  zc::Status st = pool.Allocate(4096, &c);  // a 4096-byte chunk fits the cap
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(pool.bytes_reserved(), 12288u);
  EXPECT_EQ(made, 2);
  st = pool.Allocate(64, &d);
  EXPECT_EQ(st.code(), ZC_ERR_NO_MEMORY);
  EXPECT_NE(st.message().find("ZC_POOL_MAX=12288"), std::string::npos) << st.message();
}

}  // namespace
