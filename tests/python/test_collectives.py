"""Every collective of zcomm's Python package against a numpy reference:
every dtype and op, sizes 0, 1, primes, in place and out of place, every
root, strided and byte-swapped arrays, blocking and nonblocking, repeated on
the same buffers; arrays in the communicator's registered memory
(Communicator.empty/zeros). Run under zcrun (-np 1 to 5; shm, or ZC_TRANSPORT=tcp)."""

import sys

import zctest
from zctest import DTYPES, FLOAT_OPS, FLOATS, INT_OPS, Checker, ident, operand, reduce_ref

import numpy as np
import zcomm

SIZES = [0, 1, 13, 1031]


def check_allreduce(comm, c):
    R, N = comm.rank, comm.size
    for name, _, dt in DTYPES:
        ops = FLOAT_OPS if name in FLOATS else INT_OPS
        for op in ops:
            for k, n in enumerate(SIZES):
                parts = [operand(name, op, n, r, k) for r in range(N)]
                want = reduce_ref(name, op, parts, N)
                approx = op == "avg"
                x = parts[R].copy()
                what = f"allreduce {name} {op} n={n}"
                if k % 2 == 0:  # in place
                    got = comm.allreduce(x, op=op, dtype=dt)
                    c.true(got is x, what + ": in place returns its input")
                else:
                    out = np.full_like(x, 3)
                    got = comm.allreduce(x, out, op=zcomm.Op[op.upper()], dtype=dt)
                    c.true(got is out, what + ": returns out")
                    c.equal(name, x, parts[R], what + ": input unchanged")
                c.equal(name, got, want, what, approx)
        # The op a type cannot take is refused on this rank alone.
        bad = "band" if name in FLOATS else "avg"
        try:
            comm.allreduce(ident(name, 5, R), op=bad, dtype=dt)
            c.fail(f"allreduce {name} {bad} was accepted")
        except zcomm.Error as e:
            c.true(e.status == zcomm.Status.INVALID_ARG, f"{name} {bad}: {e}")
    # Repeated calls on the same buffers, and a size that takes the
    # pipelined (ring) path.
    x = np.empty(70001, np.float32)
    out = np.empty_like(x)
    for it in range(3):
        x[:] = operand("float32", "sum", x.size, R, it)
        comm.allreduce(x, out)
        want = reduce_ref("float32", "sum", [operand("float32", "sum", x.size, r, it)
                                             for r in range(N)], N)
        c.equal("float32", out, want, f"allreduce 70001 iteration {it}")


def check_rooted_and_gathers(comm, c):
    R, N = comm.rank, comm.size
    for name, _, dt in DTYPES:
        for k, n in enumerate([0, 1, 7, 131]):
            root = k % N
            tag = f"{name} n={n} root={root}"
            # broadcast
            x = ident(name, n, R) if R == root else np.zeros(n, ident(name, 1, 0).dtype)
            c.equal(name, comm.broadcast(x, root=root, dtype=dt), ident(name, n, root),
                    "broadcast " + tag)
            # reduce (in place at the root when k is odd)
            parts = [operand(name, "sum", n, r, k) for r in range(N)]
            x = parts[R].copy()
            res = comm.reduce(x, out=x if k % 2 else None, root=root, dtype=dt)
            if R == root:
                c.equal(name, res, reduce_ref(name, "sum", parts, N), "reduce " + tag)
            else:
                c.true(res is None, "reduce returns None off the root")
            # allgather: shape (N,) + x.shape
            x = ident(name, n, R).reshape(n, 1)
            got = comm.allgather(x, dtype=dt)
            c.true(got.shape == (N, n, 1), f"allgather shape {got.shape}")
            c.equal(name, got, np.stack([ident(name, n, r).reshape(n, 1) for r in range(N)]),
                    "allgather " + tag)
            # reduce_scatter: N blocks of n
            parts = [operand(name, "max", N * n, r, k) for r in range(N)]
            got = comm.reduce_scatter(parts[R].reshape(N, n), op="max", dtype=dt)
            want = reduce_ref(name, "max", parts, N).reshape(N, n)[R]
            c.true(got.shape == (1, n), f"reduce_scatter shape {got.shape}")
            c.equal(name, got, want, "reduce_scatter " + tag)
            # alltoall: block p of rank r holds ident(r)[p*n:(p+1)*n]
            got = comm.alltoall(ident(name, N * n, R), dtype=dt)
            want = np.concatenate([ident(name, N * n, r)[R * n:(R + 1) * n] for r in range(N)])
            c.equal(name, got, want, "alltoall " + tag)
            # gather / scatter
            got = comm.gather(ident(name, n, R), root=root, dtype=dt)
            if R == root:
                c.equal(name, got, np.stack([ident(name, n, r) for r in range(N)]),
                        "gather " + tag)
            else:
                c.true(got is None, "gather returns None off the root")
            full = ident(name, N * n, root) if R == root else None
            out = np.zeros(n, ident(name, 1, 0).dtype)
            got = comm.scatter(full, out, root=root, dtype=dt)
            c.equal(name, got, ident(name, N * n, root)[R * n:(R + 1) * n], "scatter " + tag)
            # allgatherv: rank r gives (n + r) % 5 elements (some give none)
            counts = [(n + r) % 5 for r in range(N)]
            got = comm.allgatherv(ident(name, counts[R], R), counts, dtype=dt)
            c.equal(name, got, np.concatenate([ident(name, counts[r], r) for r in range(N)]),
                    "allgatherv " + tag)
            # alltoallv: r sends (r + p + n) % 4 elements to p
            sc = [(R + p + n) % 4 for p in range(N)]
            rc = [(r + R + n) % 4 for r in range(N)]
            x = ident(name, sum(sc), R)
            got = comm.alltoallv(x, sc, rc, dtype=dt)
            want = []
            for r in range(N):
                s = [(r + p + n) % 4 for p in range(N)]
                off = sum(s[:R])
                want.append(ident(name, sum(s), r)[off:off + s[R]])
            c.equal(name, got, np.concatenate(want), "alltoallv " + tag)
    comm.barrier()


