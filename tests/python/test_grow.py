"""Elastic membership from Python (docs/elastic.md, "Grow"), under
zcrun --elastic -np 2 --max-np 4 (4 slots here): zcrun starts two joiners
at once; the ranks wait until both are queued (agreed with an allreduce),
grow, send their state to the newcomers and check allreduces of odd sizes
with rank-dependent data on 4 ranks; then the errors: zcomm.join() in a
process that is no joiner. Honours ZC_TRANSPORT."""

import sys
import time

import numpy as np

import zcomm

STATE_ITER = 7


def verified(comm, it):
    n = 1 + (it * 7919) % 1031
    x = (np.arange(n, dtype=np.int64) + it * 31 + (comm.rank + 1) * 1000003)
    comm.allreduce(x)
    want = sum(np.arange(n, dtype=np.int64) + it * 31 + (r + 1) * 1000003 for r in range(comm.size))
    if not (x == want).all():
        raise AssertionError(f"rank {comm.rank} of {comm.size}: allreduce {it} wrong")


def agreed_pending(comm):
    mine = np.array([comm.join_pending()], np.int32)
    comm.allreduce(mine, op=zcomm.Op.MIN)
    return int(mine[0])


def main():
    state = np.zeros(2, np.int64)
    if zcomm.is_joiner():
        comm = zcomm.join()
        comm.broadcast(state, root=0)
        assert comm.rank >= 2 and comm.size == 4, (comm.rank, comm.size)
    else:
        comm = zcomm.init()
        try:
            zcomm.join()
            raise AssertionError("join() in a process that is no joiner succeeded")
        except zcomm.Error as e:
            assert e.status == zcomm.Status.INVALID_ARG and "ZC_JOIN" in str(e), repr(e)
        for it in range(3):
            verified(comm, it)
        deadline = time.monotonic() + 60
        while agreed_pending(comm) < 2:
            assert time.monotonic() < deadline, "the joiners never queued"
            time.sleep(0.01)
        grown = comm.grow()
        assert (grown.rank, grown.size) == (comm.rank, 4), (grown.rank, grown.size)
        assert comm.join_pending() == 0
        verified(comm, 100)  # the old communicator still works
        comm.finalize()
        comm = grown
        state[:] = (STATE_ITER, 4)
        comm.broadcast(state, root=0)
    assert tuple(state) == (STATE_ITER, 4), state
    for it in range(STATE_ITER, STATE_ITER + 9):
        verified(comm, it)
    print(f"grow ok: rank {comm.rank} of {comm.size}")
    comm.finalize()


if __name__ == "__main__":
    main()
    sys.exit(0)
