"""Shared by the Python tests: skipping, per-dtype test data with exact
references, failure reporting, and ranks started with multiprocessing."""

import os
import sys

SKIP = 77


def need_numpy():
    try:
        import numpy  # noqa: F401
    except ImportError:
        print("SKIP: numpy is not installed for", sys.executable)
        sys.exit(SKIP)


need_numpy()
import numpy as np  # noqa: E402

# (name, numpy dtype, dtype= argument): bfloat16 travels as uint16 words.
DTYPES = [("int8", np.int8, None), ("uint8", np.uint8, None), ("int32", np.int32, None),
          ("uint32", np.uint32, None), ("int64", np.int64, None), ("uint64", np.uint64, None),
          ("float16", np.float16, None), ("bfloat16", np.uint16, "bfloat16"),
          ("float32", np.float32, None), ("float64", np.float64, None),
          ("int16", np.int16, None), ("uint16", np.uint16, None), ("bool", np.bool_, None)]
FLOATS = {"float16", "bfloat16", "float32", "float64"}
SIGNED = {"int8", "int16", "int32", "int64"}
INT_OPS = ["sum", "prod", "min", "max", "band", "bor", "bxor"]
FLOAT_OPS = ["sum", "prod", "min", "max", "avg"]


def encode(name, values):
    """int64 values (small for floats: exact in every float type) as an
    array of `name`."""
    if name == "bfloat16":
        f = values.astype(np.float32)
        return (f.view(np.uint32) >> 16).astype(np.uint16)
    return values.astype(dict((n, t) for n, t, _ in DTYPES)[name])


def decode(name, a):
    """float64 (floats) or the array itself (integers), for references."""
    if name == "bfloat16":
        return (a.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    return a.astype(np.float64) if name in FLOATS else a


def ident(name, n, rank, salt=0):
    """Data unique to (rank, index), exact in `name` (bool: a rank- and
    index-dependent mix of True and False)."""
    v = rank * 1009 + np.arange(n, dtype=np.int64) * 7 + salt
    if name in FLOATS:
        v = v % 251 - 125
    if name == "bool":
        v = v % 3 == 0
    return encode(name, v)


def operand(name, op, n, rank, salt=0):
    """Rank- and index-dependent input for `op` whose reduction over up to 5
    ranks is exact in `name` (no overflow, no rounding except avg)."""
    i = np.arange(n, dtype=np.int64)
    signed = name in SIGNED or name in FLOATS
    if name == "bool":
        # Mostly False for the "or" ops (sum, max, bor), mostly True for the
        # "and" ops (prod, min, band), half and half for bxor: results mix.
        h = (i * 7 + rank * 3 + salt) % 4
        return encode(name, h == 0 if op in ("sum", "max", "bor") else
                      h % 2 == 0 if op == "bxor" else h != 0)
    if op in ("sum", "avg"):
        v = (i * 7 + rank * 3 + salt) % 11 - (5 if signed else 0)
    elif op == "prod":
        v = (i + rank + salt) % 4 - 2 if signed else (i + rank + salt) % 2 + 1
    elif op in ("min", "max"):
        v = (i * 13 + rank * 5 + salt) % 23 - (11 if signed else 0)
    else:  # bitwise: every bit pattern, wrapped into the type
        u = i.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)  # wraps
        return encode(name, u + np.uint64((rank * 0x5851F42D4C957F2D + salt) % (1 << 64)))
    return encode(name, v)


def reduce_ref(name, op, parts, nranks):
    """The reduction of `parts` (one array per rank) as an array of `name`."""
    if op in ("band", "bor", "bxor"):
        f = {"band": np.bitwise_and, "bor": np.bitwise_or, "bxor": np.bitwise_xor}[op]
        return f.reduce(np.stack(parts), axis=0)
    d = np.stack([decode(name, p).astype(np.float64 if name in FLOATS else np.int64)
                  for p in parts])
    r = {"sum": d.sum(0), "avg": d.sum(0) / nranks if name in FLOATS else None,
         "prod": d.prod(0), "min": d.min(0), "max": d.max(0)}[op]
    if name in FLOATS:
        return encode(name, r) if op != "avg" else r
    return encode(name, r)


class Checker:
    """Counts checks; a failure names the rank and what differed."""

    def __init__(self, rank, label):
        self.rank, self.label, self.checks = rank, label, 0

    def fail(self, what):
        print(f"FAIL rank {self.rank} [{self.label}]: {what}", flush=True)
        sys.exit(1)

    def true(self, cond, what):
        self.checks += 1
        if not cond:
            self.fail(what)

    def equal(self, name, got, want, what, approx=False):
        """Exact, or (avg: `want` in float64) within the type's rounding."""
        self.checks += 1
        g, w = np.asarray(got).reshape(-1), np.asarray(want).reshape(-1)
        if approx:
            g, w = decode(name, g).astype(np.float64), w.astype(np.float64)
            tol = {"float16": 2e-3, "bfloat16": 1e-2, "float32": 1e-6, "float64": 1e-12}[name]
            ok = g.shape == w.shape and np.allclose(g, w, rtol=tol, atol=tol)
        else:
            ok = g.shape == w.shape and g.dtype == w.dtype and np.array_equal(g, w)
        if not ok:
            bad = np.flatnonzero(g != w)[:5] if g.shape == w.shape else "shape"
            self.fail(f"{what}: got {g[:8]} want {w[:8]} (first bad indices {bad}, "
                      f"{g.size} vs {w.size} elements, {g.dtype} vs {w.dtype})")


def env_for_ranks(extra=None):
    """The environment for ranks started by multiprocessing: loopback only."""
    env = dict(os.environ)
    env["ZC_SOCKET_IFNAME"] = "lo"
    env.update(extra or {})
    return env


def _rank_main(rank, n, uid_q, res_q, body, args):
    import zcomm
    try:
        if rank == 0:  # the rank that makes the id serves its rendezvous
            uid = zcomm.get_unique_id()
            for _ in range(n - 1):
                uid_q.put(uid)
        else:
            uid = uid_q.get(timeout=60)
        comm = zcomm.Communicator.from_unique_id(uid, n, rank)
        res_q.put((rank, "ok", body(comm, *args)))
    except SystemExit as e:
        res_q.put((rank, "error", f"exit {e.code}"))
    except BaseException as e:  # reported to the parent, which fails the test
        import traceback
        res_q.put((rank, "error", f"{e!r}\n{traceback.format_exc()}"))


def run_ranks(n, body, args=(), timeout=60):
    """Runs body(comm, *args) on n ranks (spawned processes, a communicator
    from a unique id); returns {rank: ("ok", result) or ("error", text)}.
    A rank that reports nothing by the deadline (or dies) is absent. Every
    process is gone when it returns."""
    import multiprocessing as mp
    import queue
    import time
    ctx = mp.get_context("spawn")
    uid_q, res_q = ctx.Queue(), ctx.Queue()
    procs = [ctx.Process(target=_rank_main, args=(r, n, uid_q, res_q, body, args))
             for r in range(n)]
    for p in procs:
        p.start()
    results = {}
    deadline = time.monotonic() + timeout
    while len(results) < n and time.monotonic() < deadline:
        if all(not p.is_alive() for p in procs) and res_q.empty():
            break
        try:
            rank, kind, value = res_q.get(timeout=0.2)
            results[rank] = (kind, value)
        except queue.Empty:
            pass
    for p in procs:
        p.join(max(0.0, deadline - time.monotonic()))
        if p.is_alive():
            p.kill()
            p.join()
    return results
