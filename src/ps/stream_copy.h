// StreamCopy: a copy whose destination is not read again soon by this core
// (a push into another process's slot, a pull's copy into the caller's
// tensor): from 64 KiB on, with non-temporal stores, which write whole lines
// without first reading them (a plain store into a line that is not in this
// core's cache reads it: for tensors far larger than the caches that is one
// more pass over memory), then a store fence, so that a flag stored after
// the call with release order is seen after the data. Smaller copies, and
// other architectures: memcpy.
#pragma once

#include <cstddef>

namespace zc::ps {

void StreamCopy(void* dst, const void* src, size_t bytes);

}  // namespace zc::ps
