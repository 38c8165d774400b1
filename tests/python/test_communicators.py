"""Communicators from Python: from a unique id (ranks spawned by
multiprocessing, the id carried by a queue), split (keys reversing the
order, a rank taking no part), dup, two communicators running collectives
at once from two threads (only possible with the GIL released), and
finalize in any order. Honours ZC_TRANSPORT (shm or tcp)."""

import sys
import threading

import zctest
from zctest import Checker, run_ranks

import numpy as np


def body(comm):
    import zcomm
    R, N = comm.rank, comm.size
    c = Checker(R, "communicators")
    c.true((comm.size, comm.local_size) == (N, N), "size and local size")
    c.true(0 <= comm.local_rank < N, "local rank")
    # split: parity colors, keys reverse the order; the last rank opts out
    color = None if R == N - 1 else R % 2
    sub = comm.split(color, key=-R)
    if color is None:
        c.true(sub is None, "split(None) gives None")
    else:
        members = [r for r in range(N - 1) if r % 2 == color]
        c.true(sub.size == len(members), f"split size {sub.size}")
        c.true(sub.rank == sorted(members, reverse=True).index(R), f"split rank {sub.rank}")
        x = np.array([R, 1], np.int64)
        c.true(sub.allreduce(x).tolist() == [sum(members), len(members)], f"split sum {x}")
    # dup: the same ranks; both run collectives at the same time from two
    # threads, many times, so each rank meets both orders.
    dup = comm.dup()
    c.true((dup.rank, dup.size) == (R, N), "dup keeps ranks")
    errors = []

    def loop(cm, salt):
        try:
            for i in range(30):
                x = np.full(257, R * 10 + i + salt, np.float64)
                cm.allreduce(x)
                want = sum(r * 10 + i + salt for r in range(N))
                if not (x == want).all():
                    errors.append(f"salt {salt} iteration {i}: {x[0]} != {want}")
        except Exception as e:
            errors.append(repr(e))
    ts = [threading.Thread(target=loop, args=(cm, s)) for cm, s in ((comm, 0), (dup, 1000))]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    c.true(not errors, f"concurrent collectives: {errors}")
    # A second communicator from its own id, alive beside the first.
    if R == 0:
        uid = zcomm.get_unique_id()
        comm.broadcast(np.frombuffer(uid, np.uint8).copy(), root=0)
    else:
        uid = bytes(comm.broadcast(np.zeros(zcomm.UNIQUE_ID_BYTES, np.uint8), root=0))
    other = zcomm.Communicator.from_unique_id(uid, N, N - 1 - R)  # reversed ranks
    g = other.allgather(np.array([R], np.int32))
    c.true(g.ravel().tolist() == list(range(N))[::-1], f"reversed communicator: {g.ravel()}")
    # finalize in any order: the parent before its children
    comm.finalize()
    c.true(dup.allreduce(np.ones(3, np.int8)).tolist() == [N] * 3, "dup alive after parent")
    dup.finalize()
    if sub is not None:
        sub.barrier()
        sub.finalize()
    with other:
        other.barrier()
    c.true(other.finalized and comm.finalized, "finalized")
    return c.checks


def main():
    for n in (1, 3, 4):
        res = run_ranks(n, body, timeout=90)
        bad = {r: v for r, v in res.items() if v[0] != "ok"}
        if len(res) != n or bad:
            print(f"FAIL with {n} ranks: missing {sorted(set(range(n)) - set(res))}, "
                  f"errors {bad}", flush=True)
            return 1
        print(f"{n} ranks: {sum(v[1] for v in res.values())} checks passed", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
