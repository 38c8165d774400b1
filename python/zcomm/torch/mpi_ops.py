"""Horovod's torch operations (horovod/torch/mpi_ops.py) on zcomm's engine.

Every operation is named and asynchronous underneath: the *_async forms
return an integer handle for poll() and synchronize(); the others wait.
The engine (include/zcomm/zcomm_engine.h) negotiates names across ranks,
fuses small allreduces and reports mismatches, stalls and lost peers on
every rank. See docs/horovod.md.
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

_OP_NAMES = {Average: "Average", Sum: "Sum", Adasum: "Adasum", Min: "Min", Max: "Max",
             Product: "Product"}
_ZC_OPS = {Average: _eng.AVG, Sum: _eng.SUM, Min: _eng.MIN, Max: _eng.MAX, Product: _eng.PROD}


class ProcessSet:
    """Only the global process set (every rank) exists in zcomm.torch."""

    def __init__(self, ranks=None):
        self.ranks = ranks
        self.process_set_id = 0

    def __repr__(self):
        return "ProcessSet(global)"


global_process_set = ProcessSet()

_lock = threading.Lock()
_handle_map = {}
_next_handle = 0
_noname = {}
_atexit_registered = False


# ---- setup ----------------------------------------------------------------

def init(comm=None, process_sets=None):
    """Makes the communicator from the environment (zcrun, PMIx under mpirun,
    or a single process) and starts the engine. Collective; idempotent."""
    global _atexit_registered
    if comm is not None:
        raise ValueError("zcomm.torch.init: comm= (an MPI communicator or a list of ranks) is "
                         "not supported; zcomm takes every rank of the job from the environment")
    if process_sets not in (None, [], ()):
        raise ValueError("zcomm.torch.init: process sets are not supported")
    _eng.init()
    if not _atexit_registered:
        atexit.register(shutdown)
        _atexit_registered = True


def shutdown():
    """Stops the engine on every rank (pending operations fail) and frees
    the communicator."""
    with _lock:
        _handle_map.clear()
        _noname.clear()
    _eng.shutdown()


def is_initialized():
    return _eng.is_initialized()


def _check_init():
    if not _eng.is_initialized():
        raise ValueError("zcomm.torch (Horovod API) has not been initialized; use hvd.init().")


def size():
    _check_init()
    return _eng.size()


def local_size():
    _check_init()
    return _eng.local_size()


def cross_size():
    _check_init()
    return _eng.cross_size()


def rank():
    _check_init()
    return _eng.rank()


def local_rank():
    _check_init()
    return _eng.local_rank()


def cross_rank():
    _check_init()
    return _eng.cross_rank()


def is_homogeneous():
    _check_init()
    return _eng.size() % _eng.local_size() == 0


def engine_stats():
    """zc_engine_get_stats: cycles, negotiation_collectives, cache_hits, ...
    (a zcomm extension, for benchmarks and tests)."""
    _check_init()
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


def _name(kind, name):
    if name is None:
        with _lock:
            n = _noname.get(kind, 0)
            _noname[kind] = n + 1
        return "%s.noname.%d" % (kind, n)
    return "%s.%s" % (kind, name)


def _check_process_set(process_set, what):
    if process_set is not None and process_set is not global_process_set:
        raise ValueError("zcomm.torch: %s: process sets other than the global one are not "
                         "supported" % what)


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
        raise ValueError("zcomm.torch: %s: sparse tensors are not supported" % what)


# ---- allreduce --------------------------------------------------------------

def _resolve_op(op, average, what):
    if op is not None and average is not None:
        raise ValueError("zcomm.torch: %s: give op= or the deprecated average=, not both" % what)
    if op is None:
        op = Sum if average is False else Average
    if op == Adasum:
        raise ValueError("zcomm.torch: %s: op=Adasum is not supported by zcomm; use Average or Sum"
                         % what)
    if op not in _ZC_OPS:
        raise ValueError("zcomm.torch: %s: unknown op %r (Average, Sum, Min, Max, Product)"
                         % (what, op))
    return op


def _allreduce_submit(tensor, output, name, op, prescale_factor, postscale_factor, what):
    """Submits tensor -> output (output may be tensor); returns (engine
    handle, finish step that returns output)."""
    _check_init()
    _check_cpu(tensor, what)
    zc_op = _ZC_OPS[op]
    post = None
    if not tensor.dtype.is_floating_point:
        if op == Average:
            zc_op = _eng.SUM
            n = _eng.size()
            post = lambda t: t.copy_(torch.div(t, n, rounding_mode="trunc"))  # noqa: E731
    src = tensor if tensor.is_contiguous() else tensor.contiguous()
    if output is tensor:
        dst = src
    else:
        dst = output if output.is_contiguous() else _contiguous_out(output)
    h = _eng.allreduce(src, dst, name, zc_op, float(prescale_factor), float(postscale_factor))

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
    _check_process_set(process_set, "allreduce_async")
    op = _resolve_op(op, average, "allreduce_async")
    output = _contiguous_out(tensor)
    h, finish = _allreduce_submit(tensor, output, _name("allreduce", name), op, prescale_factor,
                                  postscale_factor, "allreduce")
    return _register([h], lambda hs: finish(hs))


def allreduce_async_(tensor, average=None, name=None, op=None, prescale_factor=1.0,
                     postscale_factor=1.0, process_set=global_process_set):
    """Asynchronous in-place allreduce; returns a handle."""
    _check_process_set(process_set, "allreduce_async_")
    op = _resolve_op(op, average, "allreduce_async_")
    h, finish = _allreduce_submit(tensor, tensor, _name("allreduce", name), op, prescale_factor,
                                  postscale_factor, "allreduce")
    return _register([h], lambda hs: finish(hs))


class HorovodAllreduce(torch.autograd.Function):
    """Allreduce whose gradient is the allreduce of the gradient."""

    @staticmethod
    def forward(ctx, tensor, name, op, prescale_factor, postscale_factor):
        ctx.op = op
        ctx.prescale_factor = prescale_factor
        ctx.postscale_factor = postscale_factor
        return synchronize(allreduce_async(tensor, name=name, op=op,
                                           prescale_factor=prescale_factor,
                                           postscale_factor=postscale_factor))

    @staticmethod
    def backward(ctx, grad_output):
        return (allreduce(grad_output, op=ctx.op, prescale_factor=ctx.prescale_factor,
                          postscale_factor=ctx.postscale_factor), None, None, None, None)


def allreduce(tensor, average=None, name=None, compression=Compression.none, op=None,
              prescale_factor=1.0, postscale_factor=1.0, process_set=global_process_set):
    """Allreduce into a new tensor (differentiable)."""
    _check_process_set(process_set, "allreduce")
    op = _resolve_op(op, average, "allreduce")
    compressed, ctx = compression.compress(tensor)
    summed = HorovodAllreduce.apply(compressed, name, op, prescale_factor, postscale_factor)
    return compression.decompress(summed, ctx)


def allreduce_(tensor, average=None, name=None, op=None, prescale_factor=1.0,
               postscale_factor=1.0, process_set=global_process_set):
    """In-place allreduce; returns tensor."""
    return synchronize(allreduce_async_(tensor, average, name, op, prescale_factor,
                                        postscale_factor, process_set))


def _grouped(tensors, average, name, op, prescale_factor, postscale_factor, inplace, what):
    op = _resolve_op(op, average, what)
    base = _name("grouped_allreduce", name)
    handles, finishes = [], []
    for i, t in enumerate(tensors):
        out = t if inplace else _contiguous_out(t)
        h, f = _allreduce_submit(t, out, "%s.%d" % (base, i), op, prescale_factor,
                                 postscale_factor, "grouped_allreduce")
        handles.append(h)
        finishes.append(f)
    return _register(handles, lambda hs: [f(None) for f in finishes])


def grouped_allreduce_async(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                            postscale_factor=1.0, process_set=global_process_set):
    """Allreduces of a list of tensors under one handle (fused by the engine);
    synchronize() returns the list of results."""
    _check_process_set(process_set, "grouped_allreduce_async")
    return _grouped(tensors, average, name, op, prescale_factor, postscale_factor, False,
                    "grouped_allreduce_async")


def grouped_allreduce_async_(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                             postscale_factor=1.0, process_set=global_process_set):
    _check_process_set(process_set, "grouped_allreduce_async_")
    return _grouped(tensors, average, name, op, prescale_factor, postscale_factor, True,
                    "grouped_allreduce_async_")


def grouped_allreduce(tensors, average=None, name=None, compression=Compression.none, op=None,
                      prescale_factor=1.0, postscale_factor=1.0, process_set=global_process_set):
    _check_process_set(process_set, "grouped_allreduce")
    pairs = [compression.compress(t) for t in tensors]
    outs = synchronize(grouped_allreduce_async([c for c, _ in pairs], average, name, op,
                                               prescale_factor, postscale_factor))
    return [compression.decompress(o, ctx) for o, (_, ctx) in zip(outs, pairs)]


def grouped_allreduce_(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                       postscale_factor=1.0, process_set=global_process_set):
    return synchronize(grouped_allreduce_async_(tensors, average, name, op, prescale_factor,
                                                postscale_factor, process_set))


# ---- allgather --------------------------------------------------------------

def allgather_async(tensor, name=None, process_set=global_process_set):
    """Concatenation of every rank's tensor along the first dimension (which
    may differ by rank); returns a handle."""
    _check_init()
    _check_process_set(process_set, "allgather_async")
    _check_cpu(tensor, "allgather")
    t = tensor if tensor.dim() > 0 else tensor.reshape(1)
    src = t.contiguous()
    h = _eng.allgather(src, _name("allgather", name))
    return _register([h], lambda hs: hs[0].output())


class HorovodAllgather(torch.autograd.Function):

    @staticmethod
    def forward(ctx, tensor, name):
        ctx.dim = tensor.shape[0] if tensor.dim() > 0 else 1
        return synchronize(allgather_async(tensor, name))

    @staticmethod
    def backward(ctx, grad_output):
        grad_reduced = allreduce(grad_output, op=Sum)
        dims = synchronize(allgather_async(torch.tensor([ctx.dim], dtype=torch.int64)))
        offset = int(dims[:rank()].sum().item())
        return grad_reduced.narrow(0, offset, ctx.dim), None


def allgather(tensor, name=None, process_set=global_process_set):
    """Concatenation of every rank's tensor along the first dimension
    (differentiable)."""
    _check_process_set(process_set, "allgather")
    return HorovodAllgather.apply(tensor, name)


# ---- broadcast --------------------------------------------------------------

def broadcast_async_(tensor, root_rank, name=None, process_set=global_process_set):
    """In-place broadcast from root_rank; returns a handle."""
    _check_init()
    _check_process_set(process_set, "broadcast_async_")
    _check_cpu(tensor, "broadcast")
    buf = tensor if tensor.is_contiguous() else tensor.contiguous()
    h = _eng.broadcast(buf, _name("broadcast", name), int(root_rank))

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

    @staticmethod
    def forward(ctx, tensor, root_rank, name):
        ctx.root_rank = root_rank
        return synchronize(broadcast_async(tensor, root_rank, name))

    @staticmethod
    def backward(ctx, grad_output):
        grad_reduced = allreduce(grad_output, op=Average)
        if rank() != ctx.root_rank:
            grad_reduced = grad_reduced * 0
        return grad_reduced, None, None


def broadcast(tensor, root_rank, name=None, process_set=global_process_set):
    """root_rank's tensor, in a new tensor (differentiable)."""
    _check_process_set(process_set, "broadcast")
    return HorovodBroadcast.apply(tensor, root_rank, name)


