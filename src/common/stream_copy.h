// Copies that write around the caches (non-temporal stores): for outputs
// that nobody reads again soon, they save the read of every output line
// that a plain store makes first (a third of an allreduce's memory traffic).
#pragma once

#include <cstddef>

namespace zc {

// memcpy(dst, src, bytes) with non-temporal stores where the CPU has them
// (x86-64), plain memcpy elsewhere. Ends with a store fence: the bytes are
// visible to other cores before a later release store (a flag) is.
void StreamCopy(void* dst, const void* src, size_t bytes);

}  // namespace zc
