"""The behaviours torch's own distributed suite checks (dist_suite.py runs it),
tested here on zcomm directly, 2 and 3 ranks:

- recv without src (recvAnysource): returns the sender, per-sender FIFO;
  irecv without src and Work._source_rank(); several in flight; a size
  mismatch fails naming both sizes and the sender;
- all_gather_coalesced: shapes (empty ones too), async, mixed dtypes
  through the group's call, bad output lists refused at the call;
- all_reduce of sparse COO tensors (SUM, as gloo): sparse and dense dims,
  dtypes, a rank without entries, other ops refused;
- monitored_barrier (zcomm.torch.monitored_barrier, and the group's own
  monitored_barrier): passes; rank 0 names the first missing rank, or all of
  them with wait_all_ranks, or itself when its timeout is spent; the ranks
  that came learn of rank 0's failure at once;
- a barrier that only rank 0 joins fails after the group's timeout with
  torch's " Timed out " wording.
"""
import datetime
import os
import time

import zc_torch_harness as h


def any_source(rank, world):
    import torch
    import torch.distributed as dist
    per = 6
    # Blocking recv from any source: each sender's messages in its order.
    if rank == 0:
        nxt = {r: 0 for r in range(1, world)}
        for _ in range((world - 1) * per):
            t = torch.empty(2, dtype=torch.int64)
            src = dist.recv(t, tag=4)
            assert src in nxt, src
            assert t.tolist() == [src, nxt[src]], (src, t, nxt)
            nxt[src] += 1
        assert all(v == per for v in nxt.values()), nxt
    else:
        for i in range(per):
            dist.send(torch.tensor([rank, i]), 0, tag=4)
    # irecv from any source, several in flight, large and small; the Work
    # names the sender once it completed. One tag per size: an any-source
    # receive takes the next message of its tag from any rank, so with one
    # tag a rank's large message could meet a receive posted for a small one.
    sizes = [3, 70000]
    tag_of = {3: 5, 70000: 7}
    if rank == 0:
        works = []
        for size in sizes:
            for _ in range(world - 1):
                t = torch.empty(size)
                works.append((dist.irecv(t, tag=tag_of[size]), t, size))
        seen = {size: [] for size in sizes}
        for w, t, size in works:
            w.wait()
            src = w._source_rank()
            assert torch.equal(t, torch.full((size,), float(src))), (src, t[:4])
            seen[size].append(src)
        for size in sizes:
            assert sorted(seen[size]) == list(range(1, world)), seen
        # A named receive's Work names its peer too (as gloo's).
        w = dist.irecv(torch.empty(1), src=1, tag=6)
        w.wait()
        assert w._source_rank() == 1
    else:
        for size in sizes:
            dist.send(torch.full((size,), float(rank)), 0, tag=tag_of[size])
        if rank == 1:
            w = dist.isend(torch.ones(1), 0, tag=6)
            w.wait()
            try:
                w._source_rank()
            except RuntimeError:
                pass
            else:
                raise AssertionError("a send's Work named a source")
    # A size mismatch through an any-source receive names sizes and sender.
    # After a barrier: rank 0's any-source receives of tag 7 above must all
    # have matched first, or the second could take this message before the
    # other sender's large one arrives (seen at load average 15).
    dist.barrier()
    if rank == 1:
        dist.send(torch.ones(10), 0, tag=7)  # eager: the send itself succeeds
    elif rank == 0:
        try:
            dist.recv(torch.empty(11), tag=7)
        except RuntimeError as e:
            msg = str(e)
            assert "44 bytes" in msg and "40 bytes" in msg and "peer 1" in msg, msg
        else:
            raise AssertionError("a mismatched any-source recv succeeded")
    dist.barrier()
    return "any_source"


def allgather_coalesced(rank, world):
    import torch
    import torch.distributed as dist

    def inputs(r):  # one dtype (torch's all_gather_coalesced wants that)
        return [torch.full((3, 2), float(r)), torch.arange(5.0) + 100 * r, torch.empty(0),
                torch.full((7,), r + 0.5)]

    def mixed(r):  # the group's call takes one allgather per dtype
        return [torch.full((3, 2), float(r)),
                torch.arange(5, dtype=torch.int64) + 100 * r,
                torch.empty(0),
                torch.full((7,), r + 0.5, dtype=torch.float64),
                torch.tensor([r], dtype=torch.int32)]

    pg = dist.distributed_c10d._get_default_group()
    mine = inputs(rank)
    for async_op in (False, True):
        outs = [[torch.empty_like(t) for t in mine] for _ in range(world)]
        w = dist.all_gather_coalesced(outs, mine, async_op=async_op)
        if async_op:
            w.wait()
        for r in range(world):
            for got, want in zip(outs[r], inputs(r)):
                assert torch.equal(got, want), (r, got, want)
    mine = mixed(rank)
    outs = [[torch.empty_like(t) for t in mine] for _ in range(world)]
    pg.allgather_coalesced(outs, mine).wait()
    for r in range(world):
        for got, want in zip(outs[r], mixed(r)):
            assert got.dtype == want.dtype and torch.equal(got, want), (r, got, want)
    # Bad output lists are refused at the call, naming the operation.
    for bad in ([[torch.empty_like(t) for t in mine]] * (world + 1),
                [[torch.empty_like(t) for t in mine[:-1]] for _ in range(world)],
                [[torch.empty(4) for _ in mine] for _ in range(world)]):
        try:
            pg.allgather_coalesced(bad, mine)
        except RuntimeError as e:
            assert "allgather_coalesced" in str(e), str(e)
        else:
            raise AssertionError("a bad output list was accepted")
    return "allgather_coalesced"


