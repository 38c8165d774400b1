"""Failures from Python are zcomm.Error with a status and the library's
message, and never hang: a count mismatch between ranks (MISMATCH), a
receive of the wrong size (MISMATCH), a rank killed mid-job (an Error and
async_error() within 10 s), an abort, bad arguments refused on the
calling rank, and a `with` block left by an exception while arrays in the
communicator's registered memory are still referenced. Ranks are spawned by multiprocessing. Honours ZC_TRANSPORT."""

import os
import signal
import sys
import time

import zctest
from zctest import run_ranks

import numpy as np

os.environ["ZC_TIMEOUT"] = "30"  # an error found by a deadline would take > 10 s


def mismatch(comm):
    import zcomm
    n = 99 if comm.rank == comm.size - 1 else 100
    seen = []
    for call in (lambda: comm.allreduce(np.ones(n, np.float32)), comm.barrier):
        try:
            call()
            seen.append(None)
        except zcomm.Error as e:
            seen.append((int(e.status), e.message))
    return seen


def recv_size(comm):
    import zcomm
    if comm.rank == 0:
        comm.send(np.zeros(8, np.int32), 1, tag=5)  # 32 bytes, eager
        return None
    try:
        comm.recv(np.zeros(16, np.int32), 0, tag=5)  # 64 bytes
        return "accepted"
    except zcomm.Error as e:
        return (int(e.status), e.message)


def killed(comm):
    import zcomm
    comm.barrier()
    if comm.rank == comm.size - 1:
        os.kill(os.getpid(), signal.SIGKILL)
    t0 = time.monotonic()
    err = None
    try:
        for _ in range(100000):  # until the loss shows; deadlines bound each call
            comm.allreduce(np.ones(1000, np.float64))
    except zcomm.Error as e:
        err = e
    t_call = time.monotonic() - t0
    while comm.async_error() is None and time.monotonic() - t0 < 10:
        time.sleep(0.01)  # polling the watchdog's observable condition
    ae = comm.async_error()
    return (None if err is None else int(err.status), t_call,
            None if ae is None else int(ae.status), time.monotonic() - t0)


def aborted(comm):
    import zcomm
    t0 = time.monotonic()
    try:
        # Rank 1 may already see the abort in this first barrier: rank 0 can
        # leave it and abort before rank 1 has returned from it.
        comm.barrier()
        if comm.rank == 0:
            comm.abort()
        comm.barrier()
        comm.barrier()
        return ("no error", 0)
    except zcomm.Error as e:
        return (int(e.status), time.monotonic() - t0)


def bad_args(comm):
    import zcomm
    R = comm.rank
    got = []
    cases = [
        lambda: comm.allreduce(np.zeros(3, np.complex64)),
        lambda: comm.allreduce(np.zeros(3, object)),
        lambda: comm.allreduce(np.zeros(3, np.longdouble)),
        lambda: comm.allreduce(np.zeros(3, "datetime64[s]")),
        lambda: comm.allreduce([1, 2, 3]),
        lambda: comm.allreduce(np.zeros(3, np.float32), np.zeros(3, np.float64)),
        lambda: comm.allreduce(np.zeros(3, np.float32), np.zeros(4, np.float32)),
        lambda: comm.allreduce(np.zeros(3, np.float32), op="median"),
        lambda: comm.allreduce(np.zeros(3, np.int16), op="avg"),
        lambda: comm.allreduce(np.zeros(3, bool), op="avg"),
        lambda: comm.allreduce(np.zeros(3, np.float32), dtype="bfloat16"),
        lambda: comm.broadcast(np.zeros(3, np.float32), root=comm.size),
        lambda: comm.allgatherv(np.zeros(1, np.int8), [1]),
        lambda: comm.reduce_scatter(np.zeros(comm.size + 1, np.int32)),
        lambda: comm.send(np.zeros(2, np.int8), comm.size + 3),
        lambda: zcomm.Communicator.from_unique_id(b"short", comm.size, R),
    ]
    for i, f in enumerate(cases):
        try:
            f()
            got.append((i, "accepted"))
        except zcomm.Error as e:
            ok = e.status == zcomm.Status.INVALID_ARG and f"rank {R}" in e.message
            got.append((i, "ok" if ok else f"{e.status!r} {e.message}",
                        isinstance(e, TypeError)))
    bad = zcomm.get_unique_id() if R == 0 else None
    comm.barrier()  # the communicator stays usable after refused calls
    if bad is not None:  # a corrupted id is refused before anything connects
        b = bytearray(bad)
        b[40] ^= 0xFF
        try:
            zcomm.Communicator.from_unique_id(bytes(b), 1, 0)
            got.append(("corrupt", "accepted"))
        except zcomm.Error as e:
            got.append(("corrupt", "ok" if "corrupt" in e.message else e.message))
    return got