def broadcast_(tensor, root_rank, name=None, process_set=global_process_set):
    """In-place broadcast; returns tensor."""
    return synchronize(broadcast_async_(tensor, root_rank, name, process_set))


# ---- alltoall, reducescatter ------------------------------------------------

def alltoall_async(tensor, splits=None, name=None, process_set=global_process_set):
    """splits[r] rows of tensor to rank r (None: even); synchronize() returns
    (output, received_splits)."""
    _check_init()
    _check_process_set(process_set, "alltoall_async")
    _check_cpu(tensor, "alltoall")
    if splits is None:
        sp = []
    else:
        sp = [int(v) for v in (splits.tolist() if isinstance(splits, torch.Tensor) else splits)]
    h = _eng.alltoall(tensor.contiguous(), sp, _name("alltoall", name))
    return _register([h], lambda hs: (hs[0].output(),
                                      torch.tensor(hs[0].received_splits(), dtype=torch.int32)))


class HorovodAlltoall(torch.autograd.Function):

    @staticmethod
    def forward(ctx, tensor, splits, name):
        output, received = synchronize(alltoall_async(tensor, splits, name))
        ctx.received = received
        if splits is None:
            return output
        ctx.mark_non_differentiable(received)
        return output, received

    @staticmethod
    def backward(ctx, grad_output, *unused):
        grad, _ = synchronize(alltoall_async(grad_output.contiguous(), ctx.received))
        return grad, None, None