def check_nonblocking(comm, c):
    R, N = comm.rank, comm.size
    for name, _, dt in DTYPES:
        n = 37
        parts = [operand(name, "min", n, r) for r in range(N)]
        req = comm.iallreduce(parts[R].copy(), op="min", dtype=dt)
        c.equal(name, req.wait(), reduce_ref(name, "min", parts, N), f"iallreduce {name}")
        root = N - 1
        x = ident(name, n, R)
        c.equal(name, comm.ibroadcast(x, root=root, dtype=dt).wait(), ident(name, n, root),
                f"ibroadcast {name}")
        parts = [operand(name, "sum", n, r) for r in range(N)]
        got = comm.ireduce(parts[R], root=0, dtype=dt).wait()
        if R == 0:
            c.equal(name, got, reduce_ref(name, "sum", parts, N), f"ireduce {name}")
        got = comm.iallgather(ident(name, n, R), dtype=dt).wait()
        c.equal(name, got, np.stack([ident(name, n, r) for r in range(N)]), f"iallgather {name}")
        parts = [operand(name, "sum", N * n, r) for r in range(N)]
        req = comm.ireduce_scatter(parts[R], dtype=dt)
        while not req.test():  # test() polls to completion as well
            pass
        c.equal(name, req.wait(), reduce_ref(name, "sum", parts, N)[R * n:(R + 1) * n],
                f"ireduce_scatter {name}")
        got = comm.ialltoall(ident(name, N * n, R), dtype=dt).wait()
        want = np.concatenate([ident(name, N * n, r)[R * n:(R + 1) * n] for r in range(N)])
        c.equal(name, got, want, f"ialltoall {name}")
    c.true(comm.ibarrier().wait() is None, "ibarrier")


