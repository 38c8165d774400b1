"""One rank of test_hvd_sets.py: Horovod's process sets, grouped
allgather/reducescatter, sparse allreduce and the DistributedOptimizer's
groups, sparse gradients and process sets on zcomm, against torch references
computed from every rank's (rank- and index-dependent) data. Prints
'OK rank R'."""
import sys

import torch

import zcomm.torch as hvd


def data(shape, dtype, r, salt=0):
    n = 1
    for s in shape:
        n *= s
    v = (torch.arange(n, dtype=torch.int64) * 7 + r * 3 + salt * 11) % 9 - 4
    return v.to(dtype).reshape(shape)


def expect(got, want, what):
    if got.shape != want.shape or got.dtype != want.dtype or not torch.equal(got, want):
        raise AssertionError("rank %d: %s: got %s, want %s" % (hvd.rank(), what, got, want))


def raises(exc, fn, what, *parts):
    try:
        fn()
    except exc as e:
        for p in parts:
            assert p in str(e), "rank %d: %s: %r not in %s" % (hvd.rank(), what, p, e)
        return
    raise AssertionError("rank %d: %s did not raise %s" % (hvd.rank(), what, exc.__name__))


def process_sets(r, n):
    if n == 1:  # the only set there is, is the global one
        raises(ValueError, lambda: hvd.add_process_set([0]), "a copy of the global set",
               "global process set")
        return
    evens = [q for q in range(n) if q % 2 == 0]
    odds = [q for q in range(n) if q % 2 == 1]
    even_set = hvd.add_process_set(evens)
    odd_set = hvd.add_process_set(hvd.ProcessSet(odds))
    mine, other = (even_set, odd_set) if r % 2 == 0 else (odd_set, even_set)
    members = mine.ranks
    me = members.index(r)
    assert mine.included() and not other.included()
    assert mine.size() == len(members) and mine.rank() == me, (mine.size(), mine.rank())
    assert even_set.process_set_id != odd_set.process_set_id
    assert hvd.global_process_set.ranks == list(range(n))
    raises(ValueError, lambda: hvd.add_process_set(evens), "a duplicate set", "already")
    raises(ValueError, lambda: hvd.add_process_set([0, n]), "a rank out of range", "[0, %d)" % n)
    if odds:
        raises(ValueError, lambda: hvd.allreduce(torch.ones(2), process_set=other),
               "an allreduce on a set without this rank", "not in process set")
    raises(ValueError, lambda: hvd.broadcast(torch.ones(2), root_rank=other.ranks[0]
                                             if other.ranks else n, process_set=mine),
           "a root outside the set", "not in process set")

    for dt in (torch.int32, torch.float64):
        for op in (hvd.Sum, hvd.Min, hvd.Max, hvd.Product):
            x = data((5, 3), dt, r, op)
            parts = [data((5, 3), dt, q, op) for q in members]
            want = parts[0].clone()
            for p in parts[1:]:
                want = {hvd.Sum: want + p, hvd.Min: torch.minimum(want, p),
                        hvd.Max: torch.maximum(want, p), hvd.Product: want * p}[op]
            expect(hvd.allreduce(x, op=op, process_set=mine), want,
                   "allreduce in set %s op %d" % (members, op))
    x = data((me + 1, 2), torch.float32, r)
    want = torch.cat([data((i + 1, 2), torch.float32, q) for i, q in enumerate(members)])
    expect(hvd.allgather(x, process_set=mine), want, "allgather in set")
    root = members[-1]
    expect(hvd.broadcast(data((4,), torch.int64, r), root_rank=root, process_set=mine),
           data((4,), torch.int64, root), "broadcast from global rank %d" % root)
    k = len(members)
    x = torch.arange(2 * k, dtype=torch.int64) + 100 * r
    want = torch.cat([torch.arange(2 * me, 2 * me + 2, dtype=torch.int64) + 100 * q
                      for q in members])
    expect(hvd.alltoall(x, process_set=mine), want, "alltoall in set")
    rows = 2 * k + 1
    full = sum(data((rows, 2), torch.float64, q) for q in members)
    counts = [rows // k + (1 if i < rows % k else 0) for i in range(k)]
    off = sum(counts[:me])
    expect(hvd.reducescatter(data((rows, 2), torch.float64, r), op=hvd.Sum, process_set=mine),
           full[off:off + counts[me]], "reducescatter in set")
    hvd.barrier(process_set=mine)
    obj = hvd.broadcast_object({"root": members[0]} if r == members[0] else None,
                               root_rank=members[0], process_set=mine)
    assert obj == {"root": members[0]}, obj

    # Unnamed operations count per set: the sets may run different numbers.
    for _ in range(3 if mine is even_set else 1):
        hvd.allreduce(torch.ones(1), process_set=mine)
    expect(hvd.allreduce(torch.ones(3), op=hvd.Sum), torch.full((3,), float(n)),
           "a global allreduce after uneven set traffic")

    assert hvd.remove_process_set(odd_set) and hvd.remove_process_set(even_set)
    assert not hvd.remove_process_set(even_set) and not hvd.remove_process_set(hvd.global_process_set)
    assert mine.process_set_id is None and mine.size() is None
    raises(ValueError, lambda: hvd.allreduce(torch.ones(2), process_set=mine),
           "an allreduce on a removed set", "not registered")
    # A set with the same ranks can be added again.
    again = hvd.add_process_set(evens)
    if r in evens:
        expect(hvd.allreduce(torch.ones(2), op=hvd.Sum, process_set=again),
               torch.full((2,), float(len(evens))), "allreduce in a set added again")
    hvd.remove_process_set(again)


def grouped(r, n):
    ts = [data((q + 1, 3), torch.float32, r, i) for i, q in enumerate((0, 2, 1))]
    for t in ts:
        t.requires_grad_()
    # Allgather: each rank q contributes q+1 rows of every tensor.
    xs = [data((r + 1, i + 1), torch.float64, r, i) for i in range(3)]
    outs = hvd.grouped_allgather(xs, name="ga")
    for i, o in enumerate(outs):
        expect(o, torch.cat([data((q + 1, i + 1), torch.float64, q, i) for q in range(n)]),
               "grouped_allgather[%d]" % i)
    # Reducescatter (Sum), uneven first dimensions.
    xs = [data((2 * n + i, 2), torch.float64, r, i) for i in range(3)]
    outs = hvd.grouped_reducescatter(xs, op=hvd.Sum)
    for i, o in enumerate(outs):
        rows = 2 * n + i
        full = sum(data((rows, 2), torch.float64, q, i) for q in range(n))
        counts = [rows // n + (1 if q < rows % n else 0) for q in range(n)]
        off = sum(counts[:r])
        expect(o, full[off:off + counts[r]], "grouped_reducescatter[%d]" % i)

    # Gradients as Horovod's: grouped allreduce has grad_fn and Sum gives n.
    outs = hvd.grouped_allreduce(ts, op=hvd.Sum)
    assert all(o.grad_fn is not None for o in outs)
    sum(o.sum() for o in outs).backward()
    for t in ts:
        expect(t.grad, torch.full_like(t, float(n)), "grouped_allreduce gradient")
    # Allgather averages the gradient and keeps this rank's rows.
    xs = [data((r + 1, 2), torch.float64, r, i).requires_grad_() for i in range(2)]
    total = n * (n + 1) // 2
    ws = [torch.arange(total * 2, dtype=torch.float64).reshape(total, 2) * (i + 1)
          for i in range(2)]
    outs = hvd.grouped_allgather(xs)
    sum((o * w).sum() for o, w in zip(outs, ws)).backward()
    off = r * (r + 1) // 2
    for x, w in zip(xs, ws):
        expect(x.grad, w[off:off + r + 1], "grouped_allgather gradient")
    # Reducescatter: Sum's gradient is the set's size, Average's is 1.
    for op, scale in ((hvd.Sum, float(n)), (hvd.Average, 1.0)):
        x = data((2 * n, 3), torch.float32, r).requires_grad_()
        hvd.reducescatter(x, op=op).sum().backward()
        expect(x.grad, torch.full_like(x, scale), "reducescatter gradient op %d" % op)
        xs = [data((n + i, 2), torch.float32, r).requires_grad_() for i in range(2)]
        sum(o.sum() for o in hvd.grouped_reducescatter(xs, op=op)).backward()
        for x in xs:
            expect(x.grad, torch.full_like(x, scale), "grouped_reducescatter gradient op %d" % op)
    raises(NotImplementedError, lambda: hvd.reducescatter(torch.ones(n), op=hvd.Adasum),
           "reducescatter with Adasum", "Adasum")


def sparse(r, n):
    torch.manual_seed(100 + r)
    for i, rows in enumerate((17, 1, 40)):
        dense = torch.rand(rows, 6)
        dense[dense < 0.7] = 0
        if i == 1 and r == 0:
            dense.zero_()  # a rank with no entries at all
        want = hvd.allreduce(dense, op=hvd.Average, name="sparse_ref.%d" % i)
        handle = hvd.sparse_allreduce_async(dense.to_sparse(), name="sp.%d" % i, op=hvd.Average)
        got = handle()
        assert got.is_sparse
        assert torch.allclose(got.to_dense(), want, atol=1e-6), (got.to_dense(), want)


class Embed(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embedding = torch.nn.Embedding(10, 3, sparse=True)

    def forward(self, x):
        return self.embedding(x)


def optimizers(r, n):
    # Sparse gradients, allgathered or densified: the same update everywhere,
    # the same as one process that sees every rank's batch.
    inputs = [torch.tensor([[q % 10, (q + 3) % 10, 4]]) for q in range(n)]
    results = []
    for sparse_as_dense in (False, True):
        torch.manual_seed(7)
        model = Embed()
        ref = Embed()
        ref.load_state_dict(model.state_dict())
        opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.5),
                                       named_parameters=model.named_parameters(),
                                       sparse_as_dense=sparse_as_dense)
        opt.zero_grad()
        model(inputs[r]).sum().backward()
        opt.step()
        ref_opt = torch.optim.SGD(ref.parameters(), lr=0.5)
        ref_opt.zero_grad()
        (sum(ref(x).sum() for x in inputs) / n).backward()
        ref_opt.step()
        w = model.embedding.weight.detach()
        assert torch.allclose(w, ref.embedding.weight.detach(), atol=1e-6), (sparse_as_dense, w)
        results.append(w.clone())
    assert torch.allclose(results[0], results[1], atol=1e-6), "sparse and sparse_as_dense updates"

    # Groups (a count, and explicit lists) give the ungrouped result.
    def train(**kw):
        torch.manual_seed(3)
        model = torch.nn.Sequential(torch.nn.Linear(5, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
        opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                       named_parameters=model.named_parameters(), **kw)
        x = data((6, 5), torch.float32, r)
        for _ in range(3):
            opt.zero_grad()
            model(x).pow(2).sum().backward()
            opt.step()
        return torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    plain = train()
    for kw in (dict(groups=2), dict(num_groups=3)):
        got = train(**kw)
        assert torch.allclose(got, plain, atol=1e-6), kw
    torch.manual_seed(3)
    model = torch.nn.Sequential(torch.nn.Linear(5, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
    plist = list(model.parameters())
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                   named_parameters=model.named_parameters(),
                                   groups=[[plist[0], plist[3]], [plist[1]]])
    x = data((6, 5), torch.float32, r)
    for _ in range(3):
        opt.zero_grad()
        model(x).pow(2).sum().backward()
        opt.step()
    got = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    assert torch.allclose(got, plain, atol=1e-6), "explicit groups"

    # broadcast_optimizer_state creates state with zero gradients (frozen
    # parameters keep None).
    model = torch.nn.Linear(3, 2)
    model.bias.requires_grad_(False)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9),
                                   named_parameters=model.named_parameters())
    hvd.broadcast_optimizer_state(opt, root_rank=0)
    expect(model.weight.grad, torch.zeros(2, 3), "gradient after broadcast_optimizer_state")
    assert model.bias.grad is None

    # A process set: its members average, the others step alone.
    if n == 1:
        return
    evens = [q for q in range(n) if q % 2 == 0]
    even_set = hvd.add_process_set(evens)
    torch.manual_seed(11)
    model = torch.nn.Linear(4, 3)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.2),
                                   named_parameters=model.named_parameters(),
                                   process_set=even_set)
    opt.zero_grad()
    model(data((2, 4), torch.float32, r)).sum().backward()
    opt.step()
    w = model.weight.detach().reshape(-1)
    ws = hvd.allgather(w.reshape(1, -1))
    for q in range(n):
        same = torch.equal(ws[q], ws[0])
        assert same == (q % 2 == 0), (q, ws)
    hvd.remove_process_set(even_set)


def main():
    hvd.init()
    r, n = hvd.rank(), hvd.size()
    process_sets(r, n)
    grouped(r, n)
    sparse(r, n)
    optimizers(r, n)
    # Sets given to init() are registered there; a duplicate of the global
    # set is not.
    hvd.shutdown()
    first = hvd.ProcessSet([0])
    dup = hvd.ProcessSet(list(range(n)))
    hvd.init(process_sets=[first, dup])
    assert dup.process_set_id is None
    if n > 1:
        assert first.process_set_id is not None and first.size() == 1
    if r == 0 and n > 1:
        expect(hvd.allreduce(torch.ones(2), op=hvd.Sum, process_set=first), torch.ones(2),
               "allreduce in a set given to init()")
    hvd.barrier()
    hvd.shutdown()
    assert first.process_set_id is None
    print("OK rank %d" % r, flush=True)


if __name__ == "__main__":
    main()
    sys.exit(0)