def sparse_allreduce(rank, world):
    import torch
    import torch.distributed as dist

    def make(r, sparse_dims, dense_dims, dtype):
        # Rank r has rows 0..r of the first sparse dimension (rank 0 also an
        # empty tensor case below), so that ranks overlap.
        idx = torch.arange(r + 1).reshape(1, r + 1)
        for _ in range(sparse_dims - 1):
            idx = torch.cat((idx, torch.zeros(1, r + 1, dtype=torch.int64)))
        shape = [world] * sparse_dims + [2] * dense_dims
        vals = torch.full([r + 1] + [2] * dense_dims, float(r + 1), dtype=dtype)
        return torch.sparse_coo_tensor(idx, vals, shape)

    for sparse_dims, dense_dims in ((1, 0), (2, 0), (3, 0), (1, 1), (1, 3)):
        for dtype in (torch.float32, torch.float64, torch.int64):
            t = make(rank, sparse_dims, dense_dims, dtype)
            dist.all_reduce(t)
            want = sum(make(r, sparse_dims, dense_dims, dtype).to_dense() for r in range(world))
            assert t.is_sparse and torch.equal(t.to_dense(), want), (sparse_dims, dense_dims, t)
    # No entries on rank 0, async.
    t = make(rank, 1, 1, torch.float32)
    if rank == 0:
        t = torch.sparse_coo_tensor(torch.empty(1, 0, dtype=torch.int64), torch.empty(0, 2), [world, 2])
    dist.all_reduce(t, async_op=True).wait()
    want = sum(make(r, 1, 1, torch.float32).to_dense() for r in range(1, world))
    assert torch.equal(t.to_dense(), want), t
    try:
        dist.all_reduce(make(rank, 1, 0, torch.float32), op=dist.ReduceOp.MAX)
    except RuntimeError as e:
        assert "SUM only" in str(e), str(e)
    else:
        raise AssertionError("a sparse MAX was accepted")
    return "sparse_allreduce"


def monitored_barrier(rank, world):
    import torch.distributed as dist
    import zcomm.torch as zt
    two = datetime.timedelta(seconds=2)
    pg = dist.distributed_c10d._get_default_group()
    # Every rank comes: passes, both ways, and through the group object.
    zt.monitored_barrier(timeout=two)
    zt.monitored_barrier(timeout=two, wait_all_ranks=True)
    pg.monitored_barrier(two)
    # torch's own function refuses every backend but gloo by name.
    try:
        dist.monitored_barrier(timeout=two)
    except RuntimeError as e:
        assert "GLOO" in str(e), str(e)
    else:
        raise AssertionError("torch's monitored_barrier accepted zcomm (torch changed?)")
    dist.barrier()
    # Rank 1 stays away: rank 0 names it; the others hear of rank 0's
    # failure at once, not at the group's timeout.
    start = time.monotonic()
    if rank == 0:
        try:
            zt.monitored_barrier(timeout=two)
        except RuntimeError as e:
            assert "Rank 1 failed to pass monitoredBarrier in 2000 ms" in str(e), str(e)
        else:
            raise AssertionError("rank 0 passed without rank 1")
    elif rank != 1:
        try:
            zt.monitored_barrier(timeout=two)
        except RuntimeError as e:
            assert (f"Rank {rank} successfully reached monitoredBarrier, but received errors "
                    "while waiting for send/recv from rank 0") in str(e), str(e)
        else:
            raise AssertionError(f"rank {rank} passed although rank 0 failed")
        assert time.monotonic() - start < 15, time.monotonic() - start
    dist.barrier()
    # Nobody else comes, wait_all_ranks: rank 0 names them all.
    if rank == 0:
        missing = ", ".join(str(r) for r in range(1, world))
        try:
            zt.monitored_barrier(timeout=datetime.timedelta(seconds=0.2), wait_all_ranks=True)
        except RuntimeError as e:
            assert f"Ranks {missing} failed to pass monitoredBarrier" in str(e), str(e)
        else:
            raise AssertionError("rank 0 passed alone")
        # A timeout spent before the first rank is looked at.
        try:
            pg.monitored_barrier(datetime.timedelta(seconds=0))
        except RuntimeError as e:
            assert "Rank 0 timed out in monitoredBarrier" in str(e), str(e)
        else:
            raise AssertionError("rank 0 passed with no time")
    dist.barrier()
    # A rank outside the group returns at once.
    sub = dist.new_group([0, 1])
    if rank >= 2:
        zt.monitored_barrier(sub, timeout=0.1)
    else:
        zt.monitored_barrier(sub, timeout=two)
    dist.barrier()
    return "monitored_barrier"


def barrier_timeout(rank, world):
    import torch.distributed as dist
    g = dist.new_group(list(range(world)), timeout=datetime.timedelta(seconds=1))
    if rank == 0:
        start = time.monotonic()
        try:
            dist.barrier(g)
        except RuntimeError as e:
            took = time.monotonic() - start
            assert " Timed out " in str(e) and "barrier" in str(e), str(e)
            assert took >= 0.9, took
        else:
            raise AssertionError("a barrier of one rank passed")
    dist.barrier()
    dist.destroy_process_group(g)
    return "barrier_timeout"


def main():
    h.require_torch()
    h.loopback_env()
    for transport in ("shm", "tcp"):
        os.environ["ZC_TRANSPORT"] = transport  # the spawned ranks inherit it
        for world in (2, 3):
            for fn in (any_source, allgather_coalesced, sparse_allreduce, monitored_barrier,
                       barrier_timeout):
                t0 = time.monotonic()
                res = h.run(fn, world, init="file")
                assert res == [fn.__name__] * world, res
                print(f"{fn.__name__} on {world} ranks, {transport}: ok "
                      f"({time.monotonic() - t0:.1f} s)", flush=True)


if __name__ == "__main__":
    main()
