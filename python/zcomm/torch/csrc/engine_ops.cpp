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

struct State {
  zc_comm* comm = nullptr;
  zc_engine* engine = nullptr;
  int rank = 0, size = 1, local_rank = 0, local_size = 1, cross_rank = 0, cross_size = 1;
};

std::mutex g_mu;  // guards g_state's pointers and g_orphans
State g_state;

// Handles dropped while their operation was pending: their tensors stay alive
// here until the engine is done with them.
struct Orphan {
  zc_engine_handle* h;
  std::vector<at::Tensor> keep;
};
std::vector<Orphan> g_orphans;

std::string Who() {
  return "zcomm.torch rank " + std::to_string(g_state.rank) + "/" + std::to_string(g_state.size);
}

[[noreturn]] void Fail(const std::string& what, const std::string& name, zc_status st) {
  std::string msg = Who() + ": " + what + (name.empty() ? "" : " '" + name + "'") + ": " +
                    zc_status_string(st) + ": " + zc_last_error(g_state.comm);
  throw EngineError(msg);
}

zc_engine* Engine(const char* what) {
  if (!g_state.engine)
    throw EngineError(std::string("zcomm.torch: ") + what +
                      ": not initialized: call zcomm.torch.init() first");
  return g_state.engine;
}

// Frees the orphans whose operations are done. Called with g_mu held.
void ReapOrphans(bool all) {
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

void CheckInput(const at::Tensor& t, const std::string& what, const std::string& name) {
  const std::string prefix = Who() + ": " + what + " '" + name + "': ";
  CheckTensor(t, prefix, "tensor");
  TORCH_CHECK(t.is_contiguous(), prefix, "tensor is not contiguous");
  TORCH_CHECK(t.dim() <= ZC_ENGINE_MAX_DIMS, prefix, "tensor has ", t.dim(),
              " dimensions; the engine takes at most ", ZC_ENGINE_MAX_DIMS);
}

std::shared_ptr<Handle> Wrap(std::string what, std::string name, std::vector<at::Tensor> keep,
                             at::ScalarType dtype, zc_engine_handle* h) {
  {
    // Never blocks a submission: a busy lock (shutdown) leaves them for later.
    std::unique_lock<std::mutex> lock(g_mu, std::try_to_lock);
    if (lock.owns_lock() && !g_orphans.empty()) ReapOrphans(false);
  }
  return std::make_shared<Handle>(std::move(what), std::move(name), std::move(keep), dtype, h);
}

}  // namespace

void Init() {
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_state.engine) return;
  State s;
  zc_status st;
  {
    GilReleased nogil;
    st = zc_init(&s.comm);
  }
  if (st != ZC_OK)
    throw EngineError(std::string("zcomm.torch: init: zc_init failed: ") + zc_status_string(st) +
                      ": " + zc_last_error(nullptr));
  s.rank = zc_rank(s.comm);
  s.size = zc_size(s.comm);
  s.local_rank = zc_local_rank(s.comm);
  s.local_size = zc_local_size(s.comm);
  // Horovod's cross communicator: the ranks with this rank's local rank (one
  // per host); cross_rank is this host's index among them.
  std::vector<int32_t> locals(s.size);
  int32_t mine = s.local_rank;
  {
    GilReleased nogil;
    st = zc_allgather(s.comm, &mine, locals.data(), 1, ZC_INT32);
    if (st == ZC_OK) st = zc_engine_create(s.comm, &s.engine);
  }
  if (st != ZC_OK) {
    std::string msg = "zcomm.torch rank " + std::to_string(s.rank) + "/" + std::to_string(s.size) +
                      ": init: " + zc_status_string(st) + ": " + zc_last_error(s.comm);
    zc_finalize(s.comm);
    throw EngineError(msg);
  }
  s.cross_rank = 0;
  s.cross_size = 0;
  for (int r = 0; r < s.size; ++r) {
    if (locals[r] != mine) continue;
    if (r < s.rank) ++s.cross_rank;
    ++s.cross_size;
  }
  g_state = s;
}

void Shutdown() {
  std::lock_guard<std::mutex> lock(g_mu);
  if (!g_state.engine) return;
  State s = g_state;
  zc_status st;
  {
    GilReleased nogil;
    st = zc_engine_destroy(s.engine);
  }
  std::string detail = st == ZC_OK ? "" : zc_last_error(s.comm);
  g_state.engine = nullptr;
  ReapOrphans(true);  // every operation is done now
  {
    GilReleased nogil;
    zc_finalize(s.comm);
  }
  g_state.comm = nullptr;
  (void)detail;  // the error that had shut the engine down was already raised to its waiters
}