def alltoall(tensor, splits=None, name=None, process_set=global_process_set):
    """Scatters rows of tensor to every rank and gathers theirs: the output
    (and, when splits is given, the received splits, as Horovod)."""
    _check_process_set(process_set, "alltoall")
    return HorovodAlltoall.apply(tensor, splits, name)


def reducescatter_async(tensor, name=None, op=Average, process_set=global_process_set,
                        prescale_factor=1.0, postscale_factor=1.0):
    """Reduction over ranks, rank r keeping its part of the first dimension
    (the first dim0 % size ranks one row more); returns a handle."""
    _check_init()
    _check_process_set(process_set, "reducescatter_async")
    _check_cpu(tensor, "reducescatter")
    op = _resolve_op(op, None, "reducescatter")
    zc_op = _ZC_OPS[op]
    n = _eng.size()
    post = None
    if not tensor.dtype.is_floating_point and op == Average:
        zc_op = _eng.SUM
        post = lambda t: torch.div(t, n, rounding_mode="trunc")  # noqa: E731
    h = _eng.reducescatter(tensor.contiguous(), _name("reducescatter", name), zc_op,
                           float(prescale_factor), float(postscale_factor))

    def finish(hs):
        out = hs[0].output()
        return post(out) if post is not None else out
    return _register([h], finish)


