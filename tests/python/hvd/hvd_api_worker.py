"""One rank of test_hvd_api.py: Horovod's torch API on zcomm checked against
torch references computed locally from every rank's (rank- and
index-dependent) data. Prints 'DIGEST rank R <sha256>' of every result (the
driver compares fusion on and off) and 'OK rank R'."""
import hashlib
import sys

import torch

import zcomm.torch as hvd

DTYPES = [torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, torch.float16,
          torch.bfloat16, torch.float32, torch.float64]
SHAPES = [(), (1,), (17,), (3, 5), (2, 3, 4), (0,), (1023,)]
digest = hashlib.sha256()


def data(shape, dtype, r, salt=0, lo=1, hi=5):
    n = 1
    for s in shape:
        n *= s
    idx = torch.arange(n, dtype=torch.int64)
    v = (idx * 7 + r * 3 + salt * 11) % (hi - lo + 1) + lo
    return v.to(dtype).reshape(shape)


def check(got, want, what):
    digest.update(str(got.dtype).encode() + str(tuple(got.shape)).encode())
    digest.update(got.contiguous().reshape(-1).view(torch.uint8).numpy().tobytes() if got.numel() else b"")
    if got.shape != want.shape or got.dtype != want.dtype:
        raise AssertionError("rank %d: %s: got %s %s, want %s %s" % (
            hvd.rank(), what, got.dtype, tuple(got.shape), want.dtype, tuple(want.shape)))
    if want.dtype.is_floating_point:
        tol = 1e-2 if want.dtype in (torch.float16, torch.bfloat16) else 1e-6
        ok = torch.allclose(got.double(), want.double(), rtol=tol, atol=tol)
    else:
        ok = torch.equal(got, want)
    if not ok:
        raise AssertionError("rank %d: %s: got %s, want %s" % (hvd.rank(), what, got, want))


def reduce_ref(parts, op, n):
    acc = parts[0].clone()
    for p in parts[1:]:
        if op in (hvd.Sum, hvd.Average):
            acc = acc + p
        elif op == hvd.Product:
            acc = acc * p
        elif op == hvd.Min:
            acc = torch.minimum(acc, p)
        else:
            acc = torch.maximum(acc, p)
    if op == hvd.Average:
        if acc.dtype.is_floating_point:
            acc = (acc.double() / n).to(acc.dtype)
        else:
            acc = torch.div(acc, n, rounding_mode="trunc")
    return acc


