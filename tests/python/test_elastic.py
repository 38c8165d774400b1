"""Fault tolerance from Python (docs/elastic.md): on 4 ranks (spawned,
communicator from a unique id) rank 3 is killed in a loop of verified
allreduces; the survivors get zcomm.Error, agree (the loss reported the
same everywhere), shrink, and go on with exact results; revoke reaches a
rank blocked in a receive on another thread. Honours ZC_TRANSPORT."""

import os
import signal
import sys
import threading

import zctest
from zctest import Checker, run_ranks

import numpy as np


def body(comm):
    import zcomm
    R, N = comm.rank, comm.size
    c = Checker(R, "elastic")
    flag, failed = comm.agree(0b1111 & ~(1 << R) | 0b10000)
    c.true((flag, failed) == (0b10000, []), f"agree with everyone alive: {flag:#x} {failed}")
    err = None
    for i in range(100000):
        if R == N - 1 and i == 20:
            os.kill(os.getpid(), signal.SIGKILL)
        x = np.full(1001, R + i, np.int64)
        try:
            comm.allreduce(x)
        except zcomm.Error as e:
            err = e
            break
        c.true((x == sum(r + i for r in range(N))).all(), f"allreduce {i}")
    c.true(err is not None and err.status in (zcomm.Status.PEER_LOST, zcomm.Status.ABORTED),
           f"the loss fails the loop: {err!r}")
    c.true(comm.revoked, "a broken communicator reads as revoked")
    flag, failed = comm.agree(7)
    c.true((flag, failed) == (7, [N - 1]), f"agree after the loss: {flag} {failed}")
    c.true(comm.failed_ranks() == [N - 1], f"failed ranks {comm.failed_ranks()}")
    new = comm.shrink()
    comm.finalize()
    c.true((new.rank, new.size) == (R, N - 1), f"shrunk: rank {new.rank} of {new.size}")
    x = np.full(17, R + 1, np.float64)
    new.allreduce(x)
    c.true((x == sum(range(1, N))).all(), f"allreduce on the shrunk communicator {x[0]}")
    # Revoke reaches a receive blocked in another thread.
    got = []

    def blocked():
        try:
            new.recv(np.zeros(4, np.uint8), (new.rank + 1) % new.size, tag=9)
            got.append("returned")
        except zcomm.Error as e:
            got.append(e.status)
    t = threading.Thread(target=blocked)
    t.start()
    try:
        new.barrier()  # rank 0 may revoke before the others have left it
    except zcomm.Error as e:
        c.true(e.status == zcomm.Status.ABORTED, f"barrier: {e!r}")
    if new.rank == 0:
        new.revoke()
    t.join(30)
    c.true(not t.is_alive() and got == [zcomm.Status.ABORTED], f"revoked receive: {got}")
    last = new.shrink()
    new.finalize()
    y = np.array([1], np.int32)
    last.allreduce(y)
    c.true(y[0] == N - 1, "allreduce after the second shrink")
    last.finalize()
    return c.checks


def main():
    n = 4
    res = run_ranks(n, body, timeout=100)
    bad = {r: v for r, v in res.items() if v[0] != "ok"}
    if bad or sorted(res) != list(range(n - 1)):
        print("FAIL:", res)
        sys.exit(1)
    print("OK", res)


if __name__ == "__main__":
    main()