def check_layouts(comm, c):
    """Arrays that are not C-contiguous, aligned and native are staged."""
    R, N = comm.rank, comm.size
    parts = [operand("int32", "sum", 2 * 3 * 5, r) for r in range(N)]
    want = reduce_ref("int32", "sum", parts, N).reshape(2, 3, 5)
    # a strided view, reduced in place: its neighbours stay untouched
    base = np.full((2, 3, 10), -7, np.int32)
    view = base[:, :, ::2]
    view[...] = parts[R].reshape(2, 3, 5)
    comm.allreduce(view)
    c.equal("int32", view.copy(), want, "allreduce strided in place")
    c.true((base[:, :, 1::2] == -7).all(), "strided in place: gaps untouched")
    # Fortran order in, a transposed view out
    x = np.asfortranarray(parts[R].reshape(2, 3, 5))
    out = np.zeros((5, 3, 2), np.int32).T
    comm.allreduce(x, out)
    c.equal("int32", out.copy(), want, "allreduce fortran to transposed view")
    # byte-swapped float64, out of place into a byte-swapped array
    parts = [operand("float64", "max", 11, r) for r in range(N)]
    x = parts[R].astype(">f8")
    out = np.zeros(11, ">f8")
    comm.allreduce(x, out, op="max")
    c.equal("float64", out.astype(np.float64), reduce_ref("float64", "max", parts, N),
            "allreduce big-endian")
    # unaligned: a float32 array at an odd byte offset
    raw = np.zeros(4 * 9 + 1, np.uint8)
    un = raw[1:].view(np.float32)
    c.true(not un.flags.aligned, "the test array is unaligned")
    un[:] = ident("float32", 9, R)
    comm.broadcast(un, root=0)
    c.equal("float32", un.copy(), ident("float32", 9, 0), "broadcast unaligned")
    # out overlapping the input (not in place): the input is read first
    buf = np.arange(20, dtype=np.int64) + R
    comm.allreduce(buf[:10], buf[5:15])
    c.equal("int64", buf[5:15], sum(np.arange(10, dtype=np.int64) + r for r in range(N)),
            "allreduce overlapping out")
    # a strided gather target and a strided irecv-style output
    src = ident("uint8", 6, R)
    dst = np.zeros((N, 12), np.uint8)[:, ::2]
    comm.allgather(src, dst)
    c.equal("uint8", dst.copy(), np.stack([ident("uint8", 6, r) for r in range(N)]),
            "allgather strided out")
    # read-only output: refused with a clear message
    ro = np.zeros(4, np.float32)
    ro.flags.writeable = False
    try:
        comm.allreduce(ro)
        c.fail("allreduce into a read-only array was accepted")
    except zcomm.Error as e:
        c.true("read-only" in e.message and f"rank {R}" in e.message, str(e))


def check_bool_bytes(comm, c):
    """bool arrays whose bytes are not 0/1 (2, 0x80, 0xff are true): every
    reduction writes 0 or 1, logical per op; data movement keeps the bytes."""
    R, N = comm.rank, comm.size
    pairs = [(0xff, 1), (2, 0x80), (0, 2), (2, 2), (0, 0), (1, 0xfe), (0x80, 0), (1, 1)]
    raw = np.array([p[R % 2] for p in pairs], np.uint8)
    truth = np.array([[p[r % 2] != 0 for p in pairs] for r in range(N)])
    for op in INT_OPS:
        want = {"sum": truth.any(0), "max": truth.any(0), "bor": truth.any(0),
                "prod": truth.all(0), "min": truth.all(0), "band": truth.all(0),
                "bxor": truth.sum(0) % 2 == 1}[op].astype(np.uint8).tolist()
        out = np.full(len(pairs), 9, np.uint8)
        comm.allreduce(raw.view(np.bool_), out.view(np.bool_), op=op)
        c.true(out.tolist() == want, f"bool allreduce {op}: {out.tolist()} want {want}")
        x = raw.copy()
        comm.allreduce(x.view(np.bool_), op=op)
        c.true(x.tolist() == want, f"bool allreduce {op} in place: {x.tolist()} want {want}")
        root = N - 1
        got = comm.reduce(raw.view(np.bool_), op=op, root=root)
        if R == root:
            c.true(got.view(np.uint8).tolist() == want, f"bool reduce {op}: {got.view(np.uint8)}")
        blocks = np.tile(raw, N).reshape(N, len(pairs))
        got = comm.reduce_scatter(blocks.view(np.bool_), op=op)
        c.true(got.view(np.uint8).reshape(-1).tolist() == want, f"bool reduce_scatter {op}")
    got = comm.allgather(raw.view(np.bool_))
    c.true(got.view(np.uint8).tolist() == [[p[r % 2] for p in pairs] for r in range(N)],
           "bool allgather keeps the bytes")


def pool_memory_of(a):
    """The registered buffer an array views (zcomm's PoolMemory), or None."""
    while a is not None and not isinstance(a, zcomm._zcomm.PoolMemory):
        a = getattr(a, "base", None) if isinstance(a, np.ndarray) else getattr(a, "obj", None)
    return a


