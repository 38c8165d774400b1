#include "common/status.h"

#include <cstring>

#include "common/log.h"

namespace zc {

std::string VFormat(const char* fmt, va_list ap) {
  va_list copy;
  va_copy(copy, ap);
  char small[256];
  int n = vsnprintf(small, sizeof(small), fmt, copy);
  va_end(copy);
  if (n < 0) return std::string(fmt);
  if (static_cast<size_t>(n) < sizeof(small)) return std::string(small, n);
  std::string out(static_cast<size_t>(n), '\0');
  vsnprintf(out.data(), out.size() + 1, fmt, ap);
  return out;
}

std::string Format(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  std::string s = VFormat(fmt, ap);
  va_end(ap);
  return s;
}

Status Error(zc_status code, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  std::string s = VFormat(fmt, ap);
  va_end(ap);
  return Status(code, std::move(s));
}

Status SystemError(int err, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  std::string s = VFormat(fmt, ap);
  va_end(ap);
  s += ": ";
  s += strerror(err);
  return Status(ZC_ERR_SYSTEM, std::move(s), ErrorOrigin::kErrno, err);
}

const std::string& Status::EmptyMessage() {
  static const std::string empty;
  return empty;
}

const char* ErrorOriginName(ErrorOrigin o) {
  switch (o) {
    case ErrorOrigin::kNone: return "none";
    case ErrorOrigin::kErrno: return "errno";
    case ErrorOrigin::kCuda: return "CUresult";
    case ErrorOrigin::kVerbs: return "ibv_wc_status";
  }
  return "unknown";
}

void IgnoreError(const Status& st, const char* why) {
  if (!st.ok()) ZC_TRACE(kCommon, "ignored (%s): %s", why, st.message().c_str());
}

}  // namespace zc
