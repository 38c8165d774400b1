"""zcomm.torch.empty and zeros: CPU tensors in the registered memory of a
zcomm process group, on 2 and 3 ranks. Shapes and dtypes; all_reduce of
every dtype on them, odd sizes and a large vector repeated (the zero-copy
round on shared memory); registered and plain tensors mixed across ranks;
broadcast and all_gather into them; a subgroup's tensors; a tensor that
outlives its group; and the errors (a gloo group, a negative size)."""
import zc_torch_harness as h

DTYPES = ["uint8", "int8", "int16", "int32", "int64", "bool", "float16", "bfloat16", "float32",
          "float64"]


def data(torch, rank, n, dtype, salt=0):
    """Rank- and index-dependent values, exact in every dtype when summed over 3 ranks."""
    v = (torch.arange(n, dtype=torch.int64) * 3 + rank * 7 + salt) % 11
    return (v % 2 == 0) if dtype == torch.bool else v.to(dtype)


def summed(torch, world, n, dtype, salt=0):
    parts = [data(torch, r, n, dtype, salt) for r in range(world)]
    if dtype == torch.bool:
        out = parts[0].clone()
        for p in parts[1:]:
            out |= p
        return out
    return torch.stack([p.to(torch.int64) for p in parts]).sum(0).to(dtype)


def check_registered(rank, world):
    import gc

    import torch
    import torch.distributed as dist
    import zcomm.torch as zt
    checks = 0

    def same(got, want, what):
        nonlocal checks
        assert got.dtype == want.dtype and torch.equal(got, want), \
            f"rank {rank}: {what}: got {got.flatten()[:8]} want {want.flatten()[:8]}"
        checks += 1

    for name in DTYPES:
        dt = getattr(torch, name)
        for size in [(), (0,), (1,), (13,), (3, 5), (2, 3, 4)]:
            t = zt.zeros(*size, dtype=dt)
            assert t.shape == torch.Size(size) and t.dtype == dt and t.is_contiguous() \
                and t.device.type == "cpu", f"{name} {size}: {t.shape} {t.dtype}"
            same(t, torch.zeros(size, dtype=dt), f"zeros {size} {name}")
        same(zt.empty((3, 5), dtype=dt).zero_(), torch.zeros(3, 5, dtype=dt),
             f"empty((3, 5)) {name}")
        # all_reduce (in place, as torch's) across the zero-copy size.
        for k, n in enumerate([1, 13, 4099, 70001]):
            t = zt.empty(n, dtype=dt)
            t.copy_(data(torch, rank, n, dt, k))
            dist.all_reduce(t)
            same(t, summed(torch, world, n, dt, k), f"all_reduce {name} n={n}")
    assert zt.empty(4).dtype == torch.get_default_dtype()

    # A large vector, repeated on the same tensor.
    n = (1 << 20) + 3
    t = zt.empty(n, dtype=torch.float32)
    for it in range(3):
        t.copy_(data(torch, rank, n, torch.float32, it))
        dist.all_reduce(t)
        same(t, summed(torch, world, n, torch.float32, it), f"all_reduce {n} iteration {it}")
    # Registered on every rank but rank 0 (the sharded rounds for everyone).
    t = torch.empty(70001) if rank == 0 else zt.empty(70001)
    t.copy_(data(torch, rank, 70001, torch.float32, 5))
    dist.all_reduce(t)
    same(t, summed(torch, world, 70001, torch.float32, 5), "all_reduce, rank 0 plain")
    # Broadcast and all_gather into registered tensors.
    b = zt.zeros(4099, dtype=torch.int64)
    if rank == world - 1:
        b.copy_(data(torch, rank, 4099, torch.int64))
    dist.broadcast(b, src=world - 1)
    same(b, data(torch, world - 1, 4099, torch.int64), "broadcast")
    outs = [zt.empty(4099, dtype=torch.int32) for _ in range(world)]
    dist.all_gather(outs, data(torch, rank, 4099, torch.int32))
    for r in range(world):
        same(outs[r], data(torch, r, 4099, torch.int32), f"all_gather part {r}")

    # A subgroup's tensors, and a tensor that outlives its group.
    sub = dist.new_group([0, 1])
    if rank in (0, 1):
        s = zt.empty(70001, group=sub).fill_(1)
        dist.all_reduce(s, group=sub)
        same(s, torch.full((70001,), 2.0), "subgroup all_reduce")
    again = dist.new_group(list(range(world)), backend="zcomm")
    kept = zt.empty(4099, dtype=torch.float64, group=again)
    kept.copy_(data(torch, rank, 4099, torch.float64))
    dist.all_reduce(kept, group=again)
    dist.destroy_process_group(again)
    del again  # the group object goes: its communicator is finalized
    gc.collect()
    kept += 1  # the memory is still there
    same(kept, summed(torch, world, 4099, torch.float64) + 1, "a tensor after its group")
    dist.all_reduce(kept)  # through the default group: plain memory to it
    same(kept, (summed(torch, world, 4099, torch.float64) + 1) * world,
         "a tensor after its group, reduced by another")
    del kept

    # Errors on this rank alone.
    gloo = dist.new_group(backend="gloo")
    for bad, want in ((lambda: zt.empty(3, group=gloo), "not zcomm"),
                      (lambda: zt.empty(4, -1), "negative")):
        try:
            bad()
            raise AssertionError(f"rank {rank}: accepted, want an error naming '{want}'")
        except (ValueError, RuntimeError) as e:
            assert want in str(e) and ("rank" in str(e) or want == "not zcomm"), str(e)
            checks += 1
    return checks


def main():
    h.require_torch()
    total = 0
    for world, init in ((2, "tcp"), (3, "file")):
        counts = h.run(check_registered, world, init=init, timeout=300)
        print(f"{world} ranks ({init}://): {counts[0]} checks passed on rank 0", flush=True)
        total += sum(counts)
    print(f"OK: {total} checks")


if __name__ == "__main__":
    main()
