#include "process_group.hpp"

#include <c10/util/Exception.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <stdexcept>

#include "gil.hpp"
#include "store_bootstrap.hpp"
#include "types.hpp"

namespace zcomm_torch {

namespace {

using c10d::OpType;
using Clock = std::chrono::steady_clock;

// How long the p2p thread polls its requests without sleeping after a
// request was posted or completed.
constexpr auto kP2pPoll = std::chrono::microseconds(200);

// Outputs that are not contiguous are written through a contiguous copy.
at::Tensor Staged(const at::Tensor& t) {
  return t.is_contiguous() ? t : at::empty(t.sizes(), t.options());
}
void CopyBack(const at::Tensor& target, const at::Tensor& staged) {
  if (!staged.is_same(target)) target.copy_(staged);
}

// One flat contiguous tensor holding every tensor of the list, in order.
at::Tensor Flatten(const std::vector<at::Tensor>& ts) {
  std::vector<at::Tensor> flat;
  flat.reserve(ts.size());
  for (const at::Tensor& t : ts) flat.push_back(t.reshape({-1}));
  return at::cat(flat);
}
// Contiguous CPU tensors of one dtype (what all_gather's outputs usually
// are): filled by plain copies, without a tensor operation each (about a
// microsecond of dispatch per tensor, the larger part of a small all_gather).
bool PlainOutputs(const std::vector<at::Tensor>& ts, at::ScalarType type) {
  for (const at::Tensor& t : ts)
    if (!t.is_contiguous() || !t.device().is_cpu() || t.scalar_type() != type) return false;
  return true;
}
// src shares memory with an output other than outs[rank], or with
// outs[rank] without being it, or two outputs share memory: what
// zc_allgather_list refuses (the gathered-tensor path takes these).
bool OverlapsAnother(const at::Tensor& src, const std::vector<at::Tensor>& outs, int rank) {
  auto range = [](const at::Tensor& t) {
    const auto* p = static_cast<const char*>(t.data_ptr());
    return std::make_pair(p, p + t.numel() * t.element_size());
  };
  auto meet = [](std::pair<const char*, const char*> a, std::pair<const char*, const char*> b) {
    return a.first < a.second && b.first < b.second && a.first < b.second && b.first < a.second;
  };
  const auto s = range(src);
  for (size_t k = 0; k < outs.size(); ++k) {
    const auto o = range(outs[k]);
    if (static_cast<int>(k) == rank ? (o.first != s.first && meet(o, s)) : meet(o, s)) return true;
    for (size_t j = 0; j < k; ++j)
      if (meet(range(outs[j]), o)) return true;
  }
  return false;
}
// Fills plain outputs (PlainOutputs) in order from src.
void CopyOut(const char* src, const std::vector<at::Tensor>& ts) {
  for (const at::Tensor& t : ts) {
    const size_t bytes = static_cast<size_t>(t.numel()) * t.element_size();
    if (bytes) std::memcpy(t.data_ptr(), src, bytes);
    src += bytes;
  }
}
void Unflatten(const at::Tensor& flat, const std::vector<at::Tensor>& ts) {
  if (flat.is_contiguous() && flat.device().is_cpu() && PlainOutputs(ts, flat.scalar_type())) {
    CopyOut(static_cast<const char*>(flat.data_ptr()), ts);
    return;
  }
  int64_t off = 0;
  for (const at::Tensor& t : ts) {
    t.copy_(flat.narrow(0, off, t.numel()).view(t.sizes()));
    off += t.numel();
  }
}

size_t Count(const at::Tensor& t) { return static_cast<size_t>(t.numel()); }

// zcomm's deadline of every wait (ZC_TIMEOUT, 300 s unless set; zc_comm_init_rank
// refuses a bad value).
std::chrono::milliseconds ZcommTimeout() {
  const char* v = std::getenv("ZC_TIMEOUT");
  double s = v ? std::atof(v) : 0;
  if (s <= 0) s = 300;
  return std::chrono::milliseconds(static_cast<int64_t>(s * 1000));
}

}  // namespace

ProcessGroupZcomm::ProcessGroupZcomm(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                     int size, std::chrono::milliseconds timeout)
    : c10d::ProcessGroup(rank, size),
      store_(store),
      timeout_(timeout),
      run_in_wait_(timeout >= ZcommTimeout()) {
  comm_ = CommFromStore(store, rank, size);
  try {
    registered_ = RegisteredMemory::Split(comm_, rank);
  } catch (...) {
    zc_abort(comm_);
    zc_finalize(comm_);
    throw;
  }
  p2p_thread_ = std::thread([this] { P2pLoop(); });
}

ProcessGroupZcomm::~ProcessGroupZcomm() {
  GilReleased no_gil;
  // Queued collectives still run (each has zcomm's deadline): a no-op
  // queued last is done once everything before it is.
  zc_request* last = nullptr;
  if (zc_comm_enqueue(comm_, [](void*) { return ZC_OK; }, nullptr, &last) == ZC_OK) zc_wait(last);
  {
    std::lock_guard<std::mutex> lock(p2p_mu_);
    p2p_stop_ = true;
  }
  p2p_cv_.notify_all();
  p2p_thread_.join();
  // A broken communicator must not wait in finalize's barrier for the dead.
  zc_status err = ZC_OK;
  if (zc_comm_get_async_error(comm_, &err) == ZC_OK && err != ZC_OK) zc_abort(comm_);
  zc_finalize(comm_);
  FreeDoneRequests();
  // Registered tensors still alive keep their communicator, and with it the
  // pool, until the last of them goes.
  registered_.reset();
}

c10::intrusive_ptr<c10d::ProcessGroup> ProcessGroupZcomm::Create(
    const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
    const std::chrono::duration<float>& timeout) {
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(timeout);
  if (ms.count() <= 0) ms = std::chrono::milliseconds(30 * 60 * 1000);
  return c10::make_intrusive<ProcessGroupZcomm>(store, rank, size, ms);
}

CallId ProcessGroupZcomm::NextCall(std::string name) {
  return CallId{rank_, size_, std::move(name), ++seq_};
}

void ProcessGroupZcomm::Check(zc_status st, const CallId& call) const {
  if (st == ZC_OK) return;
  std::string msg = "zcomm " + call.str() + " failed: " + zc_status_string(st) + ": " +
                    zc_last_error(comm_);
  // After the watchdog's abort the first cause says more than "aborted".
  const std::string broken = Broken();
  if (!broken.empty()) msg += " (the first cause: " + broken + ")";
  throw std::runtime_error(msg);
}

void ProcessGroupZcomm::CheckRoot(int64_t root, const CallPrefix& prefix) const {
  TORCH_CHECK(root >= 0 && root < size_, prefix, "root rank ", root, " is out of range [0, ",
              size_, ")");
}

void ProcessGroupZcomm::Abort(const std::string& why) {
  {
    std::lock_guard<std::mutex> lock(err_mu_);
    if (broken_.empty()) SetBrokenLocked(why);
  }
  zc_abort(comm_);
}

void ProcessGroupZcomm::SetBrokenLocked(std::string why) {
  broken_ = std::move(why);
  has_broken_.store(true, std::memory_order_release);
}

std::string ProcessGroupZcomm::Broken() const {
  if (!has_broken_.load(std::memory_order_acquire)) return std::string();
  std::lock_guard<std::mutex> lock(err_mu_);
  return broken_;
}

struct ProcessGroupZcomm::Queued {
  ProcessGroupZcomm* group;
  c10::intrusive_ptr<WorkZcomm> work;
  CallId call;
  Body body;
  zc_request* request = nullptr;
  std::exception_ptr error;  // what body threw
};

c10::intrusive_ptr<c10d::Work> ProcessGroupZcomm::Enqueue(OpType type, const char* name,
                                                          std::vector<at::Tensor> outputs,
                                                          Body body) {
  FreeDoneRequests();
  CallId call = NextCall(name);
  auto work = c10::make_intrusive<WorkZcomm>(rank_, type, call, std::move(outputs), timeout_,
                                             [this](const std::string& why) { Abort(why); });
  auto queued = std::make_unique<Queued>(Queued{this, work, std::move(call), std::move(body)});
  zc_request* req = nullptr;
  zc_status st = zc_comm_enqueue(comm_, &RunQueued, queued.get(), &req);
  TORCH_CHECK(st == ZC_OK, "zcomm ", queued->call, " failed: ", zc_status_string(st), ": ",
              zc_last_error(comm_));
  queued->request = req;
  work->SetRequest(req, run_in_wait_);
  // From here QueuedDone owns it (it may run at once, on this thread).
  st = zc_request_notify(req, &QueuedDone, queued.release());
  TORCH_CHECK(st == ZC_OK, "zcomm: zc_request_notify failed: ", zc_last_error(comm_));
  return work;
}

zc_status ProcessGroupZcomm::RunQueued(void* arg) {
  auto* q = static_cast<Queued*>(arg);
  const std::string broken = q->group->Broken();
  if (!broken.empty()) {
    q->error = std::make_exception_ptr(std::runtime_error(
        "zcomm " + q->call.str() + " failed: the communicator is broken: " + broken));
    return ZC_OK;  // the error travels in q->error, with its message
  }
  // The flight recorder labels the call with torch's name for it
  // ("allreduce #12": the op and this group's count of its calls).
  char label[48];
  q->call.Label(label, sizeof label);
  zc_trace_set_label(label);
  try {
    q->body(q->call);
  } catch (...) {
    q->error = std::current_exception();
  }
  zc_trace_set_label(nullptr);
  return ZC_OK;
}

void ProcessGroupZcomm::QueuedDone(void* arg, zc_status) {
  std::unique_ptr<Queued> q(static_cast<Queued*>(arg));
  // Runs the future's callbacks (DDP's hooks) on this thread; they may
  // queue further operations.
  q->work->Complete(q->error);
  // A wait() that took the request frees it (its zc_wait returns once this
  // function has returned).
  if (!q->work->ReleaseRequest()) return;
  // Else only now may Enqueue free it: zcomm reports it done once this
  // function has returned, and a callback's Enqueue above must not wait
  // for its own request.
  std::lock_guard<std::mutex> lock(q->group->done_mu_);
  q->group->done_requests_.push_back(q->request);
  q->group->has_done_requests_.store(true, std::memory_order_release);
}

void ProcessGroupZcomm::FreeDoneRequests() {
  // Most calls find none (a wait() freed its request): no lock then.
  if (!has_done_requests_.load(std::memory_order_acquire)) return;
  std::vector<zc_request*> done;
  {
    std::lock_guard<std::mutex> lock(done_mu_);
    done.swap(done_requests_);
    has_done_requests_.store(false, std::memory_order_relaxed);
  }
  for (zc_request* r : done) zc_wait(r);  // complete already: frees it
}

// ---- collectives -------------------------------------------------------------

c10::intrusive_ptr<c10d::Work> ProcessGroupZcomm::allreduce(std::vector<at::Tensor>& tensors,
                                                            const c10d::AllreduceOptions& opts) {
  const CallPrefix pre = Prefix(rank_, size_, "allreduce");
  if (tensors.size() == 1 && tensors[0].defined() && tensors[0].is_sparse())
    return SparseAllreduce(tensors[0], opts, pre);
  CheckSingle(tensors, pre, "input");
  at::Tensor t = tensors[0];
  const zc_dtype dt = ToZcDtype(t.scalar_type(), pre);
  const zc_op op = ToZcOp(opts.reduceOp, t.scalar_type(), pre);
  return Enqueue(OpType::ALLREDUCE, "allreduce", tensors, [this, t, dt, op](const CallId& w) {
    at::Tensor buf = t.contiguous();
    Check(zc_allreduce(comm_, buf.data_ptr(), buf.data_ptr(), Count(buf), dt, op), w);
    CopyBack(t, buf);
  });
}

// A sparse COO tensor (SUM, as gloo): every rank's coalesced indices and
// values are gathered (zc_allgather of the shapes, zc_allgatherv of the
// data), summed as one sparse tensor and coalesced into the input.
c10::intrusive_ptr<c10d::Work> ProcessGroupZcomm::SparseAllreduce(at::Tensor& t,
                                                                  const c10d::AllreduceOptions& opts,
                                                                  const CallPrefix& pre) {
  TORCH_CHECK(t.device().is_cpu(), pre, "the sparse input is on ", t.device().str(),
              "; zcomm.torch takes CPU tensors");
  TORCH_CHECK(opts.reduceOp == c10d::ReduceOp::SUM, pre,
              "sparse tensors are reduced with SUM only (as gloo)");
  const zc_dtype dt = ToZcDtype(t.scalar_type(), pre);
  const int n = size_;
  return Enqueue(OpType::ALLREDUCE, "allreduce(sparse)", {t}, [this, t, dt, n](const CallId& w) {
    at::Tensor in = t.coalesce();
    const int64_t dims = in.dim();
    // [nnz, sparse dims, size 0, ..., size dims-1]: a rank with another
    // number of dims fails the allgather itself (a size mismatch).
    std::vector<int64_t> meta = {in._nnz(), in.sparse_dim()};
    for (int64_t d = 0; d < dims; ++d) meta.push_back(in.size(d));
    const size_t m = meta.size();
    std::vector<int64_t> all(m * n);
    Check(zc_allgather(comm_, meta.data(), all.data(), m, ZC_INT64), w);
    for (int r = 0; r < n; ++r)
      for (size_t k = 1; k < m; ++k)
        if (all[r * m + k] != meta[k])
          throw std::runtime_error("zcomm " + w.str() + " failed: rank " + std::to_string(r) +
                                   "'s sparse tensor has another shape or sparse dims than rank " +
                                   std::to_string(rank_) + "'s");
    at::Tensor idx = in._indices().contiguous();  // [sparse dims, nnz], int64
    at::Tensor val = in._values().contiguous();   // [nnz, dense sizes...]
    const int64_t sdims = in.sparse_dim();
    int64_t dense_row = 1;
    for (int64_t d = sdims; d < dims; ++d) dense_row *= in.size(d);
    std::vector<size_t> ic(n), id(n), vc(n), vd(n);
    size_t itotal = 0, vtotal = 0;
    for (int r = 0; r < n; ++r) {
      const size_t nnz = static_cast<size_t>(all[r * m]);
      ic[r] = nnz * sdims;
      id[r] = itotal;
      itotal += ic[r];
      vc[r] = nnz * dense_row;
      vd[r] = vtotal;
      vtotal += vc[r];
    }
    at::Tensor ibuf = at::empty({static_cast<int64_t>(itotal)}, idx.options());
    at::Tensor vbuf = at::empty({static_cast<int64_t>(vtotal)}, val.options());
    Check(zc_allgatherv(comm_, idx.data_ptr(), Count(idx), ibuf.data_ptr(), ic.data(), id.data(),
                        ZC_INT64),
          w);
    Check(zc_allgatherv(comm_, val.data_ptr(), Count(val), vbuf.data_ptr(), vc.data(), vd.data(),
                        dt),
          w);
    std::vector<at::Tensor> is, vs;
    std::vector<int64_t> vshape = val.sizes().vec();
    for (int r = 0; r < n; ++r) {
      const int64_t nnz = all[r * m];
      is.push_back(ibuf.narrow(0, id[r], ic[r]).view({sdims, nnz}));
      vshape[0] = nnz;
      vs.push_back(vbuf.narrow(0, vd[r], vc[r]).view(vshape));
    }
    at::Tensor sum =
        at::sparse_coo_tensor(at::cat(is, 1), at::cat(vs, 0), in.sizes(), in.options()).coalesce();
    t.copy_(sum);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupZcomm::allreduce_coalesced(
    std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) {
  const CallPrefix pre = Prefix(rank_, size_, "allreduce_coalesced");
  TORCH_CHECK(!tensors.empty(), pre, "no tensors");
  // One flat allreduce per dtype, in the order the dtypes first appear.
  std::vector<std::vector<at::Tensor>> groups;
  std::vector<std::pair<zc_dtype, zc_op>> kinds;
  for (size_t i = 0; i < tensors.size(); ++i) {
    CheckTensor(tensors[i], pre, "input");
    const zc_dtype dt = ToZcDtype(tensors[i].scalar_type(), pre);
    const zc_op op = ToZcOp(opts.reduceOp, tensors[i].scalar_type(), pre);
    size_t g = 0;
    while (g < groups.size() && groups[g][0].scalar_type() != tensors[i].scalar_type()) ++g;
    if (g == groups.size()) {
      groups.emplace_back();
      kinds.emplace_back(dt, op);
    }
    groups[g].push_back(tensors[i]);
  }
  return Enqueue(OpType::ALLREDUCE_COALESCED, "allreduce_coalesced", tensors,
                 [this, groups, kinds](const CallId& w) {
                   for (size_t g = 0; g < groups.size(); ++g) {
                     at::Tensor flat = Flatten(groups[g]);
                     Check(zc_allreduce(comm_, flat.data_ptr(), flat.data_ptr(), Count(flat),
                                        kinds[g].first, kinds[g].second),
                           w);
                     Unflatten(flat, groups[g]);
                   }
                 });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupZcomm::broadcast(std::vector<at::Tensor>& tensors,
                                                            const c10d::BroadcastOptions& opts) {
  const CallPrefix pre = Prefix(rank_, size_, "broadcast");
  CheckSingle(tensors, pre, "input");
  CheckRoot(opts.rootRank, pre);
  TORCH_CHECK(opts.rootTensor == 0, pre, "rootTensor must be 0, got ", opts.rootTensor);
  at::Tensor t = tensors[0];
  const zc_dtype dt = ToZcDtype(t.scalar_type(), pre);
  const int root = static_cast<int>(opts.rootRank);
  return Enqueue(OpType::BROADCAST, "broadcast", tensors, [this, t, dt, root](const CallId& w) {
    at::Tensor buf = t.contiguous();
    Check(zc_broadcast(comm_, buf.data_ptr(), Count(buf), dt, root), w);
    CopyBack(t, buf);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupZcomm::reduce(std::vector<at::Tensor>& tensors,
                                                         const c10d::ReduceOptions& opts) {
  const CallPrefix pre = Prefix(rank_, size_, "reduce");
  CheckSingle(tensors, pre, "input");
  CheckRoot(opts.rootRank, pre);
  TORCH_CHECK(opts.rootTensor == 0, pre, "rootTensor must be 0, got ", opts.rootTensor);
  at::Tensor t = tensors[0];
  const zc_dtype dt = ToZcDtype(t.scalar_type(), pre);
  const zc_op op = ToZcOp(opts.reduceOp, t.scalar_type(), pre);
  const int root = static_cast<int>(opts.rootRank);
  const bool is_root = rank_ == root;
  return Enqueue(OpType::REDUCE, "reduce", tensors,
                 [this, t, dt, op, root, is_root](const CallId& w) {
                   at::Tensor in = t.contiguous();
                   at::Tensor out = is_root ? at::empty_like(in) : in;  // unused off the root
                   Check(zc_reduce(comm_, in.data_ptr(), out.data_ptr(), Count(in), dt, op, root),
                         w);
                   if (is_root) t.copy_(out);
                 });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupZcomm::allgather(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions&) {
  const CallPrefix pre = Prefix(rank_, size_, "allgather");
  CheckSingle(inputs, pre, "input");
  TORCH_CHECK(outputs.size() == 1, pre, "expects one output list, got ", outputs.size());
  TORCH_CHECK(static_cast<int>(outputs[0].size()) == size_, pre, "the output list has ",
              outputs[0].size(), " tensors, expected the group size ", size_);
  at::Tensor in = inputs[0];
  CheckSameAs(outputs[0], in, pre, "output");
  const zc_dtype dt = ToZcDtype(in.scalar_type(), pre);
  std::vector<at::Tensor> outs = outputs[0];
  const int n = size_;
  return Enqueue(OpType::ALLGATHER, "allgather", outs, [this, in, outs, dt, n](const CallId& w) {
    at::Tensor src = in.contiguous();
    const size_t bytes = Count(src) * src.element_size() * static_cast<size_t>(n);
    if (bytes <= kGatherScratchMax && PlainOutputs(outs, src.scalar_type())) {
      // A small gather lands in the group's scratch (no tensor to make).
      gather_scratch_.resize(std::max(gather_scratch_.size(), bytes));
      Check(zc_allgather(comm_, src.data_ptr(), gather_scratch_.data(), Count(src), dt), w);
      CopyOut(gather_scratch_.data(), outs);
      return;
    }
    if (PlainOutputs(outs, src.scalar_type()) && !OverlapsAnother(src, outs, rank_)) {
      // Straight into the outputs: no gathered tensor, whose fresh pages
      // (mapped anew for every large call) cost more than the gather.
      std::vector<void*> blocks(outs.size());
      for (size_t k = 0; k < outs.size(); ++k) blocks[k] = outs[k].data_ptr();
      Check(zc_allgather_list(comm_, src.data_ptr(), blocks.data(), Count(src), dt), w);
      return;
    }
    at::Tensor flat = at::empty({n * src.numel()}, src.options());
    Check(zc_allgather(comm_, src.data_ptr(), flat.data_ptr(), Count(src), dt), w);
    Unflatten(flat, outs);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupZcomm::_allgather_base(
    at::Tensor& output, at::Tensor& input, const c10d::AllgatherOptions&) {
  const CallPrefix pre = Prefix(rank_, size_, "_allgather_base");
  CheckTensor(input, pre, "input");
  CheckTensor(output, pre, "output");
  TORCH_CHECK(output.scalar_type() == input.scalar_type(), pre, "output dtype ",
              c10::toString(output.scalar_type()), " differs from input dtype ",
              c10::toString(input.scalar_type()));
  TORCH_CHECK(output.numel() == size_ * input.numel(), pre, "output has ", output.numel(),
              " elements, expected group size x input = ", size_ * input.numel());
  const zc_dtype dt = ToZcDtype(input.scalar_type(), pre);
  at::Tensor in = input, out = output;
  return Enqueue(OpType::_ALLGATHER_BASE, "_allgather_base", {output},
                 [this, in, out, dt](const CallId& w) {
                   at::Tensor src = in.contiguous();
                   at::Tensor dst = Staged(out);
                   Check(zc_allgather(comm_, src.data_ptr(), dst.data_ptr(), Count(src), dt), w);
                   CopyBack(out, dst);
                 });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupZcomm::allgather_coalesced(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions&) {
  const CallPrefix pre = Prefix(rank_, size_, "allgather_coalesced");
  TORCH_CHECK(!inputs.empty(), pre, "no input tensors");
  TORCH_CHECK(static_cast<int>(outputs.size()) == size_, pre, "expects one output list per rank (",
              size_, "), got ", outputs.size());
  for (size_t r = 0; r < outputs.size(); ++r)
    TORCH_CHECK(outputs[r].size() == inputs.size(), pre, "output list ", r, " has ",
                outputs[r].size(), " tensors, expected one per input (", inputs.size(), ")");
  // Index lists per dtype, in the order the dtypes first appear.
  std::vector<std::vector<size_t>> groups;
  std::vector<zc_dtype> kinds;
  for (size_t i = 0; i < inputs.size(); ++i) {
    CheckTensor(inputs[i], pre, "input");
    for (size_t r = 0; r < outputs.size(); ++r) {
      const at::Tensor& o = outputs[r][i];
      CheckTensor(o, pre, "output");
      TORCH_CHECK(o.scalar_type() == inputs[i].scalar_type(), pre, "output ", r, "[", i,
                  "] has dtype ", c10::toString(o.scalar_type()), ", input ", i, " has ",
                  c10::toString(inputs[i].scalar_type()));
      TORCH_CHECK(o.sizes() == inputs[i].sizes(), pre, "output ", r, "[", i, "] has shape ",
                  o.sizes(), ", input ", i, " has ", inputs[i].sizes());
    }
    size_t g = 0;
    while (g < groups.size() && inputs[groups[g][0]].scalar_type() != inputs[i].scalar_type()) ++g;
    if (g == groups.size()) {
      groups.emplace_back();
      kinds.push_back(ToZcDtype(inputs[i].scalar_type(), pre));
    }
    groups[g].push_back(i);
  }
  std::vector<at::Tensor> all_outputs;
  for (const auto& list : outputs) all_outputs.insert(all_outputs.end(), list.begin(), list.end());
  std::vector<at::Tensor> ins = inputs;
  std::vector<std::vector<at::Tensor>> outs = outputs;
  const int n = size_;
  return Enqueue(OpType::ALLGATHER_COALESCED, "allgather_coalesced", all_outputs,
                 [this, ins, outs, groups, kinds, n](const CallId& w) {
                   for (size_t g = 0; g < groups.size(); ++g) {
                     std::vector<at::Tensor> mine;
                     for (size_t i : groups[g]) mine.push_back(ins[i]);
                     at::Tensor flat = Flatten(mine);
                     const int64_t len = flat.numel();
                     at::Tensor all = at::empty({n * len}, flat.options());
                     Check(zc_allgather(comm_, flat.data_ptr(), all.data_ptr(), Count(flat),
                                        kinds[g]),
                           w);
                     for (int r = 0; r < n; ++r) {
                       std::vector<at::Tensor> theirs;
                       for (size_t i : groups[g]) theirs.push_back(outs[r][i]);
                       Unflatten(all.narrow(0, r * len, len), theirs);
                     }
                   }
                 });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupZcomm::gather(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::GatherOptions& opts) {
  const CallPrefix pre = Prefix(rank_, size_, "gather");
  CheckSingle(inputs, pre, "input");
  CheckRoot(opts.rootRank, pre);
  const int root = static_cast<int>(opts.rootRank);
  at::Tensor in = inputs[0];
  const zc_dtype dt = ToZcDtype(in.scalar_type(), pre);
  std::vector<at::Tensor> outs;
  if (rank_ == root) {
    TORCH_CHECK(outputs.size() == 1 && static_cast<int>(outputs[0].size()) == size_, pre,
                "the root needs one output list of ", size_, " tensors");
    CheckSameAs(outputs[0], in, pre, "output");
    outs = outputs[0];
  } else {
    TORCH_CHECK(outputs.empty() || (outputs.size() == 1 && outputs[0].empty()), pre,
                "only the root (rank ", root, ") takes output tensors");
  }
  const int n = size_;
  return Enqueue(OpType::GATHER, "gather", outs, [this, in, outs, dt, root, n](const CallId& w) {
    at::Tensor src = in.contiguous();
    at::Tensor flat = outs.empty() ? at::Tensor() : at::empty({n * src.numel()}, src.options());
    Check(zc_gather(comm_, src.data_ptr(), flat.defined() ? flat.data_ptr() : nullptr, Count(src),
                    dt, root),
          w);
    if (flat.defined()) Unflatten(flat, outs);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupZcomm::scatter(
    std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
    const c10d::ScatterOptions& opts) {
  const CallPrefix pre = Prefix(rank_, size_, "scatter");
  CheckSingle(outputs, pre, "output");
  CheckRoot(opts.rootRank, pre);
  const int root = static_cast<int>(opts.rootRank);
  at::Tensor out = outputs[0];
  const zc_dtype dt = ToZcDtype(out.scalar_type(), pre);
  std::vector<at::Tensor> ins;
  if (rank_ == root) {
    TORCH_CHECK(inputs.size() == 1 && static_cast<int>(inputs[0].size()) == size_, pre,
                "the root needs one input list of ", size_, " tensors");
    CheckSameAs(inputs[0], out, pre, "input");
    ins = inputs[0];
  } else {
    TORCH_CHECK(inputs.empty() || (inputs.size() == 1 && inputs[0].empty()), pre,
                "only the root (rank ", root, ") takes input tensors");
  }
  return Enqueue(OpType::SCATTER, "scatter", outputs, [this, out, ins, dt, root](const CallId& w) {
    at::Tensor flat = ins.empty() ? at::Tensor() : Flatten(ins);
    at::Tensor dst = Staged(out);
    Check(zc_scatter(comm_, flat.defined() ? flat.data_ptr() : nullptr, dst.data_ptr(), Count(dst),
                     dt, root),
          w);
    CopyBack(out, dst);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupZcomm::reduce_scatter(
    std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  const CallPrefix pre = Prefix(rank_, size_, "reduce_scatter");
  CheckSingle(outputs, pre, "output");
  TORCH_CHECK(inputs.size() == 1 && static_cast<int>(inputs[0].size()) == size_, pre,
              "needs one input list of ", size_, " tensors");
  at::Tensor out = outputs[0];
  CheckSameAs(inputs[0], out, pre, "input");
  const zc_dtype dt = ToZcDtype(out.scalar_type(), pre);
  const zc_op op = ToZcOp(opts.reduceOp, out.scalar_type(), pre);
  std::vector<at::Tensor> ins = inputs[0];
  return Enqueue(OpType::REDUCE_SCATTER, "reduce_scatter", outputs,
                 [this, out, ins, dt, op](const CallId& w) {
                   at::Tensor flat = Flatten(ins);
                   at::Tensor dst = Staged(out);
                   Check(zc_reduce_scatter(comm_, flat.data_ptr(), dst.data_ptr(), Count(dst), dt,
                                           op),
                         w);
                   CopyBack(out, dst);
                 });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupZcomm::_reduce_scatter_base(
    at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) {
  const CallPrefix pre = Prefix(rank_, size_, "_reduce_scatter_base");
  CheckTensor(input, pre, "input");
  CheckTensor(output, pre, "output");
  TORCH_CHECK(output.scalar_type() == input.scalar_type(), pre, "output dtype ",
              c10::toString(output.scalar_type()), " differs from input dtype ",
              c10::toString(input.scalar_type()));
  TORCH_CHECK(input.numel() == size_ * output.numel(), pre, "input has ", input.numel(),
              " elements, expected group size x output = ", size_ * output.numel());
  const zc_dtype dt = ToZcDtype(output.scalar_type(), pre);
  const zc_op op = ToZcOp(opts.reduceOp, output.scalar_type(), pre);
  at::Tensor in = input, out = output;
  return Enqueue(OpType::_REDUCE_SCATTER_BASE, "_reduce_scatter_base", {output},
                 [this, in, out, dt, op](const CallId& w) {
                   at::Tensor src = in.contiguous();
                   at::Tensor dst = Staged(out);
                   Check(zc_reduce_scatter(comm_, src.data_ptr(), dst.data_ptr(), Count(dst), dt,
                                           op),
                         w);
                   CopyBack(out, dst);
                 });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupZcomm::alltoall_base(
    at::Tensor& output, at::Tensor& input, std::vector<int64_t>& output_splits,
    std::vector<int64_t>& input_splits, const c10d::AllToAllOptions&) {
  const CallPrefix pre = Prefix(rank_, size_, "alltoall_base");
  CheckTensor(input, pre, "input");
  CheckTensor(output, pre, "output");
  TORCH_CHECK(output.scalar_type() == input.scalar_type(), pre, "output dtype ",
              c10::toString(output.scalar_type()), " differs from input dtype ",
              c10::toString(input.scalar_type()));
  const zc_dtype dt = ToZcDtype(input.scalar_type(), pre);
  at::Tensor in = input, out = output;
  const int n = size_;
  if (output_splits.empty() && input_splits.empty()) {
    TORCH_CHECK(input.numel() % n == 0, pre, "input has ", input.numel(),
                " elements, not a multiple of the group size ", n);
    TORCH_CHECK(output.numel() == input.numel(), pre, "output has ", output.numel(),
                " elements, input ", input.numel());
    return Enqueue(OpType::ALLTOALL_BASE, "alltoall_base", {output},
                   [this, in, out, dt, n](const CallId& w) {
                     at::Tensor src = in.contiguous();
                     at::Tensor dst = Staged(out);
                     Check(zc_alltoall(comm_, src.data_ptr(), dst.data_ptr(), Count(src) / n, dt),
                           w);
                     CopyBack(out, dst);
                   });
  }
  // Splits are rows of dim 0; zcomm counts elements.
  auto counts = [&](const at::Tensor& t, const std::vector<int64_t>& splits, const char* what) {
    TORCH_CHECK(t.dim() > 0, pre, what, " needs a dimension to split");
    const int64_t rows = t.size(0);
    std::vector<int64_t> s = splits;
    if (s.empty()) {
      TORCH_CHECK(rows % n == 0, pre, what, " has ", rows, " rows, not a multiple of ", n);
      s.assign(n, rows / n);
    }
    TORCH_CHECK(static_cast<int>(s.size()) == n, pre, what, " splits have ", s.size(),
                " entries, expected the group size ", n);
    int64_t sum = 0;
    for (int64_t x : s) {
      TORCH_CHECK(x >= 0, pre, what, " split ", x, " is negative");
      sum += x;
    }
    TORCH_CHECK(sum == rows, pre, what, " splits sum to ", sum, ", but it has ", rows, " rows");
    const int64_t row = rows == 0 ? 0 : t.numel() / rows;
    std::vector<size_t> c(n), d(n);
    size_t off = 0;
    for (int i = 0; i < n; ++i) {
      c[i] = static_cast<size_t>(s[i] * row);
      d[i] = off;
      off += c[i];
    }
    return std::make_pair(c, d);
  };
  auto [sc, sd] = counts(input, input_splits, "input");
  auto [rc, rd] = counts(output, output_splits, "output");
  return Enqueue(OpType::ALLTOALL_BASE, "alltoall_base(uneven)", {output},
                 [this, in, out, dt, sc, sd, rc, rd](const CallId& w) {
                   at::Tensor src = in.contiguous();
                   at::Tensor dst = Staged(out);
                   Check(zc_alltoallv(comm_, src.data_ptr(), sc.data(), sd.data(), dst.data_ptr(),
                                      rc.data(), rd.data(), dt),
                         w);
                   CopyBack(out, dst);
                 });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupZcomm::alltoall(std::vector<at::Tensor>& outputs,
                                                           std::vector<at::Tensor>& inputs,
                                                           const c10d::AllToAllOptions&) {
  const CallPrefix pre = Prefix(rank_, size_, "alltoall");
  const int n = size_;
  TORCH_CHECK(static_cast<int>(inputs.size()) == n && static_cast<int>(outputs.size()) == n, pre,
              "needs ", n, " input and ", n, " output tensors, got ", inputs.size(), " and ",
              outputs.size());
  CheckTensor(inputs[0], pre, "input");
  const at::ScalarType type = inputs[0].scalar_type();
  const zc_dtype dt = ToZcDtype(type, pre);
  std::vector<size_t> sc(n), sd(n), rc(n), rd(n);
  size_t so = 0, ro = 0;
  for (int i = 0; i < n; ++i) {
    CheckTensor(inputs[i], pre, "input");
    CheckTensor(outputs[i], pre, "output");
    TORCH_CHECK(inputs[i].scalar_type() == type && outputs[i].scalar_type() == type, pre,
                "every tensor must have dtype ", c10::toString(type));
    sc[i] = Count(inputs[i]);
    sd[i] = so;
    so += sc[i];
    rc[i] = Count(outputs[i]);
    rd[i] = ro;
    ro += rc[i];
  }
  std::vector<at::Tensor> ins = inputs, outs = outputs;
  return Enqueue(OpType::ALLTOALL, "alltoall", outputs,
                 [this, ins, outs, dt, sc, sd, rc, rd, ro](const CallId& w) {
                   at::Tensor src = Flatten(ins);
                   at::Tensor dst = at::empty({static_cast<int64_t>(ro)}, src.options());
                   Check(zc_alltoallv(comm_, src.data_ptr(), sc.data(), sd.data(), dst.data_ptr(),
                                      rc.data(), rd.data(), dt),
                         w);
                   Unflatten(dst, outs);
                 });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupZcomm::barrier(const c10d::BarrierOptions&) {
  return Enqueue(OpType::BARRIER, "barrier", {},
                 [this](const CallId& w) { Check(zc_barrier(comm_), w); });
}

// gloo's monitored barrier (its messages, which torch's tests match), with the
// group's store as the channel: each rank sets its key and waits for rank 0's
// verdict; rank 0 waits for the keys in rank order and sets the verdict, "ok"
// or its error, so that on a failure the others learn it at once instead of
// at the group's timeout.
void ProcessGroupZcomm::monitoredBarrier(const c10d::BarrierOptions& opts, bool wait_all_ranks) {
  GilReleased no_gil;
  using std::chrono::milliseconds;
  const milliseconds limit = opts.timeout == c10d::kUnsetTimeout ? timeout_ : opts.timeout;
  const std::string base =
      "zcomm/monitored_barrier/" + std::to_string(++monitored_barriers_) + "/";
  const std::string verdict_key = base + "verdict";
  auto bytes = [](const std::string& v) { return std::vector<uint8_t>(v.begin(), v.end()); };
  if (rank_ != 0) {
    store_->set(base + std::to_string(rank_), bytes("here"));
    std::string verdict;
    try {
      store_->wait({verdict_key}, timeout_);
      const std::vector<uint8_t> v = store_->get(verdict_key);
      verdict.assign(v.begin(), v.end());
    } catch (const std::exception& e) {
      verdict = std::string("no word from rank 0 within the group's timeout (") +
                std::to_string(timeout_.count()) + " ms): " + e.what();
    }
    TORCH_CHECK(verdict == "ok", "Rank ", rank_,
                " successfully reached monitoredBarrier, but received errors while waiting for "
                "send/recv from rank 0. Please check rank 0 logs for faulty rank. (zcomm: ",
                verdict, ")");
    return;
  }
  auto fail = [&](const std::string& msg) {
    store_->set(verdict_key, bytes("rank 0 failed the barrier: " + msg));
    TORCH_CHECK(false, msg);
  };
  const auto start = Clock::now();
  std::vector<int> passed, failed;
  for (int r = 1; r < size_; ++r) {
    const std::string key = base + std::to_string(r);
    // wait_all_ranks gives every rank the whole timeout (as gloo).
    const milliseconds left =
        wait_all_ranks ? limit
                       : limit - std::chrono::duration_cast<milliseconds>(Clock::now() - start);
    if (!wait_all_ranks && left.count() <= 0 && !store_->check({key})) {
      std::string done;
      for (int p : passed) done += (done.empty() ? "" : ", ") + std::to_string(p);
      fail("Rank 0 timed out in monitoredBarrier after " + std::to_string(limit.count()) +
           " ms.\n" +
           (done.empty() ? "No ranks successfully processed in monitoredBarrier."
                         : "Successfully processed ranks: " + done));
    }
    bool arrived = store_->check({key});
    if (!arrived && left.count() > 0) {
      try {
        store_->wait({key}, left);
        arrived = true;
      } catch (const std::exception&) {
        arrived = false;
      }
    }
    if (arrived) {
      passed.push_back(r);
    } else if (!wait_all_ranks) {
      fail("[Rank 0]: Rank " + std::to_string(r) + " failed to pass monitoredBarrier in " +
           std::to_string(limit.count()) + " ms");
    } else {
      failed.push_back(r);
    }
  }
  if (!failed.empty()) {
    std::string list;
    for (int p : failed) list += (list.empty() ? "" : ", ") + std::to_string(p);
    fail("[Rank 0]: Ranks " + list + " failed to pass monitoredBarrier in " +
         std::to_string(limit.count()) + " ms");
  }
  store_->set(verdict_key, bytes("ok"));
}

// ---- point to point ------------------------------------------------------------

c10::intrusive_ptr<c10d::Work> ProcessGroupZcomm::send(std::vector<at::Tensor>& tensors, int dst,
                                                       int tag) {
  CheckSingle(tensors, Prefix(rank_, size_, "send"), "input");
  return PostP2p(true, tensors[0], dst, tag);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupZcomm::recv(std::vector<at::Tensor>& tensors, int src,
                                                       int tag) {
  CheckSingle(tensors, Prefix(rank_, size_, "recv"), "output");
  return PostP2p(false, tensors[0], src, tag);
}

// From whichever rank sends next with this tag (zc_irecv_source with
// ZC_ANY_SOURCE); the Work's sourceRank() names it once complete.
c10::intrusive_ptr<c10d::Work> ProcessGroupZcomm::recvAnysource(std::vector<at::Tensor>& tensors,
                                                                int tag) {
  CheckSingle(tensors, Prefix(rank_, size_, "recv"), "output");
  return PostP2p(false, tensors[0], ZC_ANY_SOURCE, tag);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupZcomm::PostP2p(bool is_send, at::Tensor& t, int peer,
                                                          int tag) {
  const char* name = is_send ? "send" : "recv";
  const CallPrefix pre = Prefix(rank_, size_, name);
  const bool any = !is_send && peer == ZC_ANY_SOURCE;
  TORCH_CHECK(any || (peer >= 0 && peer < size_ && peer != rank_), pre, "peer ", peer,
              " is out of range [0, ", size_, ") or this rank");
  TORCH_CHECK(!any || size_ > 1, pre, "receive from any source: rank ", rank_,
              " is alone in its group (no peer could send)");
  TORCH_CHECK(tag >= 0, pre, "tag ", tag, " is negative; zcomm takes tags >= 0");
  const std::string broken = Broken();
  TORCH_CHECK(broken.empty(), pre, "the communicator is broken: ", broken);
  auto op = std::make_shared<P2pOp>();
  op->group = this;
  op->call = NextCall(std::string(name) +
                (is_send ? " to " + std::to_string(peer)
                         : any ? std::string(" from any source") : " from " + std::to_string(peer)) +
                " tag " + std::to_string(tag));
  // A send's contiguous copy is taken now: the caller may change t after.
  op->buf = is_send ? t.contiguous() : Staged(t);
  if (!is_send && !op->buf.is_same(t)) op->target = t;
  const size_t bytes = op->buf.numel() * op->buf.element_size();
  auto work = c10::make_intrusive<WorkZcomm>(
      rank_, is_send ? OpType::SEND : any ? OpType::RECVANYSOURCE : OpType::RECV, op->call,
      std::vector<at::Tensor>{t}, timeout_, [this](const std::string& why) { Abort(why); });
  if (!is_send) {
    op->source = std::make_unique<int>(peer);
    work->SetSource(any ? -1 : peer);
  }
  char label[48];
  op->call.Label(label, sizeof label);
  zc_trace_set_label(label);
  zc_status st = is_send ? zc_isend(comm_, op->buf.data_ptr(), bytes, peer, tag, &op->req)
                         : zc_irecv_source(comm_, op->buf.data_ptr(), bytes, peer, tag,
                                           op->source.get(), &op->req);
  zc_trace_set_label(nullptr);
  TORCH_CHECK(st == ZC_OK, "zcomm ", op->call, " failed: ", zc_status_string(st), ": ",
              zc_last_error(comm_));
  op->deadline = Clock::now() + timeout_;
  // The waiter tries the request itself while it spins: a reply then costs
  // no hand-off through the p2p thread.
  work->SetTryComplete([op](WorkZcomm* w) { return TryFinishP2p(*op, w); });
  {
    std::lock_guard<std::mutex> lock(p2p_mu_);
    incoming_.push_back(P2p{op, work});
  }
  p2p_cv_.notify_one();
  return work;
}

bool ProcessGroupZcomm::TryFinishP2p(P2pOp& op, WorkZcomm* work) {
  if (op.finished.load(std::memory_order_acquire)) return true;
  if (op.busy.exchange(true, std::memory_order_acquire)) return false;  // the other side tests it
  if (op.finished.load(std::memory_order_relaxed)) {
    op.busy.store(false, std::memory_order_release);
    return true;
  }
  int done = 0;
  zc_status st = zc_test(op.req, &done);
  if (!done) {
    op.busy.store(false, std::memory_order_release);
    return false;
  }
  ProcessGroupZcomm& g = *op.group;
  std::string detail = st == ZC_OK ? "" : zc_last_error(g.comm_);
  zc_wait(op.req);  // frees the request (done already)
  if (op.source) work->SetSource(*op.source);  // zcomm wrote it before reporting done
  std::exception_ptr error;
  if (st == ZC_OK) {
    try {
      if (op.target.defined()) op.target.copy_(op.buf);
    } catch (...) {
      error = std::current_exception();
    }
  } else {
    const std::string broken = g.Broken();
    error = std::make_exception_ptr(std::runtime_error(
        "zcomm " + op.call.str() + " failed: " + zc_status_string(st) + ": " + detail +
        (broken.empty() ? "" : " (" + broken + ")")));
  }
  // Finished before Complete: once wait() returns, the caller may drop the
  // Work and the p2p thread its entry, and nothing may touch op after.
  op.finished.store(true, std::memory_order_release);
  op.busy.store(false, std::memory_order_release);
  work->Complete(error);
  return true;
}

// Completes finished requests (or drops those a waiter completed); returns
// whether any finished.
bool ProcessGroupZcomm::PollP2p(std::vector<P2p>& pending) {
  bool any = false;
  const auto now = Clock::now();
  for (size_t i = 0; i < pending.size();) {
    P2p& p = pending[i];
    if (TryFinishP2p(*p.op, p.work.get())) {
      pending.erase(pending.begin() + static_cast<std::ptrdiff_t>(i));
      any = true;
      continue;
    }
    if (now > p.op->deadline) {
      Abort("zcomm " + p.op->call.str() + ": not completed within " +
            std::to_string(timeout_.count()) + " ms: Timed out (the process group's timeout)");
    }
    ++i;  // an abort makes the request done next round
  }
  return any;
}

// Completes point-to-point requests, and watches the communicator: once
// zcomm reports it broken (a lost peer, an abort), later operations fail at
// once with that cause; a request past the group's timeout aborts it.
void ProcessGroupZcomm::P2pLoop() {
  std::vector<P2p> pending;
  auto next_check = Clock::now();
  std::chrono::microseconds pause(20);
  auto last_activity = Clock::now();
  // Within kP2pPoll of a post or a completion: look again at once.
  auto polling = [&] { return Clock::now() - last_activity < kP2pPoll; };
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(p2p_mu_);
      if (pending.empty() && incoming_.empty()) {
        if (p2p_stop_) return;
        if (polling()) {
          // The next post (the other half of a ping-pong) usually comes
          // within microseconds; a wake-up from the condition variable
          // costs tens of them.
          lock.unlock();
          std::this_thread::yield();
          continue;
        }
        p2p_cv_.wait_for(lock, std::chrono::milliseconds(100));
      }
      if (!incoming_.empty()) {
        pause = std::chrono::microseconds(20);
        last_activity = Clock::now();
      }
      for (P2p& p : incoming_) pending.push_back(std::move(p));
      incoming_.clear();
      if (p2p_stop_ && !pending.empty() && Broken().empty()) {
        // The group is going away with receives nobody will match.
        lock.unlock();
        Abort("zcomm rank " + std::to_string(rank_) +
              ": process group destroyed with point-to-point operations pending");
      }
    }
    if (Clock::now() >= next_check) {
      next_check = Clock::now() + std::chrono::milliseconds(100);
      zc_status err = ZC_OK;
      if (zc_comm_get_async_error(comm_, &err) == ZC_OK && err != ZC_OK && Broken().empty()) {
        // zcomm has already failed the communicator (and told the peers,
        // with the cause): only remember the cause for later calls.
        std::lock_guard<std::mutex> lock(err_mu_);
        SetBrokenLocked("rank " + std::to_string(rank_) + ": " + zc_status_string(err) + ": " +
                        zc_last_error(comm_));
      }
    }
    if (pending.empty()) continue;
    if (PollP2p(pending)) {
      pause = std::chrono::microseconds(20);
      last_activity = Clock::now();
    } else if (polling()) {
      // A reply to what just went out comes within microseconds: look
      // again at once (yielding the core to any thread that wants it)
      // rather than sleep, which costs a timer's slack (50 us or more).
      std::this_thread::yield();
    } else {
      // Back off to 1 ms: ranks outnumber cores, polling must not starve them.
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::microseconds(1000));
    }
  }
}

}  // namespace zcomm_torch
