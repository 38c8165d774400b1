"""Horovod's torch operations (horovod/torch/mpi_ops.py) on zcomm's engine.

Every operation is named and asynchronous underneath: the *_async forms
return an integer handle for poll() and synchronize(); the others wait.
The engine (include/zcomm/zcomm_engine.h) negotiates names across ranks,
fuses small allreduces and reports mismatches, stalls and lost peers on
every rank. Process sets are sub-communicators with an engine each. See
docs/horovod.md.

Errors are raised as Horovod raises them: ValueError for a mistake found on
this rank before anything is queued (a name already pending, bad splits, a
rank outside the process set), HorovodInternalError (a RuntimeError) for
what the engine reports (a mismatch between ranks, a lost peer, a shut-down
engine). A mismatch fails only that operation; the engine goes on.
"""
import atexit
import threading

import torch

from ._C import engine as _eng
from .compression import Compression

HorovodInternalError = _eng.HorovodInternalError

# Horovod's reduce operations (the values are Horovod's).
Average = 0
Sum = 1
Adasum = 2
Min = 3
Max = 4
Product = 5

_ZC_OPS = {Average: _eng.AVG, Sum: _eng.SUM, Min: _eng.MIN, Max: _eng.MAX, Product: _eng.PROD}

_lock = threading.Lock()
_handle_map = {}
_next_handle = 0
_noname = {}
_atexit_registered = False


# ---- process sets -----------------------------------------------------------

def _is_iterable(x):
    try:
        iter(x)
    except TypeError:
        return False
    return True


class ProcessSet:
    """A set of ranks that runs collectives together (Horovod's ProcessSet).

    Make it from a list of global ranks and register it with hvd.init(
    process_sets=[...]) or hvd.add_process_set(); every rank of the job adds
    the same sets in the same order. Operations take process_set=; ranks
    outside the set must not call them. Roots (broadcast's root_rank) are
    global ranks, as in Horovod."""
    process_set_id = None
    ranks = None
    mpi_comm = None

    def __init__(self, ranks_or_comm):
        if not _is_iterable(ranks_or_comm):
            raise ValueError("zcomm.torch: ProcessSet takes a list of ranks (zcomm has no MPI "
                             "communicators), got %r" % (ranks_or_comm,))
        ranks = sorted(ranks_or_comm)
        if any(not isinstance(rk, int) for rk in ranks):
            raise ValueError("zcomm.torch: ProcessSet should be initialized with a list of process "
                             "ranks (ints), got %r" % (ranks_or_comm,))
        self.ranks = ranks

    def _invalidate(self):
        self.process_set_id = None

    def size(self):
        """Number of ranks in the set, None if the set is not registered."""
        if self.process_set_id is None:
            return None
        return _eng.process_set_size(self.process_set_id)

    def rank(self):
        """This rank's place in the set (None if not registered; -1 if not
        a member)."""
        if self.process_set_id is None:
            return None
        return _eng.process_set_rank(self.process_set_id)

    def included(self):
        """Whether this rank is in the set (None before ranks are known)."""
        if self.ranks is None:
            return None
        return rank() in self.ranks

    def __str__(self):
        return "ProcessSet(process_set_id=%s, ranks=%s, mpi_comm=None)" % (self.process_set_id,
                                                                          self.ranks)

    __repr__ = __str__


global_process_set = ProcessSet([])
global_process_set.process_set_id = 0
_registered_sets = []  # every ProcessSet registered since init(), to invalidate at shutdown


def _register_set(process_set):
    if process_set.ranks == global_process_set.ranks:
        raise ValueError("zcomm.torch: add_process_set: %s has the ranks of the global process set"
                         % process_set)
    process_set.process_set_id = _eng.add_process_set(process_set.ranks)
    _registered_sets.append(process_set)
    return process_set


def add_process_set(process_set):
    """Adds a process set (a ProcessSet or a list of ranks) and returns it,
    registered. Collective: every rank of the job calls it with the same
    ranks. ValueError for a set that exists already or bad ranks."""
    _check_init()
    if not isinstance(process_set, ProcessSet):
        process_set = ProcessSet(process_set)
    if process_set.process_set_id is not None:
        raise ValueError("zcomm.torch: add_process_set: %s is registered already" % process_set)
    return _register_set(process_set)


