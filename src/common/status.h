// Status: the error value every internal call returns (no exceptions on the
// data path). It carries a zc_status code and a message that names rank,
// peer, operation and cause, e.g. "rank 2: allreduce #41: peer 3 lost: ...".
// [[nodiscard]]: a status is handled, or dropped explicitly with
// IgnoreError() and the reason. Like MSCCL++'s errors.hpp, a failure keeps
// the number it came from (errno, CUresult, ibv_wc_status) beside the
// message: origin() / origin_code().
#pragma once

#include <zcomm/zcomm.h>

#include <cstdarg>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>

namespace zc {

// Where a failure's number comes from.
enum class ErrorOrigin : uint8_t {
  kNone = 0,
  kErrno,   // an errno value (system calls, verbs calls that set errno)
  kCuda,    // a CUresult of the CUDA driver API
  kVerbs,   // an ibv_wc_status of a failed work completion
};
const char* ErrorOriginName(ErrorOrigin o);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(zc_status code, std::string message)
      : rep_(code == ZC_OK && message.empty()
                 ? nullptr
                 : std::make_unique<Rep>(Rep{code, std::move(message), ErrorOrigin::kNone, 0})) {}
  Status(zc_status code, std::string message, ErrorOrigin origin, int origin_code)
      : rep_(std::make_unique<Rep>(Rep{code, std::move(message), origin, origin_code})) {}
  Status(const Status& o) : rep_(o.rep_ ? std::make_unique<Rep>(*o.rep_) : nullptr) {}
  Status(Status&&) noexcept = default;  // leaves a success behind
  Status& operator=(const Status& o) {
    if (this != &o) rep_ = o.rep_ ? std::make_unique<Rep>(*o.rep_) : nullptr;
    return *this;
  }
  Status& operator=(Status&&) noexcept = default;
  ~Status() = default;

  static Status Ok() { return Status(); }

  bool ok() const { return rep_ == nullptr || rep_->code == ZC_OK; }
  zc_status code() const { return rep_ ? rep_->code : ZC_OK; }
  const std::string& message() const { return rep_ ? rep_->message : EmptyMessage(); }
  // The number the failure came from (kNone / 0 when it came from none).
  ErrorOrigin origin() const { return rep_ ? rep_->origin : ErrorOrigin::kNone; }
  int origin_code() const { return rep_ ? rep_->origin_code : 0; }

  // Returns a copy whose message is "<prefix>: <message>" (origin kept).
  Status with_context(const std::string& prefix) const {
    if (ok()) return *this;
    return Status(rep_->code, prefix + ": " + rep_->message, rep_->origin, rep_->origin_code);
  }
  // Returns a copy with the origin set (the message is unchanged).
  Status with_origin(ErrorOrigin origin, int origin_code) const {
    return Status(code(), message(), origin, origin_code);
  }

 private:
  // What a status says beyond success. A success is a null pointer: the
  // data path makes and drops several statuses per message, and a pointer
  // costs a store and a test where a code beside an inline string cost
  // tens of instructions each time.
  struct Rep {
    zc_status code;
    std::string message;
    ErrorOrigin origin;
    int origin_code;
  };
  static const std::string& EmptyMessage();
  std::unique_ptr<Rep> rep_;
};

// Drops a status on purpose (best effort, e.g. on a shutdown path); `why`
// documents the reason at the call site. Failures are logged at TRACE level.
void IgnoreError(const Status& st, const char* why);

// printf-style constructor: Error(ZC_ERR_TIMEOUT, "peer %d: no flag after %ds", p, s)
Status Error(zc_status code, const char* fmt, ...)
    __attribute__((format(printf, 2, 3)));

// "errno text" helper for system-call failures: "<what>: <strerror(err)>";
// origin kErrno, err.
Status SystemError(int err, const char* fmt, ...)
    __attribute__((format(printf, 2, 3)));

std::string Format(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

// A failure a peer reported as a number (a store reply, a tcp read refusal,
// a rendezvous verdict, a PS answer). A number that is no zc_status error
// (0 included) must not be cast to zc_status: it becomes ZC_ERR_INTERNAL,
// with the number in the message.
inline Status StatusFromPeer(long long code, const std::string& message) {
  if (code > ZC_OK && code <= ZC_ERR_INTERNAL) return Status(static_cast<zc_status>(code), message);
  return Status(ZC_ERR_INTERNAL, message + " (unknown status code " + std::to_string(code) + ")");
}
std::string VFormat(const char* fmt, va_list ap);

}  // namespace zc

#define ZC_RETURN_IF_ERROR(expr)           \
  do {                                     \
    ::zc::Status _zc_st = (expr);          \
    if (!_zc_st.ok()) return _zc_st;       \
  } while (0)
