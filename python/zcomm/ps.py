"""The parameter server (``zc_ps_*``, docs/ps.md) on numpy arrays.

    import numpy as np, zcomm
    with zcomm.init() as comm:
        role = "server" if comm.rank == comm.size - 1 else "worker"
        with zcomm.ps.ParameterServer(comm, role=role, sgd_lr=0.1) as ps:
            if role == "server":
                ps.serve()                  # until every worker has freed
            else:
                ps.declare(1, (256, 10), "float32", init=weights)
                for grad in grads:
                    ps.push(1, grad)        # servers aggregate
                    weights = ps.pull(1)    # weights -= 0.1 * mean(pushes)
"""

import enum

import numpy as np

from . import _zcomm
from .arrays import Output, as_input, check_array
from .dtypes import Dtype, zc_dtype
from .errors import DtypeError, Error, Status, invalid
from .request import Request

__all__ = ["ParameterServer", "Role"]


class Role(enum.IntEnum):
    """zc_ps_role: what a rank does in the parameter server."""

    WORKER = _zcomm.PS_WORKER
    SERVER = _zcomm.PS_SERVER
    BOTH = _zcomm.PS_BOTH


# The numpy type each Dtype is held in (bfloat16: uint16 words).
_NUMPY = {Dtype.INT8: np.int8, Dtype.UINT8: np.uint8, Dtype.INT32: np.int32,
          Dtype.UINT32: np.uint32, Dtype.INT64: np.int64, Dtype.UINT64: np.uint64,
          Dtype.FLOAT16: np.float16, Dtype.BFLOAT16: np.uint16, Dtype.FLOAT32: np.float32,
          Dtype.FLOAT64: np.float64, Dtype.INT16: np.int16, Dtype.UINT16: np.uint16,
          Dtype.BOOL: np.bool_}


def _role(role, rank):
    if isinstance(role, Role):
        return role
    if isinstance(role, str):
        try:
            return Role[role.upper()]
        except KeyError:
            pass
    raise invalid(rank, "ps_create", f"unknown role {role!r} (one of 'worker', 'server', 'both')")


def _dtype(dtype, rank):
    """A Dtype from a Dtype, a name ("float32", "bfloat16") or a numpy dtype."""
    if isinstance(dtype, Dtype):
        return dtype
    if isinstance(dtype, str):
        try:
            return Dtype[dtype.upper()]
        except KeyError:
            pass
    try:
        dt = np.dtype(dtype)
    except TypeError:
        raise DtypeError(Status.INVALID_ARG,
                         f"rank {rank}: ps_declare: unknown dtype {dtype!r}") from None
    return zc_dtype(np.empty(0, dt), None, rank, "ps_declare")


def _shape(shape, rank, key):
    if isinstance(shape, (int, np.integer)) and not isinstance(shape, bool):
        shape = (int(shape),)
    try:
        shape = tuple(int(n) for n in shape)
    except (TypeError, ValueError):
        raise invalid(rank, "ps_declare", f"key {key}: shape must be a count or a tuple of "
                      f"counts, got {shape!r}") from None
    if any(n < 0 for n in shape):
        raise invalid(rank, "ps_declare", f"key {key}: negative size in shape {shape}")
    return shape


class _Key:
    __slots__ = ("shape", "dtype", "count")

    def __init__(self, shape, dtype):
        self.shape, self.dtype = shape, dtype
        self.count = int(np.prod(shape, dtype=np.int64)) if shape else 1