def remove_process_set(process_set):
    """Removes a process set added before; returns whether it was removed
    (False for the global set or one not registered). Collective: every
    rank of the job calls it."""
    _check_init()
    set_id = process_set.process_set_id
    if set_id is None or set_id == 0:
        return False
    process_set._invalidate()
    if process_set in _registered_sets:
        _registered_sets.remove(process_set)
    return _eng.remove_process_set(set_id)


def _set_id(process_set, what):
    """The engine's id of process_set (ValueError if it is not registered)."""
    if process_set is None:
        return 0
    if not isinstance(process_set, ProcessSet):
        raise ValueError("zcomm.torch: %s: process_set must be a ProcessSet, got %r"
                         % (what, process_set))
    if process_set.process_set_id is None:
        raise ValueError("zcomm.torch: %s: %s is not registered (hvd.add_process_set, or "
                         "hvd.init(process_sets=...))" % (what, process_set))
    return process_set.process_set_id


def _set_size(process_set):
    set_id = 0 if process_set is None else process_set.process_set_id
    return _eng.process_set_size(set_id)


def _set_rank(process_set):
    set_id = 0 if process_set is None else process_set.process_set_id
    return _eng.process_set_rank(set_id)


# ---- setup ----------------------------------------------------------------

def init(comm=None, process_sets=None):
    """Makes the communicator from the environment (zcrun, PMIx under mpirun,
    or a single process) and starts the engine, then registers process_sets
    (a list of ProcessSet). Collective; starts an engine exactly when
    is_initialized() is False, so it does nothing while this rank has not
    been told that the engine stopped, and starts anew after a call raised
    that it had (a peer's shutdown(), a lost peer)."""
    if comm is not None:
        raise ValueError("zcomm.torch.init: comm= (an MPI communicator or a list of ranks) is "
                         "not supported; zcomm takes every rank of the job from the environment "
                         "(use process sets for subsets)")
    process_sets = _sets_arg(process_sets)
    if _eng.init():  # a new engine: what belonged to the old one is gone
        _forget_engine()
    _after_init(process_sets)


def init_rank(uid, nranks, rank, process_sets=None):
    """init() for ranks started without a launcher (a zcomm extension): the
    communicator from a zcomm unique id (zcomm.get_unique_id(), made on one
    rank and carried to the others), as zcomm.Communicator.from_unique_id.
    Collective over the nranks ranks."""
    process_sets = _sets_arg(process_sets)
    if _eng.init_rank(bytes(uid), int(nranks), int(rank)):
        _forget_engine()
    _after_init(process_sets)


def _sets_arg(process_sets):
    if isinstance(process_sets, str):
        if process_sets != "dynamic":
            raise ValueError("zcomm.torch.init: process_sets must be a list of ProcessSet or "
                             "'dynamic', got %r" % (process_sets,))
        process_sets = None  # sets may always be added after init
    return process_sets


def _forget_engine():
    """What belonged to the engine that stopped: handles, process sets."""
    global _handle_map
    with _lock:
        _handle_map = {}
        _noname.clear()
    for ps in _registered_sets:
        ps._invalidate()
    del _registered_sets[:]


def _shrink():
    """Elastic recovery (zcomm.torch.elastic): the engine restarts on the
    live ranks, renumbered in order; process sets are removed. Collective
    over the live ranks."""
    _forget_engine()
    _eng.shrink()
    global_process_set.ranks = list(range(_eng.size()))


def _after_init(process_sets):
    global _atexit_registered
    global_process_set.ranks = list(range(_eng.size()))
    seen = [global_process_set.ranks] + [ps.ranks for ps in _registered_sets]
    for ps in process_sets or []:
        if not isinstance(ps, ProcessSet):
            raise ValueError("zcomm.torch.init: process_sets must hold ProcessSet objects, got %r"
                             % (ps,))
        if ps.ranks in seen:
            ps._invalidate()  # a duplicate (of the global set, or of one before it)
            continue
        _register_set(ps)
        seen.append(ps.ranks)
    if not _atexit_registered:
        atexit.register(shutdown)
        _atexit_registered = True


def shutdown():
    """Stops the engine on every rank (pending operations fail), removes the
    process sets and frees the communicator."""
    _forget_engine()
    _eng.shutdown()


