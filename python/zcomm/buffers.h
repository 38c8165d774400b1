// The last line of defence between Python objects and raw pointers: every
// buffer handed to the C ABI is a C-contiguous numpy array holding at least
// the bytes the call will touch (zcomm/arrays.py prepares them; this only
// refuses what would let the library read or write outside an array).
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cstddef>

#include "failure.h"

namespace zcpy {

namespace py = pybind11;

// The data pointer of `obj` (nullptr for None when `optional`).
inline void* BufferPointer(const py::object& obj, size_t bytes, bool writable, bool optional,
                           int rank, const char* op, const char* name) {
  if (obj.is_none()) {
    if (optional || bytes == 0) return nullptr;
    BadArg(Format("rank %d: %s: %s is None", rank, op, name));
  }
  if (!py::isinstance<py::array>(obj))
    BadArg(Format("rank %d: %s: %s is not a numpy array", rank, op, name));
  auto a = py::reinterpret_borrow<py::array>(obj);
  if (!(a.flags() & py::array::c_style))
    BadArg(Format("rank %d: %s: %s is not C-contiguous", rank, op, name));
  if (writable && !a.writeable())
    BadArg(Format("rank %d: %s: %s is read-only", rank, op, name));
  if (static_cast<size_t>(a.nbytes()) < bytes)
    BadArg(Format("rank %d: %s: %s holds %zd bytes, the call needs %zu", rank, op, name,
                  a.nbytes(), bytes));
  return const_cast<void*>(a.data());
}

// count elements of dtype, in bytes; refuses an unknown dtype or an overflow.
inline size_t ByteSize(size_t count, int dtype, size_t times, int rank, const char* op) {
  const size_t es = zc_dtype_size(static_cast<zc_dtype>(dtype));
  if (es == 0) BadArg(Format("rank %d: %s: unknown dtype %d", rank, op, dtype));
  size_t bytes;
  if (__builtin_mul_overflow(count, es, &bytes) || __builtin_mul_overflow(bytes, times, &bytes))
    BadArg(Format("rank %d: %s: %zu x %zu elements overflow", rank, op, count, times));
  return bytes;
}

}  // namespace zcpy
