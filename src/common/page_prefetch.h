// Software prefetch of the pages a stream reaches next. The hardware
// prefetchers of current x86 cores stop at 4 KiB page boundaries, and a
// stream through memory that no core touched lately misses the TLB at every
// page (a two-level walk under a hypervisor). Touching one line of each page
// ahead starts that walk and the line's fetch while the current page is
// still being copied. On the project's VM (perf/page_prefetch, 4 KiB-page
// shared memory) a non-temporal copy took 0.67-0.88x the time with its
// pages prefetched 32 KiB ahead; a reduction of 2-4 inputs in 16 KiB
// chunks with the next chunk's pages prefetched 0.79-1.06x, depending on
// the VM's phase. So copies always prefetch (StreamCopy), and of the
// reduction loops those whose streams are mostly cold user memory and
// parameter-server regions (the sharded allreduce rounds, the server's
// sums), where the library before and after measured 0.89-0.97x; the
// zero-copy allreduce round, whose reductions read every rank's input at
// once, measured 0.96-1.03x with it and does without
// (docs/PERFORMANCE.md, "Pages ahead").
#pragma once

#include <cstddef>

namespace zc {

constexpr size_t kPageBytes = 4096;
// How far ahead a long copy prefetches: 16 to 32 KiB ahead took the same
// time, 4-8 KiB ahead about 5% more.
constexpr size_t kPrefetchAheadBytes = 32 * 1024;

// One prefetch per page of [p, p + bytes), for reading or for writing (a
// write hint where the target has one, else the same non-temporal read
// prefetch: what matters is the page walk it starts).
inline void PrefetchPages(const void* p, size_t bytes) {
  const char* c = static_cast<const char*>(p);
  for (size_t off = 0; off < bytes; off += kPageBytes) __builtin_prefetch(c + off, 0, 0);
}
inline void PrefetchPagesForWrite(void* p, size_t bytes) {
  char* c = static_cast<char*>(p);
  for (size_t off = 0; off < bytes; off += kPageBytes) __builtin_prefetch(c + off, 1, 0);
}

}  // namespace zc