def is_initialized():
    """This rank's view: True from init() until this rank's shutdown(), or
    until one of its operations raised because the engine had stopped (a
    peer's shutdown(), a lost peer); init() starts an engine exactly when it
    is False. Only this rank's own calls change it, so init();
    is_initialized() is True on every rank however soon a peer calls
    shutdown(), and the ranks' init() calls start engines together."""
    return _eng.is_initialized()


def _check_init():
    if not _eng.is_initialized():
        err = _eng.error() if _eng.process_sets() else ""
        raise ValueError("zcomm.torch (Horovod API) has not been initialized; use hvd.init()."
                         + (" The engine stopped: %s" % err if err else ""))


def size():
    return _eng.size()


def local_size():
    return _eng.local_size()


def cross_size():
    return _eng.cross_size()


def rank():
    return _eng.rank()


def local_rank():
    return _eng.local_rank()


def cross_rank():
    return _eng.cross_rank()


def is_homogeneous():
    return _eng.size() % _eng.local_size() == 0


def engine_stats():
    """zc_engine_get_stats: cycles, negotiation_collectives, cache_hits, ...
    (a zcomm extension, for benchmarks and tests)."""
    return _eng.stats()


def mpi_threads_supported():
    return True


def mpi_enabled():
    return False


def mpi_built():
    return False


def gloo_enabled():
    return False


def gloo_built():
    return False


def nccl_built():
    return 0


def ddl_built():
    return False


def ccl_built():
    return False


def cuda_built():
    return False


def rocm_built():
    return False


# ---- handles ----------------------------------------------------------------

class _Pending:
    __slots__ = ("handles", "finish")

    def __init__(self, handles, finish):
        self.handles = handles
        self.finish = finish


def _register(handles, finish):
    global _next_handle
    with _lock:
        h = _next_handle
        _next_handle += 1
        _handle_map[h] = _Pending(handles, finish)
    return h


def _name(kind, name, set_id):
    """The engine's name: the caller's, or the next unnamed one of this kind
    in this process set (the same sequence on every rank of the set)."""
    if name is None:
        with _lock:
            n = _noname.get((kind, set_id), 0)
            _noname[(kind, set_id)] = n + 1
        return "%s.noname.%d" % (kind, n)
    return "%s.%s" % (kind, name)


def poll(handle):
    """True once the operation of handle is done (or failed: synchronize()
    raises then)."""
    with _lock:
        p = _handle_map.get(handle)
    if p is None:
        raise ValueError("zcomm.torch: poll: unknown handle %r (already synchronized?)" % (handle,))
    try:
        return all(h.poll() for h in p.handles)
    except HorovodInternalError:
        return True


def synchronize(handle):
    """Waits for the operation of handle and returns its result."""
    with _lock:
        p = _handle_map.pop(handle, None)
    if p is None:
        raise ValueError("zcomm.torch: synchronize: unknown handle %r (already synchronized?)"
                         % (handle,))
    for h in p.handles:
        h.wait()
    return p.finish(p.handles)


def _contiguous_out(tensor):
    return torch.empty(tensor.shape, dtype=tensor.dtype)


def _check_cpu(tensor, what):
    if not isinstance(tensor, torch.Tensor):
        raise TypeError("zcomm.torch: %s: expected a torch.Tensor, got %s" % (what, type(tensor)))
    if tensor.device.type != "cpu":
        raise ValueError("zcomm.torch: %s: tensor is on %s; zcomm.torch takes CPU tensors"
                         % (what, tensor.device))
    if tensor.is_sparse:
        raise ValueError("zcomm.torch: %s: sparse tensors go through sparse_allreduce_async"
                         % what)


# ---- allreduce --------------------------------------------------------------

def _resolve_op(op, average, what):
    if op is not None and average is not None:
        raise ValueError("zcomm.torch: %s: give op= or the deprecated average=, not both" % what)
    if op is None:
        op = Sum if average is False else Average
    if op == Adasum:
        raise NotImplementedError("zcomm.torch: %s: op=Adasum is not supported by zcomm; use "
                                  "Average or Sum" % what)
    if op not in _ZC_OPS:
        raise ValueError("zcomm.torch: %s: unknown op %r (Average, Sum, Min, Max, Product)"
                         % (what, op))
    return op