def main():
    # Before init: Horovod's ValueError.
    try:
        hvd.size()
        raise AssertionError("size() before init() did not raise")
    except ValueError:
        pass
    hvd.init()
    r, n = hvd.rank(), hvd.size()
    assert hvd.is_initialized()
    assert 0 <= hvd.local_rank() < hvd.local_size() and hvd.local_size() == n  # one host
    assert hvd.cross_size() == 1 and hvd.cross_rank() == 0, (hvd.cross_size(), hvd.cross_rank())

    # allreduce, every dtype, op and shape; async handles completed in reverse.
    pending = []
    for di, dt in enumerate(DTYPES):
        for si, shape in enumerate(SHAPES):
            for op in (hvd.Sum, hvd.Average, hvd.Min, hvd.Max, hvd.Product):
                hi = 3 if op == hvd.Product else 5
                x = data(shape, dt, r, di + si, hi=hi)
                parts = [data(shape, dt, q, di + si, hi=hi) for q in range(n)]
                want = reduce_ref(parts, op, n)
                h = hvd.allreduce_async(x, name="ar.%d.%d.%d" % (di, si, op), op=op)
                pending.append((h, want, "allreduce %s %s op %d" % (dt, shape, op)))
    for h, want, what in reversed(pending):
        assert hvd.poll(h) in (True, False)
        check(hvd.synchronize(h), want, what)

    # in place, non-contiguous, average=, scale factors, compression.
    x = data((5, 7), torch.float32, r).t()
    assert not x.is_contiguous()
    want = reduce_ref([data((5, 7), torch.float32, q).t() for q in range(n)], hvd.Sum, n)
    y = hvd.allreduce_(x, average=False, name="inplace_nc")
    assert y is x
    check(x, want, "allreduce_ non-contiguous")
    x = data((33,), torch.float64, r)
    want = reduce_ref([data((33,), torch.float64, q) for q in range(n)], hvd.Sum, n) * 1.5
    check(hvd.allreduce(x, op=hvd.Sum, prescale_factor=0.5, postscale_factor=3.0), want,
          "allreduce scaled")
    want = reduce_ref([data((33,), torch.float64, q) for q in range(n)], hvd.Average, n)
    check(hvd.allreduce(x, name="avg"), want, "allreduce default Average")
    # Scale factors with Horovod's numerics, bit for bit: integers scaled in
    # float64 and truncated toward zero ((f * t.double()).to(int)), float32
    # by float32(f) in float32. Sums of these values are exact in any order.
    f32 = torch.tensor(0.1, dtype=torch.float32)
    for dt in (torch.int32, torch.int16, torch.int64, torch.uint8):
        lo = 1 if dt == torch.uint8 else -7
        parts = [data((29,), dt, q, 4, lo=lo, hi=7) for q in range(n)]
        pre = sum((0.5 * p.double()).to(dt) for p in parts).to(dt)
        check(hvd.allreduce(parts[r], op=hvd.Sum, prescale_factor=0.5, name="pre.%s" % dt), pre,
              "allreduce prescale %s" % dt)
        post = (torch.tensor(1.0 / 3, dtype=torch.float64) * sum(parts).double()).to(dt)
        check(hvd.allreduce(parts[r], op=hvd.Sum, postscale_factor=1.0 / 3, name="post.%s" % dt),
              post, "allreduce postscale %s" % dt)
        rows = 2 * n + 1
        full = [data((rows, 3), dt, q, 5, lo=lo, hi=7) for q in range(n)]
        want = (sum((0.5 * p.double()).to(dt) for p in full).to(dt).double() * (1.0 / 3)).to(dt)
        mine, first = rows // n + (1 if r < rows % n else 0), r * (rows // n) + min(r, rows % n)
        check(hvd.reducescatter(full[r], op=hvd.Sum, prescale_factor=0.5, postscale_factor=1.0 / 3,
                                name="rs.%s" % dt), want[first:first + mine], "reducescatter scaled %s" % dt)
    parts = [data((41,), torch.float32, q, 6, lo=-9, hi=9) for q in range(n)]
    check(hvd.allreduce(parts[r], op=hvd.Sum, postscale_factor=0.1, name="post.f32"),
          sum(parts) * f32, "allreduce postscale float32")
    x = data((65,), torch.float32, r)
    got = hvd.allreduce(x, op=hvd.Sum, compression=hvd.Compression.fp16)
    check(got, reduce_ref([data((65,), torch.float32, q) for q in range(n)], hvd.Sum, n),
          "allreduce fp16 compression")
    for bad, exc in ((dict(op=hvd.Adasum), NotImplementedError),
                     (dict(op=hvd.Sum, average=True), ValueError)):
        try:
            hvd.allreduce(x, **bad)
            raise AssertionError("allreduce(%s) did not raise" % bad)
        except exc as e:
            assert "zcomm.torch" in str(e), e

    # grouped allreduce.
    ts = [data((i + 1,), torch.float32, r, i) for i in range(5)]
    outs = hvd.grouped_allreduce(ts, op=hvd.Sum, name="grp")
    for i, o in enumerate(outs):
        check(o, reduce_ref([data((i + 1,), torch.float32, q, i) for q in range(n)], hvd.Sum, n),
              "grouped_allreduce[%d]" % i)
    hvd.synchronize(hvd.grouped_allreduce_async_(ts, op=hvd.Max))
    for i, o in enumerate(ts):
        check(o, reduce_ref([data((i + 1,), torch.float32, q, i) for q in range(n)], hvd.Max, n),
              "grouped_allreduce_async_[%d]" % i)

    # allgather: rank q has q+1 rows.
    for dt in DTYPES:
        x = data((r + 1, 3), dt, r)
        want = torch.cat([data((q + 1, 3), dt, q) for q in range(n)])
        check(hvd.allgather(x), want, "allgather %s" % dt)
    check(hvd.allgather(torch.tensor(float(r))), torch.arange(n, dtype=torch.float32),
          "allgather scalar")

    # broadcast from every root, every dtype.
    for root in range(n):
        for dt in DTYPES:
            x = data((3, 4), dt, r, root)
            want = data((3, 4), dt, root, root)
            check(hvd.broadcast(x, root), want, "broadcast %s root %d" % (dt, root))
            if r != root:
                check(x, data((3, 4), dt, r, root), "broadcast leaves the input")
            hvd.broadcast_(x, root, name="b_.%d" % root)
            check(x, want, "broadcast_ %s root %d" % (dt, root))

    # alltoall, even and with splits.
    x = torch.arange(2 * n, dtype=torch.int64) + 100 * r
    want = torch.cat([torch.arange(2 * r, 2 * r + 2, dtype=torch.int64) + 100 * q
                      for q in range(n)])
    check(hvd.alltoall(x), want, "alltoall even")
    splits = [(r + d) % 3 for d in range(n)]
    rows = []
    for d in range(n):
        for i in range(splits[d]):
            rows.append([r, d, i])
    x = torch.tensor(rows, dtype=torch.float32).reshape(-1, 3)
    out, rsplits = hvd.alltoall(x, splits=torch.tensor(splits, dtype=torch.int32))
    want_rows = [[q, r, i] for q in range(n) for i in range((q + r) % 3)]
    check(out, torch.tensor(want_rows, dtype=torch.float32).reshape(-1, 3), "alltoall splits")
    check(rsplits, torch.tensor([(q + r) % 3 for q in range(n)], dtype=torch.int32),
          "alltoall received splits")

    # reducescatter: 2n+1 rows, the first rank one more.
    rows = 2 * n + 1
    for op in (hvd.Sum, hvd.Average):
        x = data((rows, 3), torch.float64, r)
        full = reduce_ref([data((rows, 3), torch.float64, q) for q in range(n)], op, n)
        counts = [rows // n + (1 if q < rows % n else 0) for q in range(n)]
        off = sum(counts[:r])
        check(hvd.reducescatter(x, op=op), full[off:off + counts[r]], "reducescatter op %d" % op)

    # autograd.
    x = data((4,), torch.float32, r).requires_grad_()
    hvd.allreduce(x, op=hvd.Sum).sum().backward()
    check(x.grad, torch.full((4,), float(n)), "allreduce gradient")
    x = data((r + 1, 2), torch.float64, r).requires_grad_()
    total = sum(q + 1 for q in range(n))
    w = torch.arange(total * 2, dtype=torch.float64).reshape(total, 2)
    (hvd.allgather(x) * w).sum().backward()
    off = sum(q + 1 for q in range(r))
    check(x.grad, w[off:off + r + 1], "allgather gradient (averaged, as Horovod)")
    x = data((3,), torch.float32, r).requires_grad_()
    hvd.broadcast(x, 0).sum().backward()
    check(x.grad, torch.full((3,), 1.0 if r == 0 else 0.0), "broadcast gradient")

    # objects.
    obj = hvd.broadcast_object({"from": r, "list": list(range(r + 3))}, root_rank=n - 1)
    assert obj == {"from": n - 1, "list": list(range(n + 2))}, obj
    objs = hvd.allgather_object(("rank", r, "x" * r))
    assert objs == [("rank", q, "x" * q) for q in range(n)], objs

    # steady state: 120 small tensors a step, the same names: one small
    # negotiation collective per cycle.
    ts = [torch.full((7 + i % 5,), float(r)) for i in range(120)]
    for step in range(8):
        if step == 3:
            s0 = hvd.engine_stats()
        hs = [hvd.allreduce_async_(t, name="steady.%d" % i, op=hvd.Sum) for i, t in enumerate(ts)]
        for h in hs:
            hvd.synchronize(h)
        for t in ts:
            t.fill_(float(r))
    s1 = hvd.engine_stats()
    cycles = s1["cycles"] - s0["cycles"]
    neg = s1["negotiation_collectives"] - s0["negotiation_collectives"]
    misses = s1["cache_misses"] - s0["cache_misses"]
    # No steady request is negotiated again: every one is a cache hit.
    assert misses == 0, ("rank %d: %d cache misses in the steady steps" % (r, misses), s0, s1)
    # Each cycle is one bit-vector allreduce. A request exchange (two more)
    # comes only from other ranks' next calls: each other rank may reach its
    # barrier below, and send it in a cycle of its own, before this rank
    # takes s1 (the barrier cannot complete before then). Renegotiating the
    # steady names every cycle would give 3 per cycle.
    assert cycles > 0 and neg <= cycles + 2 * (n - 1), (
        "rank %d: %d negotiation collectives in %d cycles of the steady steps" % (r, neg, cycles), s0, s1)
    assert s1["cache_hits"] - s0["cache_hits"] >= 3 * 120, (s0, s1)

    hvd.barrier()
    last = hvd.join()
    assert 0 <= last < n, last
    print("DIGEST rank %d %s" % (r, digest.hexdigest()), flush=True)
    print("STATS rank %d negotiation/cycle %.3f over %d cycles" % (r, neg / cycles, cycles),
          flush=True)
    hvd.shutdown()
    assert not hvd.is_initialized()
    print("OK rank %d" % r, flush=True)


if __name__ == "__main__":
    main()
    sys.exit(0)
