// Operation signatures on the wire (collectives/signature.h): every field
// survives Pack/Unpack at its limits (root up to ZC_SIZE's maximum 2^24 - 1,
// no root, each memory path), foreign values are refused, and a mismatch
// names what differs — the memory path first.
#include <gtest/gtest.h>

#include <string>

#include "collectives/dtype.h"
#include "collectives/signature.h"

namespace zc::coll {
namespace {

Signature Make(int root, MemPath mem) {
  Signature s;
  s.kind = root >= 0 ? Kind::kBroadcast : Kind::kAllreduce;
  s.dtype = ZC_FLOAT64;
  s.op = ZC_BXOR;
  s.root = root;
  s.algo = Algo::kDirect;
  s.count = 0xfedcba9876543210ull;
  s.seq = 77;
  s.mem = mem;
  return s;
}

TEST(SignatureWire, RoundTripsEveryFieldAtItsLimits) {
  for (int root : {-1, 0, 1, 65535, (1 << 24) - 1}) {
    for (MemPath mem : {MemPath::kHost, MemPath::kCudaIpc, MemPath::kStagedParts}) {
      const Signature s = Make(root, mem);
      uint64_t aux[kSigWords];
      s.Pack(aux, MessageTag(3, 4), 9);
      Signature back;
      ASSERT_TRUE(Signature::Unpack(aux, &back)) << root;
      EXPECT_TRUE(back.SameCall(s)) << back.Describe(true, true, true) << " vs "
                                    << s.Describe(true, true, true);
      EXPECT_EQ(back.root, root);
      EXPECT_EQ(back.mem, mem);
      EXPECT_EQ(aux[3], MessageTag(3, 4));
      EXPECT_EQ(aux[4], 9u);
    }
  }
}

// Every dtype up to the last (bool) travels; one past it is refused, and a
// dtype mismatch names both dtypes.
TEST(SignatureWire, EveryDtypeAndNoOtherTravels) {
  for (int d = 0; d <= kNumDtypes; ++d) {
    Signature s = Make(-1, MemPath::kHost);
    s.dtype = static_cast<zc_dtype>(d);
    uint64_t aux[kSigWords];
    s.Pack(aux, 0, 0);
    Signature back;
    EXPECT_EQ(Signature::Unpack(aux, &back), d < kNumDtypes) << d;
    if (d < kNumDtypes) {
      EXPECT_EQ(back.dtype, s.dtype);
    }
  }
  Signature mine = Make(-1, MemPath::kHost), theirs = Make(-1, MemPath::kHost);
  mine.dtype = ZC_INT16;
  theirs.dtype = ZC_BOOL;
  uint64_t aux[kSigWords];
  theirs.Pack(aux, 0, 1);
  Status st = CheckSignature(mine, 0, 0, aux, 1);
  EXPECT_EQ(st.code(), ZC_ERR_MISMATCH);
  EXPECT_NE(st.message().find("bool"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("int16"), std::string::npos) << st.message();
}

TEST(SignatureWire, ForeignMemoryPathIsRefused) {
  uint64_t aux[kSigWords];
  Make(-1, MemPath::kHost).Pack(aux, 0, 0);
  aux[0] |= uint64_t{5} << 57;
  Signature out;
  EXPECT_FALSE(Signature::Unpack(aux, &out));
}

TEST(SignatureWire, MismatchNamesTheMemoryPath) {
  Signature mine = Make(-1, MemPath::kHost), theirs = Make(-1, MemPath::kCudaIpc);
  uint64_t aux[kSigWords];
  theirs.Pack(aux, 0, 1);
  Status st = CheckSignature(mine, 0, 0, aux, 1);
  EXPECT_EQ(st.code(), ZC_ERR_MISMATCH);
  EXPECT_NE(st.message().find("rank 1 called allreduce(count=18364758544493064720, float64, bxor, "
                              "device memory over CUDA IPC) but rank 0 called "
                              "allreduce(count=18364758544493064720, float64, bxor, host memory)"),
            std::string::npos)
      << st.message();
  // Staged in parts (gpu/pipelined_staging.h) against host memory.
  theirs.mem = MemPath::kStagedParts;
  theirs.Pack(aux, 0, 1);
  st = CheckSignature(mine, 0, 0, aux, 1);
  EXPECT_EQ(st.code(), ZC_ERR_MISMATCH);
  EXPECT_NE(st.message().find("device memory staged in parts) but rank 0 called"), std::string::npos)
      << st.message();
  // Same path: the message stays as it was (no memory path named).
  theirs.mem = MemPath::kHost;
  theirs.count = 5;
  theirs.Pack(aux, 0, 1);
  st = CheckSignature(mine, 0, 0, aux, 1);
  EXPECT_EQ(st.code(), ZC_ERR_MISMATCH);
  EXPECT_EQ(st.message().find("memory"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace zc::coll
