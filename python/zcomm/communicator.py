"""The communicator: collectives and point to point on numpy arrays."""

import numpy as np

from . import _zcomm
from .arrays import Output, as_input, check_array, same_buffer, separate_input
from .cuda_arrays import CudaArray, is_cuda_array
from .dtypes import parse_op, zc_dtype
from .errors import DtypeError, Error, Status, invalid
from .request import Request

ANY_SOURCE = _zcomm.ANY_SOURCE


class Communicator:
    """A group of ranks (``zc_comm``).

    Make one with :func:`zcomm.init` (from zcrun's environment, PMIx, or a
    job of one), :meth:`from_unique_id`, :meth:`split` or :meth:`dup`.

    Buffers are numpy arrays of int8, uint8, int16, uint16, int32, uint32,
    int64, uint64, bool, float16, float32 or float64; bfloat16 as a uint16
    array with ``dtype="bfloat16"``. Reductions of bool arrays are logical
    (sum and max: or; prod and min: and; band, bor, bxor) and give 0 or 1. Arrays that are not C-contiguous (or not aligned,
    or not in native byte order) work too: they are copied in and out.
    Blocking calls release the GIL. Every failure raises
    :class:`zcomm.Error` naming the rank, the operation and the cause; no
    call waits longer than ``ZC_TIMEOUT`` seconds.

    One collective at a time per communicator (use :meth:`dup` for another
    thread); point-to-point calls may run beside it.
    """

    def __init__(self, handle):
        self._h = handle

    # ---- making communicators ------------------------------------------------

    @classmethod
    def init(cls):
        """A communicator from the environment (``zc_init``): zcrun's store
        (``ZC_STORE``), PMIx under mpirun/srun, or else a job of one rank."""
        return cls(_zcomm.CommHandle.init())

    @classmethod
    def from_unique_id(cls, uid, nranks, rank):
        """A communicator of `nranks` ranks from a unique id
        (``zc_comm_init_rank``). `uid` is the 128 bytes of
        :func:`zcomm.get_unique_id`, made on one of the ranks (it serves the
        rendezvous) and carried to the others by any means. Collective: each
        rank passes the same `nranks` and its own `rank`."""
        if not isinstance(uid, (bytes, bytearray, memoryview)):
            raise DtypeError(Status.INVALID_ARG,
                             f"rank {rank}: comm_init_rank: uid must be bytes, "
                             f"got {type(uid).__name__}")
        return cls(_zcomm.CommHandle.init_rank(bytes(uid), int(nranks), int(rank)))

    def split(self, color, key=0):
        """Sub-communicators, as MPI_Comm_split: ranks with the same `color`
        form one, ordered by `key`, then by rank. ``color=None`` takes no part
        and returns None. Collective over this communicator; the new one
        shares its connections."""
        c = _zcomm.SPLIT_NONE if color is None else int(color)
        h = self._h.split(c, int(key))
        return None if h is None else Communicator(h)

    def dup(self):
        """A duplicate: same ranks, its own collective state (so it may run
        collectives from another thread at the same time). Collective."""
        return Communicator(self._h.dup())

    def finalize(self):
        """Ends the communicator (collective: every rank finalizes). Waits for
        calls in flight on other threads; pending point-to-point requests fail
        with ``Status.ABORTED``. Calling it twice is harmless. A communicator
        that is garbage-collected unfinalized is finalized then."""
        self._h.finalize()

    def abort(self):
        """Makes pending and later operations fail with ``Status.ABORTED``,
        here and on the peers (which learn of it quickly)."""
        self._h.abort()

    def dump_trace(self, path=None):
        """Writes this communicator's flight recorder (its last operations,
        docs/debugging.md) as JSON to `path`; None: into ZC_TRACE_DIR, under the
        name the automatic dumps use. ``python3 -m zcomm.trace`` reads it."""
        self._h.dump_trace(path or "")

    # ---- fault tolerance (docs/elastic.md) -------------------------------------

    def revoke(self):
        """Revokes the communicator (``zc_comm_revoke``): every pending and
        later operation on it (and on every communicator sharing its
        connections) fails with ``Status.ABORTED`` on every rank, other
        threads included. Not collective; does not block."""
        self._h.revoke()

    @property
    def revoked(self):
        """True when operations fail at once: revoked, broken by a lost rank
        or an abort, or replaced by :meth:`shrink`."""
        return self._h.is_revoked()

    def failed_ranks(self):
        """The ranks this process knows to be lost (no communication)."""
        return list(self._h.failed_ranks())

    def agree(self, flag):
        """Fault-tolerant agreement of the live ranks (``zc_comm_agree``),
        also on a revoked communicator: returns ``(flag, failed)``, the
        bitwise AND of the ranks' `flag` values and the list of ranks agreed
        failed (empty when none), the same on every survivor. Collective over
        the live ranks."""
        f, failed = self._h.agree(int(flag))
        return f, list(failed)

    def shrink(self):
        """A communicator of the live ranks (``zc_comm_shrink``), in their
        order here, renumbered from 0, over the connections and memory they
        already have. Revokes this one (finalize it). Collective over the
        live ranks; a rank dying meanwhile is handled."""
        return Communicator(self._h.shrink())

    def join_pending(self):
        """How many processes wait to join this job (``zc_comm_join_pending``):
        not collective, asks only the job's store; ranks may see different
        counts at one moment, so agree before growing."""
        return self._h.join_pending()

    def grow(self):
        """A communicator of this one's ranks, in order, then the newcomers
        waiting (``zc_comm_grow``), from a fresh rendezvous. Collective over
        this communicator's ranks and the newcomers (they call
        :func:`zcomm.join`). This communicator stays usable until finalized.
        Broadcast the application's state to the newcomers next."""
        return Communicator(self._h.grow())

    @classmethod
    def join(cls):
        """In a process started to join a running job (:func:`zcomm.is_joiner`):
        waits until the job grows and returns the grown communicator
        (``zc_comm_join``)."""
        return cls(_zcomm.CommHandle.join())

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        # Leaving by an exception: abort first, so peers fail fast instead
        # of waiting in finalize's barrier for a rank that took another path.
        if exc_type is not None and not self._h.finalized:
            try:
                self._h.abort()
            except Error:
                pass
            try:
                self._h.finalize()
            except Error:
                # Refused while arrays from empty()/zeros() are still
                # referenced (the traceback holds them), or failing after
                # the abort: the exception that left the block is the one
                # to see. The aborted communicator is finalized, with no
                # barrier, once the last such array goes.
                pass
            return False
        self._h.finalize()
        return False

    # ---- properties -------------------------------------------------------------

    @property
    def rank(self):
        """This process's rank in the communicator."""
        return self._h.rank

    @property
    def size(self):
        """Number of ranks."""
        return self._h.size

    @property
    def local_rank(self):
        """Rank among the ranks on this host."""
        return self._h.local_rank

    @property
    def local_size(self):
        """Number of ranks on this host."""
        return self._h.local_size

    @property
    def finalized(self):
        return self._h.finalized

    def async_error(self):
        """None while healthy, else the :class:`zcomm.Error` that broke the
        communicator (a lost peer, an abort, a failed collective). Never
        blocks: for a watchdog thread."""
        status, message = self._h.async_error()
        return None if status == Status.OK else Error(status, message)

    def deregister(self, array):
        """Drops zcomm's cached registration of `array`'s memory
        (``zc_mem_deregister``). Call it before freeing an array that was
        sent point to point where the transport pins memory (RDMA); on shm
        and tcp it only trims the cache."""
        self._h.deregister(check_array(array, self.rank, "deregister", "array"))

    # ---- registered memory ----------------------------------------------------

    def empty(self, shape, dtype=np.float32):
        """A new array in the communicator's registered memory
        (``zc_mem_alloc``), uninitialized, like :func:`numpy.empty`.
        Collectives on such arrays take the zero-copy paths: on shared
        memory the allreduce reduces straight from every rank's input into
        every rank's output (docs/algorithms.md), where arrays from numpy's
        own allocator are copied through the peers' slots. The memory stays
        allocated while any array views it, and :meth:`finalize` refuses
        until none does. A zero-size array is a plain numpy one."""
        dt = np.dtype(dtype)
        if dt.hasobject:
            raise invalid(self.rank, "empty", f"dtype {dt} holds Python objects")
        shape = (int(shape),) if np.ndim(shape) == 0 else tuple(int(n) for n in shape)
        if any(n < 0 for n in shape):
            raise invalid(self.rank, "empty", f"negative dimension in {shape}")
        count = int(np.prod(shape, dtype=np.int64))
        if count == 0 or dt.itemsize == 0:
            return np.empty(shape, dtype=dt)
        memory = self._h.mem_alloc(count * dt.itemsize)
        return np.frombuffer(memory, dtype=dt, count=count).reshape(shape)

    def zeros(self, shape, dtype=np.float32):
        """:meth:`empty`, filled with zeros."""
        a = self.empty(shape, dtype)
        a.fill(0)
        return a

    def __repr__(self):
        state = "finalized" if self.finalized else f"rank {self.rank} of {self.size}"
        return f"<zcomm.Communicator {state}>"

    # ---- helpers --------------------------------------------------------------

    def _dtype(self, op, x, dtype, out=None):
        check_array(x, self.rank, op, "input")
        d = zc_dtype(x, dtype, self.rank, op)
        if out is not None:
            check_array(out, self.rank, op, "out")
            if out.dtype.newbyteorder("=") != x.dtype.newbyteorder("="):
                raise DtypeError(Status.INVALID_ARG,
                                 f"rank {self.rank}: {op}: out is {out.dtype}, "
                                 f"the input {x.dtype}")
        return int(d)

    def _root(self, op, root):
        if not isinstance(root, (int, np.integer)) or not 0 <= root < self.size:
            raise invalid(self.rank, op, f"root {root!r} is out of range [0, {self.size})")
        return int(root)

    def _check_size(self, op, out, n, what="out"):
        if out.size != n:
            raise invalid(self.rank, op, f"{what} has {out.size} elements, the call needs {n}")

    def _split_shape(self, op, x):
        """The shape of one rank's part of `x` (x.size divisible by size)."""
        if x.size % self.size:
            raise invalid(self.rank, op, f"the input's {x.size} elements do not divide "
                          f"into {self.size} ranks")
        if x.ndim >= 1 and x.shape[0] % self.size == 0:
            return (x.shape[0] // self.size,) + x.shape[1:]
        return (x.size // self.size,)

    def _inplace_or_out(self, op, x, out):
        """(input wire, Output) for calls with one input and one output of the
        same size; in place when out is None or the same array as x."""
        if out is None or same_buffer(x, out):
            o = Output(x, self.rank, op, "the array", copy_in=True)
            return o.wire, o
        self._check_size(op, out, x.size)
        o = Output(out, self.rank, op, "out")
        return separate_input(x, o.wire), o

    @staticmethod
    def _counts(op, rank, values, what):
        try:
            c = [int(v) for v in values]
        except (TypeError, ValueError):
            raise invalid(rank, op, f"{what} must be a sequence of integers") from None
        if any(v < 0 for v in c):
            raise invalid(rank, op, f"{what} has a negative entry: {c}")
        return c

    def _displs(self, op, counts, displs, what):
        if displs is None:
            return list(np.cumsum([0] + counts[:-1], dtype=np.int64).tolist())
        return self._counts(op, self.rank, displs, what)

    # ---- collectives ----------------------------------------------------------

    # ---- objects with __cuda_array_interface__ (zcomm/cuda_arrays.py) --------

    def _cuda(self, op, x, out, dtype, n_out):
        """x and out as CudaArrays (out: x when None), their zc_dtype, the stream."""
        cx = CudaArray(x, self.rank, op, "input")
        co = cx if out is None else CudaArray(out, self.rank, op, "out")
        if co.readonly:
            raise invalid(self.rank, op, "out is read-only")
        if co.dtype.newbyteorder("=") != cx.dtype.newbyteorder("="):
            raise invalid(self.rank, op, f"out is {co.dtype}, the input {cx.dtype}")
        if co.size != n_out(cx.size):
            raise invalid(self.rank, op, f"out has {co.size} elements, the call needs {n_out(cx.size)}")
        return cx, co, int(zc_dtype(cx, dtype, self.rank, op)), cx.stream

    def _cuda_allreduce(self, op_name, x, out, op, dtype):
        cx, co, d, stream = self._cuda(op_name, x, out, dtype, lambda n: n)
        o_ = parse_op(op, self.rank, op_name)
        h = self._h.allreduce_on_stream(cx.ptr, co.ptr, cx.size, d, int(o_), stream, (x, co.obj))
        return Request(h, co.obj, None)

    def _cuda_broadcast(self, op_name, x, root, dtype):
        cx, _, d, stream = self._cuda(op_name, x, None, dtype, lambda n: n)
        root = self._root(op_name, root)
        return Request(self._h.broadcast_on_stream(cx.ptr, cx.size, d, root, stream, x), x, None)

    def _cuda_allgather(self, op_name, x, out, dtype):
        if out is None:
            raise invalid(self.rank, op_name, "out is required for a __cuda_array_interface__ input")
        cx, co, d, stream = self._cuda(op_name, x, out, dtype, lambda n: n * self.size)
        return Request(self._h.allgather_on_stream(cx.ptr, co.ptr, cx.size, d, stream, (x, out)), out, None)

    # ---- collectives ----------------------------------------------------------

    def allreduce(self, x, out=None, op="sum", dtype=None):
        """Reduces `x` over all ranks with `op` ("sum", "prod", "min", "max",
        "avg", "band", "bor", "bxor" or a :class:`zcomm.Op`). In place when
        `out` is omitted or is `x`. Returns the result array.

        `x` (and `out`) may be objects with ``__cuda_array_interface__``:
        the call is stream-ordered on the interface's stream (see
        :mod:`zcomm.cuda_arrays`); it returns once its host part is done.
        The same holds for :meth:`broadcast` and :meth:`allgather` (whose
        `out` must then be given) and their nonblocking variants."""
        if is_cuda_array(x):
            return self._cuda_allreduce("allreduce", x, out, op, dtype).wait()
        d = self._dtype("allreduce", x, dtype, out)
        o_ = parse_op(op, self.rank, "allreduce")
        send, o = self._inplace_or_out("allreduce", x, out)
        self._h.allreduce(send, o.wire, x.size, d, int(o_))
        return o.finish()

    def iallreduce(self, x, out=None, op="sum", dtype=None):
        """Nonblocking :meth:`allreduce`; ``wait()`` returns the result."""
        if is_cuda_array(x):
            return self._cuda_allreduce("iallreduce", x, out, op, dtype)
        d = self._dtype("iallreduce", x, dtype, out)
        o_ = parse_op(op, self.rank, "iallreduce")
        send, o = self._inplace_or_out("iallreduce", x, out)
        return Request(self._h.iallreduce(send, o.wire, x.size, d, int(o_)), o.user, o.finish)

    def broadcast(self, x, root=0, dtype=None):
        """Sends root's `x` into every rank's `x` (same size everywhere), in
        place. Returns `x`."""
        if is_cuda_array(x):
            return self._cuda_broadcast("broadcast", x, root, dtype).wait()
        d = self._dtype("broadcast", x, dtype)
        root = self._root("broadcast", root)
        o = Output(x, self.rank, "broadcast", "the array", copy_in=self.rank == root)
        self._h.broadcast(o.wire, x.size, d, root)
        return o.finish()

    def ibroadcast(self, x, root=0, dtype=None):
        """Nonblocking :meth:`broadcast`; ``wait()`` returns `x`."""
        if is_cuda_array(x):
            return self._cuda_broadcast("ibroadcast", x, root, dtype)
        d = self._dtype("ibroadcast", x, dtype)
        root = self._root("ibroadcast", root)
        o = Output(x, self.rank, "ibroadcast", "the array", copy_in=self.rank == root)
        return Request(self._h.ibroadcast(o.wire, x.size, d, root), o.user, o.finish)

    def _reduce_args(self, op, x, out, rop, root, dtype):
        d = self._dtype(op, x, dtype, out)
        r = parse_op(rop, self.rank, op)
        root = self._root(op, root)
        if self.rank != root:
            return as_input(x), None, d, r, root
        if out is None:
            out = np.empty_like(x, dtype=x.dtype)
        send, o = self._inplace_or_out(op, x, out)
        return send, o, d, r, root

    def reduce(self, x, out=None, op="sum", root=0, dtype=None):
        """Reduces `x` over all ranks into `out` at `root` (a new array shaped
        like `x` when omitted; `x` itself for in place). Returns the result at
        root, None elsewhere (where `out` is ignored)."""
        send, o, d, r, root = self._reduce_args("reduce", x, out, op, root, dtype)
        self._h.reduce(send, None if o is None else o.wire, x.size, d, int(r), root)
        return None if o is None else o.finish()

    def ireduce(self, x, out=None, op="sum", root=0, dtype=None):
        """Nonblocking :meth:`reduce`; ``wait()`` returns the result at root."""
        send, o, d, r, root = self._reduce_args("ireduce", x, out, op, root, dtype)
        h = self._h.ireduce(send, None if o is None else o.wire, x.size, d, int(r), root)
        return Request(h, None, None) if o is None else Request(h, o.user, o.finish)

    def _gathered(self, op, x, out, n):
        """Output of size n elements shaped (size,) + x.shape by default."""
        if out is None:
            out = np.empty((self.size,) + x.shape, dtype=x.dtype)
        self._check_size(op, out, n)
        o = Output(out, self.rank, op, "out")
        return separate_input(x, o.wire), o

    def allgather(self, x, out=None, dtype=None):
        """Every rank's `x` (same size everywhere), in rank order: `out` has
        shape ``(size,) + x.shape`` by default (any shape of that many
        elements may be passed). Returns `out`."""
        if is_cuda_array(x):
            return self._cuda_allgather("allgather", x, out, dtype).wait()
        d = self._dtype("allgather", x, dtype, out)
        send, o = self._gathered("allgather", x, out, x.size * self.size)
        self._h.allgather(send, o.wire, x.size, d)
        return o.finish()

    def iallgather(self, x, out=None, dtype=None):
        """Nonblocking :meth:`allgather`."""
        if is_cuda_array(x):
            return self._cuda_allgather("iallgather", x, out, dtype)
        d = self._dtype("iallgather", x, dtype, out)
        send, o = self._gathered("iallgather", x, out, x.size * self.size)
        return Request(self._h.iallgather(send, o.wire, x.size, d), o.user, o.finish)

    def _parted(self, op, x, out):
        """Output holding one rank's part of x."""
        shape = self._split_shape(op, x)
        if out is None:
            out = np.empty(shape, dtype=x.dtype)
        self._check_size(op, out, x.size // self.size)
        o = Output(out, self.rank, op, "out")
        return separate_input(x, o.wire), o

    def reduce_scatter(self, x, out=None, op="sum", dtype=None):
        """Reduces `x` (size x n elements) over all ranks; rank r gets part r
        (n elements: ``x.shape[0] // size`` rows when the first dimension
        divides, else a flat array). Returns `out`."""
        d = self._dtype("reduce_scatter", x, dtype, out)
        r = parse_op(op, self.rank, "reduce_scatter")
        send, o = self._parted("reduce_scatter", x, out)
        self._h.reduce_scatter(send, o.wire, o.wire.size, d, int(r))
        return o.finish()

    def ireduce_scatter(self, x, out=None, op="sum", dtype=None):
        """Nonblocking :meth:`reduce_scatter`."""
        d = self._dtype("ireduce_scatter", x, dtype, out)
        r = parse_op(op, self.rank, "ireduce_scatter")
        send, o = self._parted("ireduce_scatter", x, out)
        h = self._h.ireduce_scatter(send, o.wire, o.wire.size, d, int(r))
        return Request(h, o.user, o.finish)

    def _alltoall_args(self, op, x, out, dtype):
        d = self._dtype(op, x, dtype, out)
        self._split_shape(op, x)
        if out is None:
            out = np.empty_like(x, dtype=x.dtype)
        self._check_size(op, out, x.size)
        o = Output(out, self.rank, op, "out")
        return separate_input(x, o.wire), o, d, x.size // self.size

    def alltoall(self, x, out=None, dtype=None):
        """Part p of `x` (size equal parts) goes to rank p; part p of `out`
        comes from rank p. `out` is shaped like `x` by default. Returns it."""
        send, o, d, n = self._alltoall_args("alltoall", x, out, dtype)
        self._h.alltoall(send, o.wire, n, d)
        return o.finish()

    def ialltoall(self, x, out=None, dtype=None):
        """Nonblocking :meth:`alltoall`."""
        send, o, d, n = self._alltoall_args("ialltoall", x, out, dtype)
        return Request(self._h.ialltoall(send, o.wire, n, d), o.user, o.finish)

    def barrier(self):
        """Returns once every rank has called it."""
        self._h.barrier()

    def ibarrier(self):
        """Nonblocking :meth:`barrier`."""
        return Request(self._h.ibarrier())

    def allgatherv(self, x, counts, out=None, displs=None, dtype=None):
        """Every rank's `x` of its own size: rank p contributes ``counts[p]``
        elements (``counts[rank] == x.size``), placed at ``displs[p]``
        (default: packed in rank order) of the flat `out`. Returns `out`."""
        op = "allgatherv"
        d = self._dtype(op, x, dtype, out)
        counts = self._counts(op, self.rank, counts, "counts")
        displs = self._displs(op, counts, displs, "displs")
        n = max([a + b for a, b in zip(counts, displs) if a] + [0])
        if out is None:
            out = np.empty(n, dtype=x.dtype)
        o = Output(out, self.rank, op, "out", copy_in=True)
        self._h.allgatherv(separate_input(x, o.wire), x.size, o.wire, counts, displs, d)
        return o.finish()

    def alltoallv(self, x, sendcounts, recvcounts, out=None, sdispls=None, rdispls=None,
                  dtype=None):
        """Rank r sends ``sendcounts[p]`` elements at ``sdispls[p]`` of the
        flat `x` to each rank p and receives ``recvcounts[p]`` elements from
        it at ``rdispls[p]`` of `out` (displacements default to packed in
        rank order). Returns `out` (flat by default)."""
        op = "alltoallv"
        d = self._dtype(op, x, dtype, out)
        sc = self._counts(op, self.rank, sendcounts, "sendcounts")
        rc = self._counts(op, self.rank, recvcounts, "recvcounts")
        sd = self._displs(op, sc, sdispls, "sdispls")
        rd = self._displs(op, rc, rdispls, "rdispls")
        if out is None:
            out = np.empty(max([a + b for a, b in zip(rc, rd) if a] + [0]), dtype=x.dtype)
        o = Output(out, self.rank, op, "out", copy_in=True)
        self._h.alltoallv(separate_input(x, o.wire), sc, sd, o.wire, rc, rd, d)
        return o.finish()

    def gather(self, x, out=None, root=0, dtype=None):
        """Every rank's `x` (same size) at `root`, in rank order, shaped
        ``(size,) + x.shape`` by default. Returns it at root, None
        elsewhere (where `out` is ignored)."""
        op = "gather"
        d = self._dtype(op, x, dtype, out)
        root = self._root(op, root)
        if self.rank != root:
            self._h.gather(as_input(x), None, x.size, d, root)
            return None
        send, o = self._gathered(op, x, out, x.size * self.size)
        self._h.gather(send, o.wire, x.size, d, root)
        return o.finish()

    def scatter(self, x, out=None, root=0, dtype=None):
        """Part r of root's `x` (size equal parts) into rank r's `out`.
        Elsewhere `x` is ignored but may serve as the template of `out`
        (shaped as one part of it); pass `x=None` with an `out` instead.
        Returns `out`."""
        op = "scatter"
        root = self._root(op, root)
        if x is None:
            if out is None or self.rank == root:
                raise invalid(self.rank, op, "the input is None (needed at the root, and "
                              "elsewhere when out is omitted)")
            d = self._dtype(op, out, dtype)
            n = out.size
        else:
            d = self._dtype(op, x, dtype, out)
            shape = self._split_shape(op, x)
            n = x.size // self.size
            if out is None:
                out = np.empty(shape, dtype=x.dtype)
            self._check_size(op, out, n)
        o = Output(out, self.rank, op, "out")
        send = separate_input(x, o.wire) if self.rank == root else None
        self._h.scatter(send, o.wire, n, d, root)
        return o.finish()

    # ---- point to point -----------------------------------------------------

    def _p2p(self, op, x, peer, tag, dtype):
        check_array(x, self.rank, op, "the array")
        zc_dtype(x, dtype, self.rank, op)  # the same types as collectives
        if not isinstance(peer, (int, np.integer)) or not isinstance(tag, (int, np.integer)):
            raise invalid(self.rank, op, f"peer and tag must be integers, got {peer!r}, {tag!r}")
        return int(peer), int(tag)

    def send(self, x, peer, tag=0, dtype=None):
        """Sends `x` to `peer`; its recv must pass an array of the same number
        of bytes (else both fail with ``Status.MISMATCH``, the sender only
        for messages above the eager limit)."""
        peer, tag = self._p2p("send", x, peer, tag, dtype)
        self._h.send(as_input(x), peer, tag)

    def recv(self, out, peer, tag=0, dtype=None):
        """Receives from `peer` into `out` (which gives the expected size).
        `peer` may be :data:`zcomm.ANY_SOURCE`: the next message with `tag`
        from any rank (:meth:`recv_source` also says which). Returns `out`."""
        return self.recv_source(out, peer, tag, dtype)[0]

    def recv_source(self, out, peer=ANY_SOURCE, tag=0, dtype=None):
        """:meth:`recv` that also returns the sender: ``(out, source)``.
        Among one sender's messages with one tag the earliest comes first;
        across senders there is no order (docs/python.md)."""
        peer, tag = self._p2p("recv", out, peer, tag, dtype)
        o = Output(out, self.rank, "recv", "out")
        source = self._h.recv(o.wire, peer, tag)
        return o.finish(), source

    def isend(self, x, peer, tag=0, dtype=None):
        """Nonblocking :meth:`send`. Many may be in flight; messages of one
        (peer, tag) match in the order posted."""
        peer, tag = self._p2p("isend", x, peer, tag, dtype)
        return Request(self._h.isend(as_input(x), peer, tag))

    def irecv(self, out, peer, tag=0, dtype=None):
        """Nonblocking :meth:`recv` (`peer` may be :data:`zcomm.ANY_SOURCE`);
        ``wait()`` returns `out`, and the request's ``source`` then names the
        sender."""
        peer, tag = self._p2p("irecv", out, peer, tag, dtype)
        o = Output(out, self.rank, "irecv", "out")
        return Request(self._h.irecv(o.wire, peer, tag), o.user, o.finish)


def init():
    """:meth:`Communicator.init`: a communicator from the environment."""
    return Communicator.init()


def is_joiner():
    """True when this process was started to join a running job (by
    ``zcrun --elastic``, or ``ZC_JOIN=1`` with the job's store in the
    environment); then call :func:`join` instead of :func:`init`."""
    return _zcomm.is_joiner()


def join():
    """:meth:`Communicator.join`: in a joiner, the grown communicator."""
    return Communicator.join()
