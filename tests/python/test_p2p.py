"""Point to point from Python: send/recv of every dtype, sizes below and
above the eager limits, many isend/irecv in flight in any order of
completion, in-order matching per (peer, tag), staged (strided) receives,
requests dropped unfinished, and receives from any source (per-sender order,
the sender reported). Run under zcrun -np 2..5."""

import sys

import zctest
from zctest import DTYPES, Checker, ident

import numpy as np
import zcomm

# bytes: 0, 1, prime, just above the shm (8 KiB) and tcp (32 KiB) eager limits
SIZES = [0, 1, 13, 8195, 32771, 100003]


def main():
    comm = zcomm.init()
    R, N = comm.rank, comm.size
    c = Checker(R, "p2p")
    with comm:
        nxt, prv = (R + 1) % N, (R - 1) % N
        # Blocking: every dtype around the ring (even ranks send first).
        for name, t, dt in DTYPES:
            for n in [0, 1, 7, 5003]:
                x = ident(name, n, R)
                out = np.zeros(n, t)
                if R % 2 == 0:
                    comm.send(x, nxt, tag=3, dtype=dt)
                    comm.recv(out, prv, tag=3, dtype=dt)
                else:
                    comm.recv(out, prv, tag=3, dtype=dt)
                    comm.send(x, nxt, tag=3, dtype=dt)
                c.equal(name, out, ident(name, n, prv), f"send/recv {name} n={n}")
        # Many in flight: to and from every peer, several tags and sizes,
        # receives posted first, completed in reverse order.
        recvs, sends = [], []
        for p in range(N):
            if p == R:
                continue
            for tag in range(3):
                for k, b in enumerate(SIZES):
                    out = np.zeros(b, np.uint8)
                    recvs.append((comm.irecv(out, p, tag=tag), out, p, tag, k))
        for p in range(N):
            if p == R:
                continue
            for tag in range(3):
                for k, b in enumerate(SIZES):
                    x = ident("uint8", b, R, salt=tag * 31 + k)
                    sends.append(comm.isend(x, p, tag=tag))
        for req, out, p, tag, k in reversed(recvs):
            c.true(req.wait() is out, "irecv returns its array")
            c.equal("uint8", out, ident("uint8", out.size, p, salt=tag * 31 + k),
                    f"irecv from {p} tag {tag} size {out.size}")
        pending = list(sends)
        while pending:  # test() drives completion too
            pending = [q for q in pending if not q.test()]
        c.true(all(q.done for q in sends), "every isend done")
        # Same (peer, tag): in the order posted, whatever the sizes.
        if N >= 2:
            reqs = [comm.isend(ident("int64", 100 * i + 1, R, salt=i), nxt, tag=9)
                    for i in range(8)]
            for i in range(8):
                out = comm.recv(np.zeros(100 * i + 1, np.int64), prv, tag=9)
                c.equal("int64", out, ident("int64", 100 * i + 1, prv, salt=i),
                        f"ordered message {i}")
            for q in reqs:
                q.wait()
        # A strided receive target (staged, copied out at completion), and a
        # request dropped unfinished (its destructor waits for it).
        base = np.full((6, 4), -1, np.float32)
        view = base[:, 1]
        rq = comm.irecv(view, prv, tag=11)
        comm.isend(np.arange(6, dtype=np.float32) + R, nxt, tag=11)  # dropped
        rq.wait()
        c.equal("float32", view.copy(), np.arange(6, dtype=np.float32) + prv,
                "strided irecv")
        c.true((base[:, [0, 2, 3]] == -1).all(), "strided irecv: gaps untouched")
        # From any source: rank 0 takes every other rank's messages in the
        # order each sent them (recv_source and irecv report the sender).
        per = 4
        if R == 0:
            nxt_idx = {p: 0 for p in range(1, N)}
            pend = [comm.irecv(np.zeros(2, np.int64), zcomm.ANY_SOURCE, tag=12)
                    for _ in range((N - 1) * per // 2)]
            for _ in range((N - 1) * per - len(pend)):
                out, src = comm.recv_source(np.zeros(2, np.int64), zcomm.ANY_SOURCE, tag=12)
                pend.append((out, src))
            got = []
            for q in pend:
                got.append((q.wait(), q.source) if isinstance(q, zcomm.Request) else q)
            # Requests were posted before the blocking receives: their
            # messages come first in each sender's order.
            for out, src in got:
                c.true(src in nxt_idx, f"any source: sender {src}")
                c.equal("int64", out, np.array([src, nxt_idx[src]], np.int64),
                        f"any source: message {nxt_idx[src]} of rank {src}")
                nxt_idx[src] += 1
            c.true(all(v == per for v in nxt_idx.values()), f"any source: counts {nxt_idx}")
        else:
            for i in range(per):
                comm.send(np.array([R, i], np.int64), 0, tag=12)
        comm.barrier()
    print(f"rank {R} of {N}: {c.checks} checks passed", flush=True)


if __name__ == "__main__":
    sys.exit(main())
