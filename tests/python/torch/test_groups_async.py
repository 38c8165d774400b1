"""new_group (a sub-communicator of its own), async_op=True with wait() and
get_future() (the caller never waits on the network), send/recv (blocking,
isend/irecv, non-contiguous, both directions at once), recv from any source
returning the sender, a mismatched size failing with an error instead of a hang, and
an unmatched receive ending at the group's timeout."""
import zc_torch_harness as h


def groups_and_async(rank, world):
    import torch
    import torch.distributed as dist
    done = []
    # ---- new_group: the even ranks, and every rank but 0 --------------------
    evens = [r for r in range(world) if r % 2 == 0]
    tail = list(range(1, world))
    g_even = dist.new_group(evens, backend="zcomm")
    g_tail = dist.new_group(tail, backend="zcomm")
    if rank in evens:
        t = torch.full((7,), float(rank + 1))
        dist.all_reduce(t, group=g_even)
        want = float(sum(r + 1 for r in evens))
        assert torch.equal(t, torch.full((7,), want)), (t, want)
        assert dist.get_world_size(g_even) == len(evens)
        done.append("new_group evens")
    if rank in tail:
        t = torch.arange(5, dtype=torch.int64) * rank
        dist.broadcast(t, src=tail[-1], group=g_tail)
        assert torch.equal(t, torch.arange(5, dtype=torch.int64) * tail[-1])
        done.append("new_group tail")
    # the world group still works after (and between) the subgroups
    t = torch.ones(4)
    dist.all_reduce(t)
    assert torch.equal(t, torch.full((4,), float(world)))
    # ---- async ops: many in flight, completed by wait() and futures ---------
    works, tensors = [], []
    for i in range(8):
        x = torch.arange(1000, dtype=torch.float32) + rank * i
        tensors.append(x)
        works.append(dist.all_reduce(x, async_op=True))
    futs = [w.get_future() for w in works[:4]]
    for i, f in enumerate(futs):
        out = f.wait()[0]
        want = torch.arange(1000, dtype=torch.float32) * world + i * sum(range(world))
        assert torch.equal(out, want), f"future {i}"
    for i, w in enumerate(works[4:], start=4):
        assert w.wait()
        assert w.is_completed()
        want = torch.arange(1000, dtype=torch.float32) * world + i * sum(range(world))
        assert torch.equal(tensors[i], want), f"work {i}"
    chained = dist.all_reduce(torch.ones(3), async_op=True).get_future().then(
        lambda f: f.value()[0] * 2)
    assert torch.equal(chained.wait(), torch.full((3,), 2.0 * world))
    # A future's callback runs on the thread that completed the work and may
    # queue further operations (DDP's communication hooks do).
    second = []

    def hook(f):
        y = f.value()[0].clone()
        second.append((y, dist.all_reduce(y, async_op=True)))
        return f.value()[0]
    first = dist.all_reduce(torch.ones(3), async_op=True).get_future().then(hook)
    assert torch.equal(first.wait(), torch.full((3,), float(world)))
    y, w2 = second[0]
    w2.wait()
    assert torch.equal(y, torch.full((3,), float(world * world)))
    # A group destroyed with operations queued runs them first; their Works
    # outlive it.
    g_tmp = dist.new_group(list(range(world)))
    queued = [torch.full((7,), float(rank + i)) for i in range(5)]
    tmp_works = [dist.all_reduce(q, group=g_tmp, async_op=True) for q in queued]
    dist.destroy_process_group(g_tmp)
    del g_tmp
    for i, (q, w) in enumerate(zip(queued, tmp_works)):
        assert w.wait()
        assert torch.equal(q, torch.full((7,), float(sum(range(world)) + i * world))), i
    b = dist.barrier(async_op=True)
    b.wait()
    # The caller does not wait on the network: rank 1 joins the allreduce only
    # after rank 0's call has returned (else this would never complete).
    store = dist.distributed_c10d._get_default_store()
    if rank == 0:
        x = torch.ones(5)
        w = dist.all_reduce(x, async_op=True)
        assert not w.is_completed(), "completed before rank 1 took part"
        store.set("zc_test_issued", "1")
        w.wait()
    else:
        if rank == 1:
            store.wait(["zc_test_issued"])
        x = torch.ones(5)
        dist.all_reduce(x)
    assert torch.equal(x, torch.full((5,), float(world)))
    done.append("async")
    # ---- point to point ring: isend/irecv both directions at once ----------
    right, left = (rank + 1) % world, (rank - 1) % world
    for n in (3, 5000, 300001):  # eager and rendezvous sizes
        send = torch.arange(n, dtype=torch.float64) + rank
        recv = torch.empty(n, dtype=torch.float64)
        reqs = [dist.isend(send, right, tag=n % 7), dist.irecv(recv, left, tag=n % 7)]
        for r in reqs:
            r.wait()
        assert torch.equal(recv, torch.arange(n, dtype=torch.float64) + left), n
    # blocking, non-contiguous receive
    if rank == 0:
        dist.send(torch.arange(12, dtype=torch.int32), 1)
    elif rank == 1:
        base = torch.zeros(12, 2, dtype=torch.int32)
        dist.recv(base[:, 1], 0)
        assert torch.equal(base[:, 1], torch.arange(12, dtype=torch.int32))
        assert torch.equal(base[:, 0], torch.zeros(12, dtype=torch.int32))
    done.append("p2p")
    # ---- recv from any source: returns the sender (test_any_source.py) ------
    if rank == 0:
        got = []
        for _ in range(world - 1):
            t = torch.empty(3)
            src = dist.recv(t, tag=21)
            assert torch.equal(t, torch.full((3,), float(src))), (src, t)
            got.append(src)
        assert sorted(got) == list(range(1, world)), got
    else:
        dist.send(torch.full((3,), float(rank)), 0, tag=21)
    # ---- a size mismatch fails with an error, not a hang --------------------
    if rank < 2:
        if rank == 0:
            w = dist.isend(torch.ones(10), 1, tag=3)
        else:
            w = dist.irecv(torch.empty(11), 0, tag=3)
        try:
            w.wait()
        except RuntimeError as e:
            assert "zcomm rank" in str(e), str(e)
            if rank == 1:
                assert "recv" in str(e) and "MISMATCH" in str(e).upper(), str(e)
        else:
            assert rank == 0, "the receive of a mismatched size did not fail"
    done.append("mismatch")
    # ---- a receive nobody matches ends at the group's timeout ---------------
    import datetime
    import time
    g_short = dist.new_group(list(range(world)), backend="zcomm",
                             timeout=datetime.timedelta(seconds=2))
    if rank == 0:
        start = time.monotonic()
        w = dist.irecv(torch.empty(4), 1, group=g_short, tag=9)
        try:
            w.wait()
        except RuntimeError as e:
            took = time.monotonic() - start
            assert "zcomm rank 0/" in str(e) and "recv from 1" in str(e), str(e)
            assert "not completed within 2000 ms" in str(e), str(e)
            assert took < 10, took
        else:
            raise AssertionError("an unmatched receive completed")
        done.append("deadline")
    return done


def main():
    h.require_torch()
    for world in (2, 3, 4):
        done = h.run(groups_and_async, world, init="tcp")
        print(f"{world} ranks: " + "; ".join(f"rank {r}: {', '.join(d)}"
                                             for r, d in enumerate(done)), flush=True)
    print("OK")


if __name__ == "__main__":
    main()
