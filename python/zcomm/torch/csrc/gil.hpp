// Lets go of Python's GIL for a scope, if this thread holds it. A group dropped
// from Python is destroyed with the GIL held, while its threads may need the
// GIL to free the last reference to a tensor's Python object: joining them
// with the GIL held would deadlock.
#pragma once

#include <Python.h>

namespace zcomm_torch {

class GilReleased {
 public:
  GilReleased() : saved_(Py_IsInitialized() && PyGILState_Check() ? PyEval_SaveThread() : nullptr) {}
  ~GilReleased() {
    if (saved_) PyEval_RestoreThread(saved_);
  }
  GilReleased(const GilReleased&) = delete;
  GilReleased& operator=(const GilReleased&) = delete;

 private:
  PyThreadState* saved_;
};

}  // namespace zcomm_torch