class ParameterServer:
    """Push/pull of named tensors ("keys") through server ranks
    (``zc_ps``; semantics in docs/ps.md).

    Collective over `comm`'s ranks: each rank passes its own `role`
    ("worker", "server" or "both": a server on threads of this process; at
    least one worker and one server overall) and the same `async_mode` and
    `sgd_lr` (else ``Status.MISMATCH``). ``sgd_lr=0`` keeps sums;
    ``sgd_lr > 0`` keeps values updated by ``value -= sgd_lr * mean(pushes)``
    (per push when asynchronous). It has its own context over `comm`'s
    connections, so `comm` stays usable beside it, but cannot be finalized
    before :meth:`free`.

    Workers declare the same keys in the same order, then push and pull
    arrays of the key's dtype and element count (any shape, any layout:
    arrays that are not C-contiguous are copied). Server-only ranks call
    :meth:`serve`. :meth:`free` (or leaving the ``with`` block) is
    collective. Blocking calls release the GIL; errors raise
    :class:`zcomm.Error`.
    """

    def __init__(self, comm, role="both", async_mode=False, sgd_lr=0.0):
        from .communicator import Communicator
        if not isinstance(comm, Communicator):
            raise invalid(-1, "ps_create", f"comm must be a zcomm.Communicator, "
                          f"got {type(comm).__name__}")
        rank = comm.rank
        self._role = _role(role, rank)
        if not isinstance(sgd_lr, (int, float, np.floating, np.integer)) or isinstance(sgd_lr, bool):
            raise invalid(rank, "ps_create", f"sgd_lr must be a number, got {sgd_lr!r}")
        self._async = bool(async_mode)
        self._lr = float(sgd_lr)
        self._keys = {}
        self._h = _zcomm.PsHandle.create(comm._h, int(self._role), int(self._async), self._lr)

    # ---- properties -------------------------------------------------------------

    @property
    def rank(self):
        return self._h.rank

    @property
    def role(self):
        """This rank's :class:`Role`."""
        return self._role

    @property
    def num_workers(self):
        """Ranks with the worker role (worker or both)."""
        return self._h.num_workers

    @property
    def num_servers(self):
        """Ranks with the server role (server or both)."""
        return self._h.num_servers

    @property
    def async_mode(self):
        return self._async

    @property
    def sgd_lr(self):
        return self._lr

    @property
    def freed(self):
        return self._h.freed

    def keys(self):
        """{key: (shape, Dtype)} of the keys declared here."""
        return {k: (v.shape, v.dtype) for k, v in self._keys.items()}

    # ---- keys -------------------------------------------------------------------

    def _key(self, key, op):
        if not isinstance(key, (int, np.integer)) or isinstance(key, bool) \
                or not 0 <= int(key) < 1 << 64:
            raise invalid(self.rank, op, f"key must be an integer in [0, 2**64), got {key!r}")
        return int(key)

    def _declared(self, key, op):
        k = self._key(key, op)
        info = self._keys.get(k)
        if info is None:
            if self._role == Role.SERVER:
                raise invalid(self.rank, op, "this rank is not a worker "
                              "(role 'server': it calls serve())")
            raise invalid(self.rank, op, f"key {k} is not declared")
        return k, info

    def _check(self, op, key, info, a, what):
        check_array(a, self.rank, op, what)
        try:
            zc_dtype(a, info.dtype, self.rank, op)
        except DtypeError:
            raise DtypeError(Status.INVALID_ARG,
                             f"rank {self.rank}: {op}: key {key} holds "
                             f"{info.dtype.name.lower()}, {what} is {a.dtype}") from None
        if a.size != info.count:
            raise invalid(self.rank, op, f"key {key} holds {info.count} elements "
                          f"(shape {info.shape}), {what} has {a.size} (shape {a.shape})")

    def declare(self, key, shape, dtype=None, init=None):
        """Declares `key`: `shape` (an element count or a tuple) of `dtype`
        (a name such as "float32" or "bfloat16", a :class:`zcomm.Dtype`, or a
        numpy dtype; may be left out when `init` is given). `init` is the
        starting value (used from the first worker only; zeros when None).
        Workers only; every worker declares the same keys in the same order,
        and the call waits until all have (``Status.MISMATCH`` on every
        worker when they disagree)."""
        op = "ps_declare"
        k = self._key(key, op)
        shape = _shape(shape, self.rank, k)
        if dtype is None:
            if init is None:
                raise invalid(self.rank, op, f"key {k}: give dtype (or init)")
            check_array(init, self.rank, op, "init")
            d = zc_dtype(init, None, self.rank, op)
        else:
            d = _dtype(dtype, self.rank)
        info = _Key(shape, d)
        wire = None
        if init is not None:
            self._check(op, k, info, init, "init")
            wire = as_input(init)
        self._h.declare(k, info.count, int(d), wire)
        self._keys[k] = info

    # ---- push and pull ----------------------------------------------------------

    def push(self, key, x):
        """Pushes `x` (the key's dtype and element count) to the servers.
        Synchronous: once per round, before the round's pull. `x` may be
        reused as soon as it returns."""
        k, info = self._declared(key, "ps_push")
        self._check("ps_push", k, info, x, "the array")
        self._h.push(k, as_input(x))

    def pull(self, key, out=None):
        """The key's value: the round's sum (or SGD value) in synchronous
        mode, the current value in asynchronous mode. Written into `out`
        (the key's dtype and element count) when given, else into a new
        array of the declared shape; returns that array."""
        k, info = self._declared(key, "ps_pull")
        o = self._output(k, info, out, "ps_pull")
        self._h.pull(k, o.wire)
        return o.finish()

    def ipush(self, key, x):
        """Nonblocking push: a :class:`zcomm.Request` (keeps `x` alive; do not
        change `x` before it is complete). Runs in call order with the other
        pushes and pulls."""
        k, info = self._declared(key, "ps_ipush")
        self._check("ps_ipush", k, info, x, "the array")
        return Request(self._h.ipush(k, as_input(x)))

    def ipull(self, key, out=None):
        """Nonblocking pull: a :class:`zcomm.Request` whose ``wait()``
        returns the array (`out`, or a new one of the declared shape)."""
        k, info = self._declared(key, "ps_ipull")
        o = self._output(k, info, out, "ps_ipull")
        return Request(self._h.ipull(k, o.wire), o.user, o.finish)

    def _output(self, k, info, out, op):
        if out is None:
            out = np.empty(info.shape, _NUMPY[info.dtype])
        else:
            self._check(op, k, info, out, "out")
        return Output(out, self.rank, op, "out")

    # ---- servers and the end ----------------------------------------------------

    def serve(self):
        """Server-only ranks: serves until every worker has freed its
        parameter server (then call :meth:`free`); raises the error that
        ended the service (a lost member). It has no deadline: it lasts as
        long as the training."""
        if self._role != Role.SERVER:
            raise invalid(self.rank, "ps_serve", f"only role 'server' serves (this rank is "
                          f"'{self._role.name.lower()}': its server runs on its own threads)")
        self._h.serve()

    def free(self):
        """Ends the parameter server (collective over the communicator's
        ranks): waits for this rank's pending requests (their errors stay
        theirs), then workers say goodbye and servers serve until every
        worker has. Calling it twice is harmless."""
        self._h.free()

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        try:
            self._h.free()
        except Error:
            if exc_type is None:
                raise
        return False

    def __repr__(self):
        if self.freed:
            return "<zcomm.ps.ParameterServer freed>"
        mode = "async" if self._async else "sync"
        what = f"sgd lr={self._lr}" if self._lr > 0 else "sums"
        return (f"<zcomm.ps.ParameterServer rank {self.rank} {self._role.name.lower()}, "
                f"{self.num_workers} workers, {self.num_servers} servers, {mode}, {what}>")
