// Mapping of torch's dtypes and reduce ops onto zcomm's, with the checks that
// turn an unsupported tensor into a clear error at call time (on the caller's
// thread, before anything is queued).
#pragma once

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/Types.hpp>
#include <zcomm/zcomm.h>

#include <string>
#include <vector>

namespace zcomm_torch {

// "zcomm rank 1/4: allreduce: " — the prefix of every message.
std::string Prefix(int rank, int size, const std::string& op);

// Throws (c10::Error, a RuntimeError in Python) for dtypes zcomm lacks.
zc_dtype ToZcDtype(at::ScalarType t, const std::string& prefix);
// Throws for PREMUL_SUM, for AVG on integers and for bitwise ops on floats.
zc_op ToZcOp(const c10d::ReduceOp& op, at::ScalarType t, const std::string& prefix);

// A dense CPU tensor; non-contiguous is fine (staged).
void CheckTensor(const at::Tensor& t, const std::string& prefix, const char* what);
// Exactly one tensor in the list (zcomm takes one tensor per process).
void CheckSingle(const std::vector<at::Tensor>& ts, const std::string& prefix, const char* what);
// Every tensor of the list has t's dtype and number of elements.
void CheckSameAs(const std::vector<at::Tensor>& ts, const at::Tensor& t, const std::string& prefix,
                 const char* what);

}  // namespace zcomm_torch