class HorovodReducescatter(torch.autograd.Function):

    @staticmethod
    def forward(ctx, tensor, name, op, prescale_factor, postscale_factor):
        ctx.op = op
        ctx.scale = prescale_factor * postscale_factor
        return synchronize(reducescatter_async(tensor, name, op, None, prescale_factor,
                                               postscale_factor))

    @staticmethod
    def backward(ctx, grad_output):
        grad = synchronize(allgather_async(grad_output))
        if ctx.op == Average:
            grad = grad / size()
        if ctx.scale != 1.0:
            grad = grad * ctx.scale
        return grad, None, None, None, None


def reducescatter(tensor, name=None, compression=Compression.none, op=Average,
                  process_set=global_process_set, prescale_factor=1.0, postscale_factor=1.0):
    """Reducescatter into a new tensor (differentiable)."""
    _check_process_set(process_set, "reducescatter")
    compressed, ctx = compression.compress(tensor)
    out = HorovodReducescatter.apply(compressed, name, op, prescale_factor, postscale_factor)
    return compression.decompress(out, ctx)


# ---- join, barrier ----------------------------------------------------------

def join(device=-1):
    """This rank has no more data: until every rank has joined, the others'
    allreduces go on with zeros from this rank. Returns the last rank to
    join."""
    _check_init()
    h = _eng.join()
    return synchronize(_register([h], lambda hs: hs[0].join_result()))


def barrier(process_set=global_process_set):
    """Returns once every rank has called barrier()."""
    _check_init()
    _check_process_set(process_set, "barrier")
    h = _eng.barrier()
    synchronize(_register([h], lambda hs: None))
