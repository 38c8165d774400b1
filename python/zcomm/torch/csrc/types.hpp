// Mapping of torch's dtypes and reduce ops onto zcomm's, with the checks that
// turn an unsupported tensor into a clear error at call time (on the caller's
// thread, before anything is queued).
#pragma once

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/Types.hpp>
#include <zcomm/zcomm.h>

#include <cstddef>
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

namespace zcomm_torch {

// The prefix of every message about a call, "zcomm rank 1/4: allreduce: ".
// Every call makes one and almost none prints it, so it keeps its parts and
// is formatted only when streamed: TORCH_CHECK streams its message only
// when the check fails.
class CallPrefix {
 public:
  CallPrefix(int rank, int size, const char* op) : rank_(rank), size_(size), op_(op) {}
  // A prefix formatted by the caller (the engine's calls name their
  // tensor), not copied: a prefix is handed down a call, never kept, so
  // the caller's string outlives it.
  CallPrefix(const std::string& text) : text_(&text) {}  // NOLINT: implicit by design
  std::string str() const;
  friend std::ostream& operator<<(std::ostream& os, const CallPrefix& p);

 private:
  int rank_ = 0;
  int size_ = 0;
  const char* op_ = nullptr;          // a string literal, or null: text_ is the prefix
  const std::string* text_ = nullptr;
};

// op: a string literal (the prefix keeps the pointer).
inline CallPrefix Prefix(int rank, int size, const char* op) { return CallPrefix(rank, size, op); }

// One call of a group, as messages name it: "rank 1/4: allreduce #7" (its
// name and the group's count of its calls). Formatted only for a message.
struct CallId {
  int rank = 0;
  int size = 0;
  std::string name;  // "allreduce", "send to 1 tag 0"
  uint64_t seq = 0;
  std::string str() const;
  // "allreduce #7", the flight recorder's label, into buf (cut to fit).
  void Label(char* buf, size_t len) const;
};
std::ostream& operator<<(std::ostream& os, const CallId& c);

// Throws (c10::Error, a RuntimeError in Python) for dtypes zcomm lacks.
zc_dtype ToZcDtype(at::ScalarType t, const CallPrefix& prefix);
// Throws for PREMUL_SUM, for AVG on integers and for bitwise ops on floats.
zc_op ToZcOp(const c10d::ReduceOp& op, at::ScalarType t, const CallPrefix& prefix);

// A dense CPU tensor; non-contiguous is fine (staged).
void CheckTensor(const at::Tensor& t, const CallPrefix& prefix, const char* what);
// Exactly one tensor in the list (zcomm takes one tensor per process).
void CheckSingle(const std::vector<at::Tensor>& ts, const CallPrefix& prefix, const char* what);
// Every tensor of the list has t's dtype and number of elements.
void CheckSameAs(const std::vector<at::Tensor>& ts, const at::Tensor& t, const CallPrefix& prefix,
                 const char* what);

}  // namespace zcomm_torch