bool IsInitialized() { return g_state.engine != nullptr; }
int Rank() { Engine("rank"); return g_state.rank; }
int Size() { Engine("size"); return g_state.size; }
int LocalRank() { Engine("local_rank"); return g_state.local_rank; }
int LocalSize() { Engine("local_size"); return g_state.local_size; }
int CrossRank() { Engine("cross_rank"); return g_state.cross_rank; }
int CrossSize() { Engine("cross_size"); return g_state.cross_size; }

Handle::Handle(std::string what, std::string name, std::vector<at::Tensor> keep,
               at::ScalarType dtype, zc_engine_handle* h)
    : what_(std::move(what)), name_(std::move(name)), keep_(std::move(keep)), dtype_(dtype), h_(h) {}

Handle::~Handle() {
  int done = 0;
  zc_engine_poll(h_, &done);
  if (done) {
    zc_engine_handle_free(h_);
    return;
  }
  std::lock_guard<std::mutex> lock(g_mu);
  if (!g_state.engine) {  // shut down: every operation has ended
    zc_engine_handle_free(h_);
    return;
  }
  g_orphans.push_back(Orphan{h_, std::move(keep_)});
}

void Handle::Raise(zc_status st) const { Fail(what_, name_, st); }

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
    if (st != ZC_OK) detail = zc_last_error(g_state.comm);
  }
  if (st != ZC_OK)
    throw EngineError(Who() + ": " + what_ + " '" + name_ + "': " + zc_status_string(st) + ": " +
                      detail);
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
  std::vector<int64_t> s(g_state.size);
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
                                  double postscale) {
  zc_engine* e = Engine("allreduce");
  CheckInput(input, "allreduce", name);
  CheckInput(output, "allreduce", name);
  const std::string prefix = Who() + ": allreduce '" + name + "': ";
  TORCH_CHECK(output.scalar_type() == input.scalar_type() && output.numel() == input.numel(),
              prefix, "output does not match the input's dtype and size");
  zc_dtype dt = ToZcDtype(input.scalar_type(), prefix);
  std::vector<int64_t> shape(input.sizes().begin(), input.sizes().end());
  zc_engine_handle* h = nullptr;
  zc_status st = zc_engine_allreduce(e, name.c_str(), input.data_ptr(), output.data_ptr(),
                                     input.dim(), shape.data(), dt, static_cast<zc_op>(op),
                                     prescale, postscale, &h);
  if (st != ZC_OK) Fail("allreduce", name, st);
  std::vector<at::Tensor> keep{input};
  if (!output.is_same(input)) keep.push_back(output);
  return Wrap("allreduce", name, std::move(keep), input.scalar_type(), h);
}

std::shared_ptr<Handle> Broadcast(const at::Tensor& tensor, const std::string& name, int root) {
  zc_engine* e = Engine("broadcast");
  CheckInput(tensor, "broadcast", name);
  const std::string prefix = Who() + ": broadcast '" + name + "': ";
  TORCH_CHECK(root >= 0 && root < g_state.size, prefix, "root_rank ", root,
              " is out of range (size ", g_state.size, ")");
  zc_dtype dt = ToZcDtype(tensor.scalar_type(), prefix);
  std::vector<int64_t> shape(tensor.sizes().begin(), tensor.sizes().end());
  zc_engine_handle* h = nullptr;
  zc_status st = zc_engine_broadcast(e, name.c_str(), tensor.data_ptr(), tensor.dim(), shape.data(),
                                     dt, root, &h);
  if (st != ZC_OK) Fail("broadcast", name, st);
  return Wrap("broadcast", name, {tensor}, tensor.scalar_type(), h);
}

std::shared_ptr<Handle> Allgather(const at::Tensor& input, const std::string& name) {
  zc_engine* e = Engine("allgather");
  CheckInput(input, "allgather", name);
  const std::string prefix = Who() + ": allgather '" + name + "': ";
  TORCH_CHECK(input.dim() >= 1, prefix, "tensor must have at least one dimension");
  zc_dtype dt = ToZcDtype(input.scalar_type(), prefix);
  std::vector<int64_t> shape(input.sizes().begin(), input.sizes().end());
  zc_engine_handle* h = nullptr;
  zc_status st =
      zc_engine_allgather(e, name.c_str(), input.data_ptr(), input.dim(), shape.data(), dt, &h);
  if (st != ZC_OK) Fail("allgather", name, st);
  return Wrap("allgather", name, {input}, input.scalar_type(), h);
}

