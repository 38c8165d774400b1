// Reading a fuzz input as a sequence of fields. Running out of bytes gives
// zeros, so every input is usable and short inputs stay meaningful.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "common/status.h"

namespace zc::fuzz {

// A status made from a peer's bytes must hold a real zc_status: what the
// caller gets from the C API (zc_status_string). Checked explicitly so the
// standalone driver (no sanitizers) catches a regression too.
inline void CheckStatus(const Status& st) {
  zc_status code = st.code();
  int raw = 0;
  memcpy(&raw, &code, sizeof(raw) < sizeof(code) ? sizeof(raw) : sizeof(code));
  if (raw < ZC_OK || raw > ZC_ERR_INTERNAL) __builtin_trap();
  (void)zc_status_string(code);
}

class Input {
 public:
  Input(const uint8_t* data, size_t size) : p_(data), left_(size) {}
  size_t left() const { return left_; }
  const uint8_t* here() const { return p_; }

  template <typename T>
  T Get() {
    T v{};
    size_t n = left_ < sizeof(T) ? left_ : sizeof(T);
    memcpy(&v, p_, n);
    Skip(n);
    return v;
  }
  // Up to n bytes (fewer when the input ends).
  std::string Bytes(size_t n) {
    if (n > left_) n = left_;
    std::string s(reinterpret_cast<const char*>(p_), n);
    Skip(n);
    return s;
  }
  std::string Rest() { return Bytes(left_); }
  void Skip(size_t n) {
    p_ += n;
    left_ -= n;
  }

 private:
  const uint8_t* p_;
  size_t left_;
};

}  // namespace zc::fuzz