def _allreduce_submit(tensor, output, name, op, prescale_factor, postscale_factor, set_id, what):
    """Submits tensor -> output (output may be tensor); returns (engine
    handle, finish step that returns output)."""
    _check_init()
    _check_cpu(tensor, what)
    zc_op = _ZC_OPS[op]
    post = None
    if not tensor.dtype.is_floating_point and op == Average:
        if tensor.dtype == torch.bool:
            raise ValueError("zcomm.torch: %s '%s': Average is not defined for bool tensors; use "
                             "Sum or Max (logical or), Min or Product (logical and)" % (what, name))
        # The engine averages floating types; integers are summed and
        # divided here, rounding toward zero as torch's integer division.
        zc_op = _eng.SUM
        n = _eng.process_set_size(set_id)
        post = lambda t: t.copy_(torch.div(t, n, rounding_mode="trunc"))  # noqa: E731
    src = tensor if tensor.is_contiguous() else tensor.contiguous()
    if output is tensor:
        dst = src
    else:
        dst = output if output.is_contiguous() else _contiguous_out(output)
    h = _eng.allreduce(src, dst, name, zc_op, float(prescale_factor), float(postscale_factor),
                       set_id)

    def finish(_):
        if dst is not output:
            output.copy_(dst)
        if post is not None:
            post(output)
        return output
    return h, finish


def allreduce_async(tensor, average=None, name=None, op=None, prescale_factor=1.0,
                    postscale_factor=1.0, process_set=global_process_set):
    """Asynchronous allreduce into a new tensor; returns a handle."""
    op = _resolve_op(op, average, "allreduce_async")
    set_id = _set_id(process_set, "allreduce_async")
    output = _contiguous_out(tensor)
    h, finish = _allreduce_submit(tensor, output, _name("allreduce", name, set_id), op,
                                  prescale_factor, postscale_factor, set_id, "allreduce")
    return _register([h], finish)


def allreduce_async_(tensor, average=None, name=None, op=None, prescale_factor=1.0,
                     postscale_factor=1.0, process_set=global_process_set):
    """Asynchronous in-place allreduce; returns a handle."""
    op = _resolve_op(op, average, "allreduce_async_")
    set_id = _set_id(process_set, "allreduce_async_")
    h, finish = _allreduce_submit(tensor, tensor, _name("allreduce", name, set_id), op,
                                  prescale_factor, postscale_factor, set_id, "allreduce")
    return _register([h], finish)


class HorovodAllreduce(torch.autograd.Function):
    """Allreduce whose gradient is the allreduce of the gradient."""

    @staticmethod
    def forward(ctx, tensor, name, op, prescale_factor, postscale_factor, process_set):
        ctx.op = op
        ctx.prescale_factor = prescale_factor
        ctx.postscale_factor = postscale_factor
        ctx.process_set = process_set
        return synchronize(allreduce_async(tensor, name=name, op=op,
                                           prescale_factor=prescale_factor,
                                           postscale_factor=postscale_factor,
                                           process_set=process_set))

    @staticmethod
    def backward(ctx, grad_output):
        return (allreduce(grad_output, op=ctx.op, prescale_factor=ctx.prescale_factor,
                          postscale_factor=ctx.postscale_factor, process_set=ctx.process_set),
                None, None, None, None, None)


def allreduce(tensor, average=None, name=None, compression=Compression.none, op=None,
              prescale_factor=1.0, postscale_factor=1.0, process_set=global_process_set):
    """Allreduce into a new tensor (differentiable)."""
    op = _resolve_op(op, average, "allreduce")
    compressed, ctx = compression.compress(tensor)
    summed = HorovodAllreduce.apply(compressed, name, op, prescale_factor, postscale_factor,
                                    process_set)
    return compression.decompress(summed, ctx)


def allreduce_(tensor, average=None, name=None, op=None, prescale_factor=1.0,
               postscale_factor=1.0, process_set=global_process_set):
    """In-place allreduce; returns tensor."""
    return synchronize(allreduce_async_(tensor, average, name, op, prescale_factor,
                                        postscale_factor, process_set))


def _grouped_allreduce(tensors, average, name, op, prescale_factor, postscale_factor, inplace,
                       process_set, what):
    op = _resolve_op(op, average, what)
    set_id = _set_id(process_set, what)
    base = _name("grouped_allreduce", name, set_id)
    handles, finishes = [], []
    for i, t in enumerate(tensors):
        out = t if inplace else _contiguous_out(t)
        h, f = _allreduce_submit(t, out, "%s.%d" % (base, i), op, prescale_factor,
                                 postscale_factor, set_id, what)
        handles.append(h)
        finishes.append(f)
    return _register(handles, lambda hs: [f(None) for f in finishes])


