#include "engine/request.h"

#include <algorithm>
#include <cstring>

#include "collectives/dtype.h"

namespace zc::engine {

const char* OpTypeName(OpType t) {
  switch (t) {
    case OpType::kAllreduce: return "allreduce";
    case OpType::kBroadcast: return "broadcast";
    case OpType::kAllgather: return "allgather";
    case OpType::kAlltoall: return "alltoall";
    case OpType::kReducescatter: return "reducescatter";
    case OpType::kBarrier: return "barrier";
    case OpType::kJoin: return "join";
  }
  return "unknown";
}

int64_t Request::elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

int64_t Request::row_elements() const {
  int64_t n = 1;
  for (size_t i = 1; i < shape.size(); ++i) n *= shape[i];
  return n;
}

namespace {
std::string Dims(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}
}  // namespace

std::string Request::Describe() const {
  std::string s = OpTypeName(type);
  if (type == OpType::kAllreduce || type == OpType::kReducescatter) s += std::string(" ") + OpName(op);
  if (type == OpType::kBarrier || type == OpType::kJoin) return s;
  s += std::string(" ") + DtypeName(dtype) + " " + Dims(shape);
  if (type == OpType::kBroadcast) s += Format(" root %d", root);
  if (prescale != 1.0 || postscale != 1.0) s += Format(" prescale %g postscale %g", prescale, postscale);
  if (type == OpType::kAlltoall) s += " splits " + Dims(splits);
  if (device >= 0) s += Format(" on GPU %d", device);
  return s;
}

bool SameRequest(const Request& a, const Request& b) {
  return a.name == b.name && a.type == b.type && a.dtype == b.dtype && a.op == b.op &&
         a.root == b.root && a.prescale == b.prescale && a.postscale == b.postscale &&
         a.shape == b.shape && a.splits == b.splits && a.device == b.device;
}

namespace {
template <typename T>
void Put(std::string* out, T v) {
  out->append(reinterpret_cast<const char*>(&v), sizeof v);
}
template <typename T>
bool Get(const std::string& in, size_t* pos, T* v) {
  if (in.size() - *pos < sizeof(T)) return false;
  memcpy(v, in.data() + *pos, sizeof(T));
  *pos += sizeof(T);
  return true;
}
void PutVec(std::string* out, const std::vector<int64_t>& v) {
  Put<uint32_t>(out, static_cast<uint32_t>(v.size()));
  for (int64_t x : v) Put(out, x);
}
bool GetVec(const std::string& in, size_t* pos, std::vector<int64_t>* v) {
  uint32_t n;
  if (!Get(in, pos, &n) || n > (in.size() - *pos) / sizeof(int64_t)) return false;
  v->resize(n);
  for (auto& x : *v)
    if (!Get(in, pos, &x)) return false;
  return true;
}
}  // namespace

void AppendRequest(const Request& r, std::string* out) {
  Put<uint32_t>(out, static_cast<uint32_t>(r.name.size()));
  out->append(r.name);
  Put<uint8_t>(out, static_cast<uint8_t>(r.type));
  Put<int32_t>(out, r.dtype);
  Put<int32_t>(out, r.op);
  Put<int32_t>(out, r.root);
  Put<double>(out, r.prescale);
  Put<double>(out, r.postscale);
  Put<uint32_t>(out, r.waited_ms);
  Put<int32_t>(out, r.device);
  PutVec(out, r.shape);
  PutVec(out, r.splits);
}

Status ParseRequest(const std::string& in, size_t* pos, Request* r) {
  uint32_t n;
  uint8_t type;
  int32_t dtype, op;
  bool ok = Get(in, pos, &n) && n <= in.size() - *pos;
  if (ok) {
    r->name.assign(in.data() + *pos, n);
    *pos += n;
  }
  ok = ok && Get(in, pos, &type) && type <= static_cast<uint8_t>(OpType::kJoin) && Get(in, pos, &dtype) &&
       Get(in, pos, &op) && Get(in, pos, &r->root) && Get(in, pos, &r->prescale) &&
       Get(in, pos, &r->postscale) && Get(in, pos, &r->waited_ms) && Get(in, pos, &r->device) && GetVec(in, pos, &r->shape) &&
       GetVec(in, pos, &r->splits);
  if (!ok) return Error(ZC_ERR_INTERNAL, "malformed request in the engine's negotiation");
  // A peer's dtype and op index tables and size buffers: refuse values that
  // no zc_dtype or zc_op has.
  if (dtype < 0 || dtype >= kNumDtypes || op < 0 || op >= kNumOps)
    return Error(ZC_ERR_INTERNAL, "request '%s' in the engine's negotiation names dtype %d, op %d: no such %s",
                 r->name.c_str(), dtype, op, dtype < 0 || dtype >= kNumDtypes ? "dtype" : "op");
  r->type = static_cast<OpType>(type);
  r->dtype = static_cast<zc_dtype>(dtype);
  r->op = static_cast<zc_op>(op);
  return Status::Ok();
}

Status JoinedConflict(const Response& resp, int joined_rank) {
  const Request& l = resp.lead();
  return Error(ZC_ERR_INVALID_ARG, "tensor '%s': %s needs rank %d, which has joined (only allreduce goes on "
               "with zeros from joined ranks)", l.name.c_str(), OpTypeName(l.type), joined_rank);
}

const Request& Response::lead() const {
  for (size_t r = 0; r < per_rank.size(); ++r)
    if (present[r]) return per_rank[r];
  return per_rank.front();
}

Status CheckConsistent(const Response& resp, int size) {
  int lead = -1;
  for (int r = 0; r < size; ++r) {
    if (!resp.present[r]) continue;
    if (lead < 0) {
      lead = r;
      continue;
    }
    const Request& a = resp.per_rank[lead];
    const Request& b = resp.per_rank[r];
    const char* what = nullptr;
    if (a.type != b.type) what = "operation";
    else if (a.dtype != b.dtype) what = "dtype";
    else if ((a.type == OpType::kAllreduce || a.type == OpType::kReducescatter) && a.op != b.op) what = "reduction op";
    else if (a.type == OpType::kBroadcast && a.root != b.root) what = "root";
    else if (a.prescale != b.prescale || a.postscale != b.postscale) what = "scale factor";
    else if (a.type == OpType::kAllgather || a.type == OpType::kAlltoall) {
      if (a.shape.size() != b.shape.size() ||
          !std::equal(a.shape.begin() + 1, a.shape.end(), b.shape.begin() + 1))
        what = "shape (beyond the first dimension)";
    } else if (a.shape != b.shape) {
      what = "shape";
    }
    if (what)
      return Error(ZC_ERR_MISMATCH, "tensor '%s': %s mismatch: rank %d has %s, rank %d has %s", a.name.c_str(),
                   what, lead, a.Describe().c_str(), r, b.Describe().c_str());
  }
  const Request& l = resp.lead();
  if (l.type != OpType::kAllreduce)
    for (int r = 0; r < size; ++r)
      if (!resp.present[r]) return JoinedConflict(resp, r);
  if (l.type == OpType::kAlltoall)
    for (int r = 0; r < size; ++r)
      if (resp.present[r] && resp.per_rank[r].splits.size() != static_cast<size_t>(size))
        return Error(ZC_ERR_MISMATCH, "tensor '%s': rank %d gave %zu splits for %d ranks", l.name.c_str(), r,
                     resp.per_rank[r].splits.size(), size);
  return Status::Ok();
}

}  // namespace zc::engine
