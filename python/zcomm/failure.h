// A failed zcomm call on its way to Python: _zcomm.cpp's translator turns it
// into zcomm.Error(status, message) (errors.py).
#pragma once

#include <zcomm/zcomm.h>

#include <cstdarg>
#include <cstdio>
#include <exception>
#include <string>

namespace zcpy {

struct Failure : std::exception {
  zc_status status;
  std::string message;
  Failure(zc_status s, std::string m) : status(s), message(std::move(m)) {}
  const char* what() const noexcept override { return message.c_str(); }
};

inline std::string Format(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
inline std::string Format(const char* fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  return buf;
}

// Throws the failure of a zc_* call. Call it on the thread that made the
// call: zc_last_error is per thread.
inline void Check(zc_status st, const zc_comm* comm) {
  if (st == ZC_OK) return;
  const char* text = zc_last_error(comm);
  throw Failure(st, text && *text ? text : zc_status_string(st));
}

[[noreturn]] inline void BadArg(std::string message) {
  throw Failure(ZC_ERR_INVALID_ARG, std::move(message));
}

}  // namespace zcpy