def grouped_allreduce_async(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                            postscale_factor=1.0, process_set=global_process_set):
    """Allreduces of a list of tensors under one handle (fused by the engine);
    synchronize() returns the list of results."""
    return _grouped_allreduce(tensors, average, name, op, prescale_factor, postscale_factor,
                              False, process_set, "grouped_allreduce_async")


def grouped_allreduce_async_(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                             postscale_factor=1.0, process_set=global_process_set):
    """In-place grouped_allreduce_async."""
    return _grouped_allreduce(tensors, average, name, op, prescale_factor, postscale_factor,
                              True, process_set, "grouped_allreduce_async_")


class HorovodGroupedAllreduce(torch.autograd.Function):
    """Grouped allreduce whose gradients are the grouped allreduce of the
    gradients."""

    @staticmethod
    def forward(ctx, name, op, prescale_factor, postscale_factor, process_set, *tensors):
        ctx.op = op
        ctx.prescale_factor = prescale_factor
        ctx.postscale_factor = postscale_factor
        ctx.process_set = process_set
        return tuple(synchronize(grouped_allreduce_async(
            list(tensors), name=name, op=op, prescale_factor=prescale_factor,
            postscale_factor=postscale_factor, process_set=process_set)))

    @staticmethod
    def backward(ctx, *grad_output):
        grads = grouped_allreduce(list(grad_output), op=ctx.op,
                                  prescale_factor=ctx.prescale_factor,
                                  postscale_factor=ctx.postscale_factor,
                                  process_set=ctx.process_set)
        return (None, None, None, None, None, *grads)


def grouped_allreduce(tensors, average=None, name=None, compression=Compression.none, op=None,
                      prescale_factor=1.0, postscale_factor=1.0, process_set=global_process_set):
    """Allreduce of each tensor of a list (differentiable); the list of
    results."""
    op = _resolve_op(op, average, "grouped_allreduce")
    pairs = [compression.compress(t) for t in tensors]
    outs = HorovodGroupedAllreduce.apply(name, op, prescale_factor, postscale_factor, process_set,
                                         *[c for c, _ in pairs])
    return [compression.decompress(o, ctx) for o, (_, ctx) in zip(outs, pairs)]


def grouped_allreduce_(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                       postscale_factor=1.0, process_set=global_process_set):
    """In-place grouped_allreduce; returns the list of tensors."""
    return synchronize(grouped_allreduce_async_(tensors, average, name, op, prescale_factor,
                                                postscale_factor, process_set))


def sparse_allreduce_async(tensor, name, op, process_set=global_process_set):
    """Allreduce of a sparse COO tensor as Horovod does it: every rank's
    indices and values are allgathered (so the result may hold repeated
    indices, which sum). Returns a function that waits and returns the
    sparse result."""
    if op not in (Average, Sum):
        raise ValueError("zcomm.torch: sparse_allreduce_async: op must be Average or Sum, got %r"
                         % (op,))
    t = tensor
    # Allgather concatenates along the first dimension: send the indices as
    # [nnz, sparse_dim] rows and transpose them back.
    indices_handle = allgather_async(t._indices().transpose(0, 1).contiguous(),
                                     name="%s.indices" % name, process_set=process_set)
    values_handle = allgather_async(t._values().contiguous(), name="%s.values" % name,
                                    process_set=process_set)

    def handle():
        values = synchronize(values_handle)
        indices = synchronize(indices_handle)
        if op == Average:
            values = values / _set_size(process_set)
        return torch.sparse_coo_tensor(indices.transpose(0, 1), values, t.size(),
                                       dtype=t.dtype)
    return handle


# ---- allgather --------------------------------------------------------------

def _allgather_submit(tensor, name, set_id, what):
    _check_init()
    _check_cpu(tensor, what)
    src = tensor if tensor.dim() > 0 else tensor.reshape(1)
    return _eng.allgather(src.contiguous(), name, set_id)


def allgather_async(tensor, name=None, process_set=global_process_set):
    """Concatenation of every rank's tensor along the first dimension (which
    may differ by rank); returns a handle."""
    set_id = _set_id(process_set, "allgather_async")
    h = _allgather_submit(tensor, _name("allgather", name, set_id), set_id, "allgather")
    return _register([h], lambda hs: hs[0].output())