def with_live_arrays(comm):
    """Leaving `with comm:` by an exception while an array from zeros() is
    still referenced (the traceback holds it): the block's own exception
    comes out, not finalize's refusal; the communicator is aborted, and
    goes once the array does."""
    import gc
    import zcomm
    kept = []
    try:
        with comm:
            a = comm.zeros(100000, np.float32)
            a[:] = comm.rank
            comm.allreduce(a)
            kept.append(a)
            raise KeyError("the block's own")
    except KeyError as e:
        own = str(e)
    except zcomm.Error as e:
        return ("finalize's error came out", e.message)
    total = float(kept[0][0])
    try:
        comm.barrier()
        after = "barrier worked"
    except zcomm.Error as e:
        after = int(e.status)
    kept.clear()
    del a
    gc.collect()
    return (own, total, after, comm.finalized)


def main():
    fails = []

    def need(cond, what):
        if not cond:
            fails.append(what)
        print(("ok   " if cond else "FAIL ") + (what if not cond else what[:160]), flush=True)

    MISMATCH, INVALID = 2, 1
    res = run_ranks(3, mismatch)
    seen = [v[1] for v in res.values() if v[0] == "ok"]
    need(len(seen) == 3, f"mismatch: every rank returned: {res}")
    need(all(s[1] is not None for s in seen), f"mismatch: every rank failed by the barrier: {seen}")
    need(any(s[0] and s[0][0] == MISMATCH for s in seen), f"mismatch: one saw MISMATCH: {seen}")

    res = run_ranks(2, recv_size)
    r1 = res.get(1, ("missing", None))
    need(r1[0] == "ok" and r1[1] != "accepted" and r1[1][0] == MISMATCH and "32" in r1[1][1]
         and "64" in r1[1][1], f"recv of the wrong size: {r1}")

    res = run_ranks(3, killed)
    need(2 not in res, f"killed: rank 2 died: {res.get(2)}")
    for r in (0, 1):
        kind, v = res.get(r, ("missing", None))
        need(kind == "ok" and v[0] is not None and v[1] < 10,
             f"killed: rank {r} got an Error within 10 s: {kind} {v}")
        need(kind == "ok" and v[2] is not None and v[3] < 10,
             f"killed: rank {r} async_error() within 10 s: {kind} {v}")

    res = run_ranks(2, aborted)
    for r in (0, 1):
        kind, v = res.get(r, ("missing", None))
        need(kind == "ok" and v[0] == 5 and v[1] < 10, f"abort: rank {r} ABORTED: {kind} {v}")

    res = run_ranks(2, with_live_arrays)
    for r in (0, 1):
        kind, v = res.get(r, ("missing", None))
        need(kind == "ok" and "the block's own" in v[0] and v[1] == 1.0 and v[2] == 5,
             f"with block left by an exception, arrays alive: rank {r} sees its own "
             f"exception, then ABORTED: {kind} {v}")

    res = run_ranks(2, bad_args)
    for r in (0, 1):
        kind, v = res.get(r, ("missing", None))
        need(kind == "ok" and all(x[1] == "ok" for x in v), f"bad arguments on rank {r}: {v}")
        if kind == "ok":
            need(all(x[2] for x in v if x[0] in (0, 1, 2, 3, 4, 5)),
                 f"dtype errors are TypeErrors on rank {r}")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