std::shared_ptr<Handle> Alltoall(const at::Tensor& input, const std::vector<int64_t>& splits,
                                 const std::string& name) {
  zc_engine* e = Engine("alltoall");
  CheckInput(input, "alltoall", name);
  const std::string prefix = Who() + ": alltoall '" + name + "': ";
  TORCH_CHECK(input.dim() >= 1, prefix, "tensor must have at least one dimension");
  zc_dtype dt = ToZcDtype(input.scalar_type(), prefix);
  if (!splits.empty()) {
    TORCH_CHECK(static_cast<int>(splits.size()) == g_state.size, prefix, "splits has ",
                splits.size(), " entries; expected one per rank (", g_state.size, ")");
    int64_t total = 0;
    for (int64_t v : splits) {
      TORCH_CHECK(v >= 0, prefix, "splits has a negative entry ", v);
      total += v;
    }
    TORCH_CHECK(total == input.size(0), prefix, "splits sum to ", total,
                " but the tensor's first dimension is ", input.size(0));
  } else {
    TORCH_CHECK(input.size(0) % g_state.size == 0, prefix, "the first dimension (", input.size(0),
                ") does not divide evenly by the number of ranks (", g_state.size,
                "); pass splits");
  }
  std::vector<int64_t> shape(input.sizes().begin(), input.sizes().end());
  zc_engine_handle* h = nullptr;
  zc_status st = zc_engine_alltoall(e, name.c_str(), input.data_ptr(), input.dim(), shape.data(),
                                    dt, splits.empty() ? nullptr : splits.data(), &h);
  if (st != ZC_OK) Fail("alltoall", name, st);
  return Wrap("alltoall", name, {input}, input.scalar_type(), h);
}

std::shared_ptr<Handle> Reducescatter(const at::Tensor& input, const std::string& name, int op,
                                      double prescale, double postscale) {
  zc_engine* e = Engine("reducescatter");
  CheckInput(input, "reducescatter", name);
  const std::string prefix = Who() + ": reducescatter '" + name + "': ";
  TORCH_CHECK(input.dim() >= 1, prefix, "tensor must have at least one dimension");
  zc_dtype dt = ToZcDtype(input.scalar_type(), prefix);
  std::vector<int64_t> shape(input.sizes().begin(), input.sizes().end());
  zc_engine_handle* h = nullptr;
  zc_status st = zc_engine_reducescatter(e, name.c_str(), input.data_ptr(), input.dim(),
                                         shape.data(), dt, static_cast<zc_op>(op), prescale,
                                         postscale, &h);
  if (st != ZC_OK) Fail("reducescatter", name, st);
  return Wrap("reducescatter", name, {input}, input.scalar_type(), h);
}

std::shared_ptr<Handle> Barrier() {
  zc_engine* e = Engine("barrier");
  zc_engine_handle* h = nullptr;
  zc_status st = zc_engine_barrier(e, &h);
  if (st != ZC_OK) Fail("barrier", "", st);
  return Wrap("barrier", "", {}, at::kByte, h);
}

std::shared_ptr<Handle> Join() {
  zc_engine* e = Engine("join");
  zc_engine_handle* h = nullptr;
  zc_status st = zc_engine_join(e, &h);
  if (st != ZC_OK) Fail("join", "", st);
  return Wrap("join", "", {}, at::kByte, h);
}

std::vector<std::pair<std::string, uint64_t>> Stats() {
  zc_engine_stats s{};
  zc_status st = zc_engine_get_stats(Engine("engine_stats"), &s, sizeof s);
  if (st != ZC_OK) Fail("engine_stats", "", st);
  return {{"cycles", s.cycles},
          {"negotiation_collectives", s.negotiation_collectives},
          {"cache_hits", s.cache_hits},
          {"cache_misses", s.cache_misses},
          {"fused_sets", s.fused_sets},
          {"fused_tensors", s.fused_tensors},
          {"data_collectives", s.data_collectives},
          {"plan_reuses", s.plan_reuses},
          {"operations_done", s.operations_done},
          {"stall_warnings", s.stall_warnings},
          {"cache_entries", s.cache_entries}};
}

std::string EngineErrorString() {
  if (!g_state.engine) return "";
  zc_status err = ZC_OK;
  if (zc_engine_error(g_state.engine, &err) != ZC_OK || err == ZC_OK) return "";
  return std::string(zc_status_string(err)) + ": " + zc_last_error(g_state.comm);
}

}  // namespace hvd
}  // namespace zcomm_torch
