// Runs f without the GIL when the calling thread holds it (a destructor
// that pybind11 calls under the GIL, and that may wait: a finalize, a
// request's completion), and as it is otherwise (a thread that never had it).
#pragma once

#include <Python.h>
#include <pybind11/pybind11.h>

namespace zcpy {

template <class F>
void WithoutGil(F&& f) {
  if (PyGILState_Check()) {
    pybind11::gil_scoped_release nogil;
    f();
  } else {
    f();
  }
}

}  // namespace zcpy