def _gather_offset(dims, process_set):
    """This rank's first row in an allgather whose ranks gave dims rows."""
    return int(dims[:_set_rank(process_set)].sum().item())


class HorovodAllgather(torch.autograd.Function):
    """Allgather whose gradient is this rank's rows of the averaged
    gradient."""

    @staticmethod
    def forward(ctx, tensor, name, process_set):
        ctx.dim = tensor.shape[0] if tensor.dim() > 0 else 1
        ctx.process_set = process_set
        return synchronize(allgather_async(tensor, name, process_set))

    @staticmethod
    def backward(ctx, grad_output):
        grad_reduced = allreduce(grad_output, op=Average, process_set=ctx.process_set)
        dims = synchronize(allgather_async(torch.tensor([ctx.dim], dtype=torch.int64),
                                           process_set=ctx.process_set))
        offset = _gather_offset(dims, ctx.process_set)
        return grad_reduced.narrow(0, offset, ctx.dim), None, None


def allgather(tensor, name=None, process_set=global_process_set):
    """Concatenation of every rank's tensor along the first dimension
    (differentiable)."""
    return HorovodAllgather.apply(tensor, name, process_set)


def grouped_allgather_async(tensors, name=None, process_set=global_process_set):
    """Allgathers of a list of tensors under one handle; synchronize()
    returns the list of results."""
    set_id = _set_id(process_set, "grouped_allgather_async")
    base = _name("grouped_allgather", name, set_id)
    handles = [_allgather_submit(t, "%s.%d" % (base, i), set_id, "grouped_allgather")
               for i, t in enumerate(tensors)]
    return _register(handles, lambda hs: [h.output() for h in hs])


class HorovodGroupedAllgather(torch.autograd.Function):
    """Grouped allgather whose gradients are each rank's rows of the
    averaged gradients."""

    @staticmethod
    def forward(ctx, name, process_set, *tensors):
        ctx.dims = [t.shape[0] if t.dim() > 0 else 1 for t in tensors]
        ctx.process_set = process_set
        return tuple(synchronize(grouped_allgather_async(list(tensors), name, process_set)))

    @staticmethod
    def backward(ctx, *grad_output):
        grads = grouped_allreduce(list(grad_output), op=Average, process_set=ctx.process_set)
        dims = synchronize(allgather_async(torch.tensor([ctx.dims], dtype=torch.int64),
                                           process_set=ctx.process_set))
        rows = []
        for i, (g, dim) in enumerate(zip(grads, ctx.dims)):
            rows.append(g.narrow(0, _gather_offset(dims[:, i], ctx.process_set), dim))
        return (None, None, *rows)


def grouped_allgather(tensors, name=None, process_set=global_process_set):
    """Allgather of each tensor of a list (differentiable); the list of
    results."""
    return list(HorovodGroupedAllgather.apply(name, process_set, *tensors))


# ---- broadcast --------------------------------------------------------------

def broadcast_async_(tensor, root_rank, name=None, process_set=global_process_set):
    """In-place broadcast from root_rank (a global rank in the set); returns a
    handle."""
    _check_init()
    set_id = _set_id(process_set, "broadcast_async_")
    _check_cpu(tensor, "broadcast")
    buf = tensor if tensor.is_contiguous() else tensor.contiguous()
    h = _eng.broadcast(buf, _name("broadcast", name, set_id), int(root_rank), set_id)

    def finish(_):
        if buf is not tensor:
            tensor.copy_(buf)
        return tensor
    return _register([h], finish)


def broadcast_async(tensor, root_rank, name=None, process_set=global_process_set):
    """Broadcast into a new tensor; returns a handle."""
    return broadcast_async_(tensor.detach().clone(memory_format=torch.contiguous_format),
                            root_rank, name, process_set)


class HorovodBroadcast(torch.autograd.Function):
    """Broadcast whose gradient is the averaged gradient on the root and zero
    elsewhere."""

    @staticmethod
    def forward(ctx, tensor, root_rank, name, process_set):
        ctx.root_rank = root_rank
        ctx.process_set = process_set
        return synchronize(broadcast_async(tensor, root_rank, name, process_set))

    @staticmethod
    def backward(ctx, grad_output):
        grad_reduced = allreduce(grad_output, op=Average, process_set=ctx.process_set)
        if rank() != ctx.root_rank:
            grad_reduced = grad_reduced * 0
        return grad_reduced, None, None, None