def check_registered_memory(comm, c):
    """Communicator.empty/zeros: arrays in the communicator's registered
    memory, through every collective path (the zero-copy round from 8 KiB
    per rank on shared memory, the sharded rounds when any rank's buffer is
    numpy's own), and their lifetime."""
    R, N = comm.rank, comm.size
    for shape in [(), 0, (0,), 1, (3, 5), 1031, (2, 3, 4)]:
        for name, t, _ in DTYPES:
            a = comm.zeros(shape, t)
            want_shape = () if shape == () else (shape,) if isinstance(shape, int) else shape
            what = f"zeros({shape}, {name})"
            c.true(a.shape == want_shape and a.dtype == np.dtype(t), what + f": {a.shape} {a.dtype}")
            c.true(a.flags.c_contiguous and a.flags.aligned and a.flags.writeable,
                   what + ": C-contiguous, aligned, writeable")
            c.true(not a.any(), what + ": all zero")
            c.true((pool_memory_of(a) is not None) == (a.size > 0),
                   what + ": registered memory (a plain array when empty)")
    for bad in ({"shape": (4, -1)}, {"shape": 3, "dtype": object}):
        try:
            comm.empty(**bad)
            c.fail(f"empty({bad}) was accepted")
        except zcomm.Error as e:
            c.true(e.status == zcomm.Status.INVALID_ARG and f"rank {R}" in str(e), f"{bad}: {e}")

    # Every dtype and op on registered memory, across the zero-copy size
    # (8 KiB per rank): in place, out of place, and mixed with numpy arrays,
    # on this rank (its output) or on one rank only (its input).
    for name, t, dt in DTYPES:
        ops = FLOAT_OPS if name in FLOATS else INT_OPS
        for op in ops:
            for k, n in enumerate([1, 13, 4099, 70001]):
                parts = [operand(name, op, n, r, k) for r in range(N)]
                want = reduce_ref(name, op, parts, N)
                mode = ["in place", "out of place", "numpy out", "rank 0 numpy"][k]
                x = parts[R].copy() if mode == "rank 0 numpy" and R == 0 else comm.empty(n, t)
                x[:] = parts[R]
                what = f"registered allreduce {name} {op} n={n} {mode}"
                if mode == "in place":
                    got = comm.allreduce(x, op=op, dtype=dt)
                else:
                    out = np.full_like(parts[R], 3) if mode == "numpy out" else comm.empty(n, t)
                    got = comm.allreduce(x, out, op=op, dtype=dt)
                    c.equal(name, x, parts[R], what + ": input unchanged")
                c.equal(name, got, want, what, op == "avg")
    # Large, repeated on the same buffers (the zero-copy round on shared
    # memory): rank- and index-dependent data, an odd count.
    n = (1 << 20) + 3
    x, out = comm.empty(n, np.float32), comm.empty(n, np.float32)
    for it in range(3):
        x[:] = operand("float32", "sum", n, R, it)
        want = reduce_ref("float32", "sum", [operand("float32", "sum", n, r, it)
                                             for r in range(N)], N)
        comm.allreduce(x, out)
        c.equal("float32", out, want, f"registered allreduce {n} iteration {it}")
        comm.allreduce(x)
        c.equal("float32", x, want, f"registered allreduce {n} in place iteration {it}")
    # The other collectives read and write registered arrays like any other.
    b = comm.empty(4099, np.int64)
    b[:] = ident("int64", 4099, 0) if R == 0 else 0
    comm.broadcast(b, root=0)
    c.equal("int64", b, ident("int64", 4099, 0), "registered broadcast")
    g = comm.empty((N, 4099), np.int32)
    comm.allgather(ident("int32", 4099, R), g)
    c.equal("int32", g, np.stack([ident("int32", 4099, r) for r in range(N)]), "registered allgather")
    del x, out, b, g

    # Lifetime: a view keeps the memory; finalize refuses while any array
    # views it, and works once none does.
    d = comm.dup()
    a = d.zeros(10007, np.float64)
    view = a[5:9]
    del a
    view[:] = R
    d.allreduce(view)
    c.equal("float64", view, np.full(4, float(sum(range(N)))), "a view outlives its array")
    try:
        d.finalize()
        c.fail("finalize with a registered array still referenced was accepted")
    except zcomm.Error as e:
        c.true(e.status == zcomm.Status.INVALID_ARG and "still referenced" in str(e), f"refused: {e}")
    c.true(not d.finalized, "a refused finalize leaves the communicator working")
    del view
    d.finalize()
    c.true(d.finalized, "finalize once no array views the memory")
    # Allocation and release many times over: the pool reuses its memory.
    for i in range(200):
        a = comm.empty(1 << 18, np.float32)
        a[-1] = i
    c.true(a[-1] == 199, "the last of 200 allocations")


def main():
    comm = zcomm.init()
    c = Checker(comm.rank, "collectives")
    with comm:
        check_allreduce(comm, c)
        check_rooted_and_gathers(comm, c)
        check_nonblocking(comm, c)
        check_layouts(comm, c)
        check_bool_bytes(comm, c)
        check_registered_memory(comm, c)
        c.true(comm.async_error() is None, "healthy at the end")
    print(f"rank {c.rank} of {comm.size}: {c.checks} checks passed", flush=True)


if __name__ == "__main__":
    sys.exit(main())
