// The server's built-in optimizer: value -= scale * grad, elementwise, for
// the floating types (float16 and bfloat16 computed in float and rounded
// once per element). scale is sgd_lr / (number of pushes summed in grad).
#pragma once

#include <zcomm/zcomm.h>

#include <cstddef>

namespace zc::ps {

void SgdUpdate(zc_dtype dtype, void* value, const void* grad, size_t count, double scale);

}  // namespace zc::ps
