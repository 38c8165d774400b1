// What a collective's reader checks on a peer's slot message before it
// touches the payload (collectives/signature.h CheckSlotMessage, called by
// OpCtx::Recv for every collective): the peer's operation signature against
// ours (the gather/scatter root and count agreement, every algorithm's
// lockstep tag), the block header of allgatherv/alltoallv messages, the
// size; and the mismatch message that names both calls.
#include <zcomm/zcomm.h>

#include "collectives/dtype.h"
#include "collectives/signature.h"
#include "fuzz_input.h"

using namespace zc::coll;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  zc::fuzz::Input in(data, size);
  // Our own call: valid values, as the API has checked them.
  Signature mine;
  mine.kind = static_cast<Kind>(in.Get<uint8_t>() % kNumKinds);
  mine.dtype = static_cast<zc_dtype>(in.Get<uint8_t>() % zc::kNumDtypes);
  mine.op = static_cast<zc_op>(in.Get<uint8_t>() % (ZC_BXOR + 1));
  mine.algo = static_cast<Algo>(in.Get<uint8_t>() % (static_cast<int>(Algo::kHier) + 1));
  mine.root = in.Get<int32_t>();
  mine.count = in.Get<uint64_t>();
  mine.seq = in.Get<uint64_t>();
  const int my_rank = in.Get<int32_t>(), peer = in.Get<int32_t>();
  const uint64_t tag = in.Get<uint64_t>(), expect_bytes = in.Get<uint64_t>();
  const bool has_block = in.Get<uint8_t>() & 1;
  MessageBlock block{in.Get<int32_t>(), in.Get<uint64_t>()};
  // The peer's slot header: anything.
  uint64_t aux[7];
  for (auto& w : aux) w = in.Get<uint64_t>();
  const uint64_t bytes = in.Get<uint64_t>();
  zc::Status st =
      CheckSlotMessage(mine, my_rank, tag, expect_bytes, has_block ? &block : nullptr, aux, bytes, peer);
  zc::fuzz::CheckStatus(st);
  (void)st.message().size();
  return 0;
}
