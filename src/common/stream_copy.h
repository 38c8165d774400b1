// Copies that write around the caches (non-temporal stores): for outputs
// that nobody reads again soon, they save the read of every output line
// that a plain store makes first (a third of an allreduce's memory traffic).
#pragma once

#include <cstddef>

namespace zc {

// memcpy(dst, src, bytes) with non-temporal stores where the CPU has them
// (x86-64), plain memcpy elsewhere. Non-temporal stores are weakly ordered:
// call StreamFence() before a store that tells another core the bytes are
// there (a flag).
// Every page of src and dst is prefetched kPrefetchAheadBytes ahead of the
// copy (common/page_prefetch.h).
void StreamCopy(void* dst, const void* src, size_t bytes);
// The same, prefetching `ahead` bytes ahead (0: none); for benchmarks.
void StreamCopyAhead(void* dst, const void* src, size_t bytes, size_t ahead);
// Orders every earlier StreamCopy before later stores (sfence).
void StreamFence();
// A copy another core reads next (a push into another process's slot, a
// pull's copy into the caller's tensor): StreamCopy and StreamFence from
// `from_bytes` on, where writing around the cache saves the read of every
// destination line; memcpy below, where the lines are likely cached anyway.
void CopyForReader(void* dst, const void* src, size_t bytes, size_t from_bytes);

}  // namespace zc