def broadcast(tensor, root_rank, name=None, process_set=global_process_set):
    """root_rank's tensor, in a new tensor (differentiable)."""
    return HorovodBroadcast.apply(tensor, root_rank, name, process_set)


def broadcast_(tensor, root_rank, name=None, process_set=global_process_set):
    """In-place broadcast; returns tensor."""
    return synchronize(broadcast_async_(tensor, root_rank, name, process_set))


# ---- alltoall ---------------------------------------------------------------

def _splits_list(splits, what):
    if splits is None:
        return []
    if isinstance(splits, torch.Tensor):
        if splits.dtype not in (torch.int32, torch.int64) or splits.dim() != 1:
            raise ValueError("zcomm.torch: %s: splits must be a 1-D tensor of int32 (or int64), "
                             "got %s of shape %s" % (what, splits.dtype, list(splits.shape)))
        return [int(v) for v in splits.tolist()]
    values = list(splits)
    if any(not isinstance(v, int) for v in values):
        raise ValueError("zcomm.torch: %s: splits must be integers, got %r" % (what, values))
    return values


def alltoall_async(tensor, splits=None, name=None, process_set=global_process_set):
    """splits[r] rows of tensor to rank r of the set (None: even);
    synchronize() returns (output, received_splits)."""
    _check_init()
    set_id = _set_id(process_set, "alltoall_async")
    _check_cpu(tensor, "alltoall")
    sp = _splits_list(splits, "alltoall")
    h = _eng.alltoall(tensor.contiguous(), sp, _name("alltoall", name, set_id), set_id)
    return _register([h], lambda hs: (hs[0].output(),
                                      torch.tensor(hs[0].received_splits(), dtype=torch.int32)))


class HorovodAlltoall(torch.autograd.Function):
    """Alltoall whose gradient is the alltoall back along the received
    splits."""

    @staticmethod
    def forward(ctx, tensor, splits, name, process_set):
        output, received = synchronize(alltoall_async(tensor, splits, name, process_set))
        ctx.received = received
        ctx.process_set = process_set
        if splits is None:
            return output
        ctx.mark_non_differentiable(received)
        return output, received

    @staticmethod
    def backward(ctx, grad_output, *unused):
        grad, _ = synchronize(alltoall_async(grad_output.contiguous(), ctx.received,
                                             process_set=ctx.process_set))
        return grad, None, None, None


def alltoall(tensor, splits=None, name=None, process_set=global_process_set):
    """Scatters rows of tensor to every rank and gathers theirs: the output
    (and, when splits is given, the received splits, as Horovod)."""
    return HorovodAlltoall.apply(tensor, splits, name, process_set)


# ---- reducescatter ----------------------------------------------------------

def _reducescatter_submit(tensor, name, op, set_id, prescale_factor, postscale_factor, what):
    """Submits a reducescatter; returns (engine handle, finish step that
    takes the engine's output)."""
    _check_init()
    _check_cpu(tensor, what)
    if op == Adasum:
        raise NotImplementedError("zcomm.torch: %s: op=Adasum is not supported for "
                                  "reducescatter" % what)
    op = _resolve_op(op, None, what)
    zc_op = _ZC_OPS[op]
    post = None
    if not tensor.dtype.is_floating_point and op == Average:
        zc_op = _eng.SUM
        n = _eng.process_set_size(set_id)
        post = lambda t: torch.div(t, n, rounding_mode="trunc")  # noqa: E731
    h = _eng.reducescatter(tensor.contiguous(), name, zc_op, float(prescale_factor),
                           float(postscale_factor), set_id)
    return h, (lambda out: post(out) if post is not None else out)


def reducescatter_async(tensor, name=None, op=Average, process_set=global_process_set,
                        prescale_factor=1.0, postscale_factor=1.0):
    """Reduction over the set's ranks, rank r keeping its part of the first
    dimension (the first dim0 % size ranks one row more); returns a
    handle."""
    set_id = _set_id(process_set, "reducescatter_async")
    h, finish = _reducescatter_submit(tensor, _name("reducescatter", name, set_id), op, set_id,
                                      prescale_factor, postscale_factor, "reducescatter")
    return _register([h], lambda hs: finish(hs[0].output()))


