#include "engine_ops.hpp"

#include <c10/util/Exception.h>

#include <cstring>
#include <mutex>
#include <utility>

#include "gil.hpp"
#include "types.hpp"

namespace zcomm_torch {
namespace hvd {
namespace {

// Handles dropped while their operation was pending: their tensors stay alive
// here until the engine is done with them.
struct Orphan {
  zc_engine_handle* h;
  std::vector<at::Tensor> keep;
};
std::mutex g_orphans_mu;
std::vector<Orphan> g_orphans;

std::string Who() { return Sets().Who(); }

// Every engine error raised to the caller goes through here, so that
// is_initialized() turns False once this rank has been told that the engine
// stopped.
[[noreturn]] void ThrowEngineError(const std::string& msg) {
  Sets().StopSeen();
  throw EngineError(msg);
}

std::string Message(const std::string& what, const std::string& name, zc_status st, const char* detail) {
  return Who() + ": " + what + (name.empty() ? "" : " '" + name + "'") + ": " + zc_status_string(st) + ": " +
         detail;
}

// A submission the engine refused: a bad argument or a name already pending
// on this rank is the caller's mistake (ValueError); anything else means the
// engine has stopped (HorovodInternalError).
[[noreturn]] void FailSubmit(const std::string& what, const std::string& name, zc_status st) {
  std::string msg = Message(what, name, st, zc_last_error(nullptr));
  if (st == ZC_ERR_INVALID_ARG) throw InvalidArgument(msg);
  ThrowEngineError(msg);
}

std::string Prefix(const std::string& what, const std::string& name) {
  return Who() + ": " + what + " '" + name + "': ";
}

void CheckInput(const at::Tensor& t, const std::string& what, const std::string& name) {
  const std::string prefix = Prefix(what, name);
  CheckTensor(t, prefix, "tensor");
  TORCH_CHECK(t.is_contiguous(), prefix, "tensor is not contiguous");
  TORCH_CHECK(t.dim() <= ZC_ENGINE_MAX_DIMS, prefix, "tensor has ", t.dim(),
              " dimensions; the engine takes at most ", ZC_ENGINE_MAX_DIMS);
}

std::vector<int64_t> Shape(const at::Tensor& t) { return {t.sizes().begin(), t.sizes().end()}; }

std::shared_ptr<Handle> Wrap(std::string what, std::string name, std::vector<at::Tensor> keep,
                             at::ScalarType dtype, int set_size, zc_engine_handle* h) {
  ReapOrphans(false);
  return std::make_shared<Handle>(std::move(what), std::move(name), std::move(keep), dtype, set_size, h);
}

}  // namespace

void ReapOrphans(bool all) {
  // Never blocks a submission: a busy lock leaves them for later.
  std::unique_lock<std::mutex> lock(g_orphans_mu, std::defer_lock);
  if (all) lock.lock();
  else if (!lock.try_lock() || g_orphans.empty()) return;
  size_t kept = 0;
  for (auto& o : g_orphans) {
    int done = 0;
    zc_engine_poll(o.h, &done);
    if (done || all) {
      zc_engine_handle_free(o.h);
    } else {
      g_orphans[kept++] = std::move(o);
    }
  }
  g_orphans.resize(kept);
}

Handle::Handle(std::string what, std::string name, std::vector<at::Tensor> keep, at::ScalarType dtype,
               int set_size, zc_engine_handle* h)
    : what_(std::move(what)),
      name_(std::move(name)),
      keep_(std::move(keep)),
      dtype_(dtype),
      set_size_(set_size),
      h_(h) {}

Handle::~Handle() {
  int done = 0;
  zc_engine_poll(h_, &done);
  if (done) {
    zc_engine_handle_free(h_);
    return;
  }
  std::lock_guard<std::mutex> lock(g_orphans_mu);
  g_orphans.push_back(Orphan{h_, std::move(keep_)});
}

void Handle::Raise(zc_status st) const { ThrowEngineError(Message(what_, name_, st, zc_last_error(nullptr))); }

bool Handle::Poll() {
  int done = 0;
  zc_status st = zc_engine_poll(h_, &done);
  if (st != ZC_OK) Raise(st);
  return done != 0;
}

void Handle::Wait() {
  zc_status st;
  std::string detail;
  {
    GilReleased nogil;
    st = zc_engine_wait(h_);
    if (st != ZC_OK) detail = zc_last_error(nullptr);
  }
  if (st != ZC_OK) ThrowEngineError(Message(what_, name_, st, detail.c_str()));
}

at::Tensor Handle::Output() {
  const void* data = nullptr;
  int ndims = 0;
  int64_t shape[ZC_ENGINE_MAX_DIMS];
  zc_status st = zc_engine_output(h_, &data, &ndims, shape);
  if (st != ZC_OK) Raise(st);
  at::Tensor out = at::empty(at::IntArrayRef(shape, ndims), at::TensorOptions().dtype(dtype_));
  if (out.numel() > 0) std::memcpy(out.data_ptr(), data, out.nbytes());
  return out;
}

std::vector<int64_t> Handle::ReceivedSplits() {
  std::vector<int64_t> s(set_size_);
  zc_status st = zc_engine_received_splits(h_, s.data());
  if (st != ZC_OK) Raise(st);
  return s;
}

int Handle::JoinResult() {
  int last = -1;
  zc_status st = zc_engine_join_result(h_, &last);
  if (st != ZC_OK) Raise(st);
  return last;
}

std::shared_ptr<Handle> Allreduce(const at::Tensor& input, const at::Tensor& output,
                                  const std::string& name, int op, double prescale,
                                  double postscale, int32_t set) {
  SetRef s = Sets().Get(set, "allreduce '" + name + "'");
  CheckInput(input, "allreduce", name);
  CheckInput(output, "allreduce", name);
  const std::string prefix = Prefix("allreduce", name);
  TORCH_CHECK(output.scalar_type() == input.scalar_type() && output.numel() == input.numel(),
              prefix, "output does not match the input's dtype and size");
  zc_dtype dt = ToZcDtype(input.scalar_type(), prefix);
  std::vector<int64_t> shape = Shape(input);
  zc_engine_handle* h = nullptr;
  zc_status st = zc_engine_allreduce(s->engine, name.c_str(), input.data_ptr(), output.data_ptr(),
                                     input.dim(), shape.data(), dt, static_cast<zc_op>(op),
                                     prescale, postscale, &h);
  if (st != ZC_OK) FailSubmit("allreduce", name, st);
  std::vector<at::Tensor> keep{input};
  if (!output.is_same(input)) keep.push_back(output);
  return Wrap("allreduce", name, std::move(keep), input.scalar_type(), s->size(), h);
}

std::shared_ptr<Handle> Broadcast(const at::Tensor& tensor, const std::string& name, int root,
                                  int32_t set) {
  SetRef s = Sets().Get(set, "broadcast '" + name + "'");
  CheckInput(tensor, "broadcast", name);
  const std::string prefix = Prefix("broadcast", name);
  const int set_root = s->SetRank(root);
  if (set_root < 0)
    throw InvalidArgument(prefix + "root_rank " + std::to_string(root) + " is not in process set " +
                          std::to_string(s->id) + " (of " + std::to_string(s->size()) + " ranks)");
  zc_dtype dt = ToZcDtype(tensor.scalar_type(), prefix);
  std::vector<int64_t> shape = Shape(tensor);
  zc_engine_handle* h = nullptr;
  zc_status st = zc_engine_broadcast(s->engine, name.c_str(), tensor.data_ptr(), tensor.dim(), shape.data(),
                                     dt, set_root, &h);
  if (st != ZC_OK) FailSubmit("broadcast", name, st);
  return Wrap("broadcast", name, {tensor}, tensor.scalar_type(), s->size(), h);
}

std::shared_ptr<Handle> Allgather(const at::Tensor& input, const std::string& name, int32_t set) {
  SetRef s = Sets().Get(set, "allgather '" + name + "'");
  CheckInput(input, "allgather", name);
  const std::string prefix = Prefix("allgather", name);
  if (input.dim() < 1) throw InvalidArgument(prefix + "tensor must have at least one dimension");
  zc_dtype dt = ToZcDtype(input.scalar_type(), prefix);
  std::vector<int64_t> shape = Shape(input);
  zc_engine_handle* h = nullptr;
  zc_status st = zc_engine_allgather(s->engine, name.c_str(), input.data_ptr(), input.dim(), shape.data(), dt, &h);
  if (st != ZC_OK) FailSubmit("allgather", name, st);
  return Wrap("allgather", name, {input}, input.scalar_type(), s->size(), h);
}

std::shared_ptr<Handle> Alltoall(const at::Tensor& input, const std::vector<int64_t>& splits,
                                 const std::string& name, int32_t set) {
  SetRef s = Sets().Get(set, "alltoall '" + name + "'");
  CheckInput(input, "alltoall", name);
  const std::string prefix = Prefix("alltoall", name);
  if (input.dim() < 1) throw InvalidArgument(prefix + "tensor must have at least one dimension");
  zc_dtype dt = ToZcDtype(input.scalar_type(), prefix);
  const int n = s->size();
  if (!splits.empty()) {
    if (static_cast<int>(splits.size()) != n)
      throw InvalidArgument(prefix + "splits has " + std::to_string(splits.size()) +
                            " entries; expected one per rank of the process set (" + std::to_string(n) + ")");
    int64_t total = 0;
    for (int64_t v : splits) {
      if (v < 0) throw InvalidArgument(prefix + "splits has a negative entry " + std::to_string(v));
      total += v;
    }
    if (total != input.size(0))
      throw InvalidArgument(prefix + "splits sum to " + std::to_string(total) +
                            " but the tensor's first dimension is " + std::to_string(input.size(0)));
  } else if (input.size(0) % n != 0) {
    throw InvalidArgument(prefix + "the first dimension (" + std::to_string(input.size(0)) +
                          ") does not divide evenly by the number of ranks (" + std::to_string(n) +
                          "); pass splits");
  }
  std::vector<int64_t> shape = Shape(input);
  zc_engine_handle* h = nullptr;
  zc_status st = zc_engine_alltoall(s->engine, name.c_str(), input.data_ptr(), input.dim(), shape.data(), dt,
                                    splits.empty() ? nullptr : splits.data(), &h);
  if (st != ZC_OK) FailSubmit("alltoall", name, st);
  return Wrap("alltoall", name, {input}, input.scalar_type(), n, h);
}

std::shared_ptr<Handle> Reducescatter(const at::Tensor& input, const std::string& name, int op,
                                      double prescale, double postscale, int32_t set) {
  SetRef s = Sets().Get(set, "reducescatter '" + name + "'");
  CheckInput(input, "reducescatter", name);
  const std::string prefix = Prefix("reducescatter", name);
  if (input.dim() < 1) throw InvalidArgument(prefix + "tensor must have at least one dimension");
  zc_dtype dt = ToZcDtype(input.scalar_type(), prefix);
  std::vector<int64_t> shape = Shape(input);
  zc_engine_handle* h = nullptr;
  zc_status st = zc_engine_reducescatter(s->engine, name.c_str(), input.data_ptr(), input.dim(), shape.data(),
                                         dt, static_cast<zc_op>(op), prescale, postscale, &h);
  if (st != ZC_OK) FailSubmit("reducescatter", name, st);
  return Wrap("reducescatter", name, {input}, input.scalar_type(), s->size(), h);
}

std::shared_ptr<Handle> Barrier(int32_t set) {
  SetRef s = Sets().Get(set, "barrier");
  zc_engine_handle* h = nullptr;
  zc_status st = zc_engine_barrier(s->engine, &h);
  if (st != ZC_OK) FailSubmit("barrier", "", st);
  return Wrap("barrier", "", {}, at::kByte, s->size(), h);
}

std::shared_ptr<Handle> Join() {
  SetRef s = Sets().Get(0, "join");
  zc_engine_handle* h = nullptr;
  zc_status st = zc_engine_join(s->engine, &h);
  if (st != ZC_OK) FailSubmit("join", "", st);
  return Wrap("join", "", {}, at::kByte, s->size(), h);
}

std::vector<std::pair<std::string, uint64_t>> Stats() {
  SetRef s = Sets().Get(0, "engine_stats");
  zc_engine_stats st{};
  zc_status rc = zc_engine_get_stats(s->engine, &st, sizeof st);
  if (rc != ZC_OK) FailSubmit("engine_stats", "", rc);
  return {{"cycles", st.cycles},
          {"negotiation_collectives", st.negotiation_collectives},
          {"cache_hits", st.cache_hits},
          {"cache_misses", st.cache_misses},
          {"fused_sets", st.fused_sets},
          {"fused_tensors", st.fused_tensors},
          {"data_collectives", st.data_collectives},
          {"plan_reuses", st.plan_reuses},
          {"operations_done", st.operations_done},
          {"stall_warnings", st.stall_warnings},
          {"cache_entries", st.cache_entries}};
}

std::string EngineErrorString() {
  if (Sets().List().empty()) return "";
  SetRef s = Sets().Get(0, "error");
  zc_status err = ZC_OK;
  if (zc_engine_error(s->engine, &err) != ZC_OK || err == ZC_OK) return "";
  return std::string(zc_status_string(err)) + ": " + zc_last_error(nullptr);
}

}  // namespace hvd
}  // namespace zcomm_torch
