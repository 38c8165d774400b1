// Request: what one rank says about one named operation. Requests travel
// between ranks in the negotiation's request exchange (serialized below), a
// Response is what every rank agreed to run, and the response cache keeps
// Responses so that a name seen before costs one bit per cycle.
#pragma once

#include <zcomm/zcomm.h>

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"

namespace zc::engine {

enum class OpType : uint8_t { kAllreduce, kBroadcast, kAllgather, kAlltoall, kReducescatter, kBarrier, kJoin };
const char* OpTypeName(OpType t);  // "allreduce"

struct Request {
  std::string name;
  OpType type = OpType::kAllreduce;
  zc_dtype dtype = ZC_FLOAT32;
  zc_op op = ZC_SUM;
  int32_t root = 0;
  double prescale = 1.0, postscale = 1.0;
  std::vector<int64_t> shape;
  std::vector<int64_t> splits;  // alltoall: rows to each rank
  // Where this rank's tensor is, as Horovod's request device: -1 host
  // memory (CPU_DEVICE_ID; also a device tensor staged through pinned host
  // memory at submission), else the CUDA device ordinal of an allreduce
  // whose input and output are that device's memory (the engine fuses
  // such tensors in a device fusion buffer). Ranks may differ.
  int32_t device = -1;
  // Not part of the identity: how long the request waited on its rank
  // before it was sent, so that the stall age counts from the first submit.
  uint32_t waited_ms = 0;

  int64_t elements() const;        // product of shape (1 for a scalar)
  int64_t row_elements() const;    // product of shape[1:]
  std::string Describe() const;    // "allreduce sum float32 [4, 3]" (+ " on GPU 0")
};

// Same operation as far as the cache is concerned (everything but waited_ms).
bool SameRequest(const Request& a, const Request& b);

void AppendRequest(const Request& r, std::string* out);
// Parses one request at *pos; ZC_ERR_INTERNAL on a malformed message.
Status ParseRequest(const std::string& in, size_t* pos, Request* out);

// What the ranks agreed to run for one name: each rank's request (absent for
// a rank that has joined and contributes zeros).
struct Response {
  std::vector<Request> per_rank;
  std::vector<uint8_t> present;
  // The first present request: the operation's type, dtype, op, ...
  const Request& lead() const;
};

// Checks that the present requests of one name agree (type, dtype, op,
// root, scale factors, shape; allgather and alltoall: all but the first
// dimension; alltoall: sizes of splits) and that joined ranks are allowed
// (allreduce only). ZC_ERR_MISMATCH / ZC_ERR_INVALID_ARG naming the tensor,
// both ranks and both descriptions.
Status CheckConsistent(const Response& r, int size);
// The error of an operation other than an allreduce while joined_rank has
// joined (ZC_ERR_INVALID_ARG naming the tensor and that rank).
Status JoinedConflict(const Response& r, int joined_rank);

}  // namespace zc::engine