def _reducescatter_grad(grad, op, scale, process_set):
    """The gradient of a reducescatter's input from its output's gradient,
    before the allgather: Horovod's (Sum multiplies by the set's size)."""
    if op == Sum:
        grad = grad * _set_size(process_set)
    if scale != 1.0:
        grad = grad * scale
    return grad


class HorovodReducescatter(torch.autograd.Function):
    """Reducescatter whose gradient is the allgather of the gradient (times
    the set's size for Sum, as Horovod, and the scale factors)."""

    @staticmethod
    def forward(ctx, tensor, name, op, prescale_factor, postscale_factor, process_set):
        ctx.op = op
        ctx.scale = prescale_factor * postscale_factor
        ctx.process_set = process_set
        return synchronize(reducescatter_async(tensor, name, op, process_set, prescale_factor,
                                               postscale_factor))

    @staticmethod
    def backward(ctx, grad_output):
        grad = _reducescatter_grad(grad_output, ctx.op, ctx.scale, ctx.process_set)
        return (synchronize(allgather_async(grad.contiguous(), process_set=ctx.process_set)),
                None, None, None, None, None)


def reducescatter(tensor, name=None, compression=Compression.none, op=Average,
                  process_set=global_process_set, prescale_factor=1.0, postscale_factor=1.0):
    """Reducescatter into a new tensor (differentiable)."""
    compressed, ctx = compression.compress(tensor)
    out = HorovodReducescatter.apply(compressed, name, op, prescale_factor, postscale_factor,
                                     process_set)
    return compression.decompress(out, ctx)


def grouped_reducescatter_async(tensors, name=None, op=Average, process_set=global_process_set,
                                prescale_factor=1.0, postscale_factor=1.0):
    """Reducescatters of a list of tensors under one handle; synchronize()
    returns the list of results."""
    set_id = _set_id(process_set, "grouped_reducescatter_async")
    base = _name("grouped_reducescatter", name, set_id)
    handles, finishes = [], []
    for i, t in enumerate(tensors):
        h, f = _reducescatter_submit(t, "%s.%d" % (base, i), op, set_id, prescale_factor,
                                     postscale_factor, "grouped_reducescatter")
        handles.append(h)
        finishes.append(f)
    return _register(handles, lambda hs: [f(h.output()) for f, h in zip(finishes, hs)])


class HorovodGroupedReducescatter(torch.autograd.Function):
    """Grouped reducescatter whose gradients are the grouped allgather of the
    gradients (scaled as HorovodReducescatter's)."""

    @staticmethod
    def forward(ctx, name, op, prescale_factor, postscale_factor, process_set, *tensors):
        ctx.op = op
        ctx.scale = prescale_factor * postscale_factor
        ctx.process_set = process_set
        return tuple(synchronize(grouped_reducescatter_async(
            list(tensors), name, op, process_set, prescale_factor, postscale_factor)))

    @staticmethod
    def backward(ctx, *grad_output):
        grads = [_reducescatter_grad(g, ctx.op, ctx.scale, ctx.process_set).contiguous()
                 for g in grad_output]
        gathered = synchronize(grouped_allgather_async(grads, process_set=ctx.process_set))
        return (None, None, None, None, None, *gathered)


def grouped_reducescatter(tensors, name=None, compression=Compression.none, op=Average,
                          process_set=global_process_set, prescale_factor=1.0,
                          postscale_factor=1.0):
    """Reducescatter of each tensor of a list (differentiable); the list of
    results."""
    pairs = [compression.compress(t) for t in tensors]
    outs = HorovodGroupedReducescatter.apply(name, op, prescale_factor, postscale_factor,
                                             process_set, *[c for c, _ in pairs])
    return [compression.decompress(o, ctx) for o, (_, ctx) in zip(outs, pairs)]


# ---- join, barrier ----------------------------------------------------------

def join(device=-1):
    """This rank has no more data: until every rank has joined, the others'
    allreduces go on with zeros from this rank (their other operations
    fail). Returns the last rank to join, the same on every rank."""
    _check_init()
    h = _eng.join()
    return synchronize(_register([h], lambda hs: hs[0].join_result()))


def barrier(process_set=global_process_set):
    """Returns once every rank of the set has called barrier()."""
    _check_init()
    set_id = _set_id(process_set, "barrier")
    h = _eng.barrier(set_id)
    synchronize(_register([h], lambda hs: None))
