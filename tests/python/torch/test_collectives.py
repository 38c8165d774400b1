"""Every ProcessGroup collective of the zcomm backend against a reference
computed from every rank's data, on 2, 3 and 4 ranks (tcp://, file:// and
env:// rendezvous), with rank- and index-dependent data, odd sizes, every
dtype zcomm has, every reduce op, and non-contiguous tensors."""
import sys

import zc_torch_harness as h

DTYPES = ["uint8", "int8", "int16", "int32", "int64", "bool", "float16", "bfloat16", "float32",
          "float64"]
OPS = ["SUM", "AVG", "PRODUCT", "MIN", "MAX", "BAND", "BOR", "BXOR"]


def data(torch, rank, n, dtype, kind="plain", salt=0):
    """Rank- and index-dependent values, small enough to be exact in every
    dtype (also summed or multiplied over 4 ranks)."""
    i = torch.arange(n, dtype=torch.int64)
    if dtype == torch.bool:
        # Mostly False for the "or" ops (SUM, MAX, BOR), mostly True for the
        # "and" ops (PRODUCT, MIN, BAND): reductions over ranks mix both.
        h = (i * 3 + rank * 7 + salt) % 4
        return (h != 0) if kind == "prod" else (h % 2 == 0) if kind == "bits" else (h == 0)
    if kind == "prod":
        v = (i + rank + salt) % 3 + 1
    elif kind == "bits":
        v = (i * 11 + rank * 37 + salt) % 128
    else:
        v = (i * 3 + rank * 7 + salt) % 11
        if dtype not in (torch.uint8,):
            v = v - 5
    return v.to(dtype)


def reference(torch, world, n, dtype, op):
    kind = "prod" if op == "PRODUCT" else "bits" if op.startswith("B") else "plain"
    stack = torch.stack([data(torch, r, n, dtype, kind).to(torch.float64 if dtype.is_floating_point
                                                            else torch.int64)
                         for r in range(world)])
    if op in ("SUM", "AVG"):
        out = stack.sum(0)
        if op == "AVG":
            out = out / world
    elif op == "PRODUCT":
        out = stack.prod(0)
    elif op == "MIN":
        out = stack.min(0).values
    elif op == "MAX":
        out = stack.max(0).values
    else:
        out = stack[0].clone()
        for r in range(1, world):
            out = {"BAND": out & stack[r], "BOR": out | stack[r], "BXOR": out ^ stack[r]}[op]
    return out.to(dtype), kind


def close(torch, got, want, what):
    assert got.dtype == want.dtype, f"{what}: dtype {got.dtype} != {want.dtype}"
    assert got.shape == want.shape, f"{what}: shape {tuple(got.shape)} != {tuple(want.shape)}"
    if want.dtype.is_floating_point:
        tol = {torch.float16: 1e-2, torch.bfloat16: 5e-2}.get(want.dtype, 1e-6)
        ok = torch.allclose(got.double(), want.double(), rtol=tol, atol=tol)
    else:
        ok = torch.equal(got, want)
    if not ok:
        bad = (got.double() - want.double()).abs().argmax().item()
        raise AssertionError(f"{what}: element {bad}: got {got.flatten()[bad].item()}, "
                             f"want {want.flatten()[bad].item()}")


def noncontig(torch, t):
    """A non-contiguous view holding t's values (every other column)."""
    base = torch.zeros(t.numel(), 2, dtype=t.dtype)
    base[:, 0] = t
    view = base[:, 0]
    assert not view.is_contiguous()
    return view


def check_all(rank, world):
    import torch
    import torch.distributed as dist
    checks = 0
    for name in DTYPES:
        dt = getattr(torch, name)
        floating = dt.is_floating_point
        # ---- allreduce, every op, odd size, contiguous and not ------------
        for op in OPS:
            if (op == "AVG" and not floating) or (op.startswith("B") and floating):
                t = data(torch, rank, 5, dt)
                try:
                    dist.all_reduce(t, op=getattr(dist.ReduceOp, op))
                except RuntimeError as e:
                    assert "zcomm rank" in str(e) and "allreduce" in str(e), str(e)
                    checks += 1
                    continue
                raise AssertionError(f"allreduce {op} on {name} did not fail")
            for n, contiguous in ((37, True), (1, True), (29, False)):
                want, kind = reference(torch, world, n, dt, op)
                t = data(torch, rank, n, dt, kind)
                if not contiguous:
                    t = noncontig(torch, t)
                dist.all_reduce(t, op=getattr(dist.ReduceOp, op))
                close(torch, t, want, f"allreduce {op} {name} n={n} contiguous={contiguous}")
                checks += 1
        n = 23
        want_sum, _ = reference(torch, world, n, dt, "SUM")
        # ---- allreduce_coalesced ------------------------------------------
        ts = [data(torch, rank, n, dt), data(torch, rank, n, dt)[:7]]
        dist.all_reduce_coalesced(ts)
        close(torch, ts[0], want_sum, f"allreduce_coalesced {name} [0]")
        close(torch, ts[1], want_sum[:7], f"allreduce_coalesced {name} [1]")
        # ---- broadcast from every root ------------------------------------
        for root in range(world):
            t = data(torch, rank, n, dt)
            if rank != root:
                t = noncontig(torch, t)
            dist.broadcast(t, src=root)
            close(torch, t, data(torch, root, n, dt), f"broadcast {name} root {root}")
        # ---- reduce ------------------------------------------------------
        root = world - 1
        t = data(torch, rank, n, dt)
        dist.reduce(t, dst=root, op=dist.ReduceOp.SUM)
        close(torch, t, want_sum if rank == root else data(torch, rank, n, dt), f"reduce {name}")
        # ---- allgather and _allgather_base ---------------------------------
        outs = [torch.empty(n, dtype=dt) for _ in range(world)]
        outs[-1] = noncontig(torch, torch.empty(n, dtype=dt))
        dist.all_gather(outs, data(torch, rank, n, dt))
        for r in range(world):
            close(torch, outs[r], data(torch, r, n, dt), f"allgather {name} from {r}")
        # Plain outputs: a gather of up to 64 KiB lands in the group's
        # scratch buffer, a larger one in a tensor of its own; sizes that grow
        # and shrink again reuse the scratch (no stale element may show).
        for m in (1, 23, 8209, 40009, 0, 5, 23):
            outs = [torch.full((m,), 1, dtype=dt) for _ in range(world)]
            dist.all_gather(outs, data(torch, rank, m, dt, salt=m))
            for r in range(world):
                close(torch, outs[r], data(torch, r, m, dt, salt=m), f"allgather {name} m={m} from {r}")
        # Larger plain outputs are gathered into straight (zc_allgather_list):
        # in place (the input is outputs[rank], the outputs views of one
        # tensor). Outputs that share memory, or an input inside another
        # output, take the gathered tensor: as with gloo, every input is
        # read before any output is written, and the later block wins.
        m = 70001  # > 64 KiB for every dtype at 2 ranks
        big = torch.full((world * m,), 1, dtype=dt)
        outs = list(big.split(m))
        outs[rank].copy_(data(torch, rank, m, dt, salt=3))
        dist.all_gather(outs, outs[rank])
        close(torch, big, torch.cat([data(torch, r, m, dt, salt=3) for r in range(world)]),
              f"allgather in place {name}")
        outs = [torch.full((m,), 1, dtype=dt) for _ in range(world)]
        outs[0] = outs[-1]
        dist.all_gather(outs, data(torch, rank, m, dt, salt=4))
        for r in range(1, world):
            close(torch, outs[r], data(torch, r, m, dt, salt=4), f"allgather shared outputs {name} [{r}]")
        outs = [torch.full((m,), 1, dtype=dt) for _ in range(world)]
        src = outs[(rank + 1) % world]
        src.copy_(data(torch, rank, m, dt, salt=5))
        dist.all_gather(outs, src)
        for r in range(world):
            close(torch, outs[r], data(torch, r, m, dt, salt=5), f"allgather input in another output {name} [{r}]")
        flat = torch.empty(world * n, dtype=dt)
        dist._all_gather_base(flat, data(torch, rank, n, dt))
        close(torch, flat, torch.cat([data(torch, r, n, dt) for r in range(world)]),
              f"_allgather_base {name}")
        # ---- gather and scatter -------------------------------------------
        root = 1 % world
        outs = [torch.empty(n, dtype=dt) for _ in range(world)] if rank == root else None
        dist.gather(data(torch, rank, n, dt), gather_list=outs, dst=root)
        if rank == root:
            for r in range(world):
                close(torch, outs[r], data(torch, r, n, dt), f"gather {name} from {r}")
        out = noncontig(torch, torch.empty(n, dtype=dt))
        ins = [data(torch, r, n, dt, salt=root) for r in range(world)] if rank == root else None
        dist.scatter(out, scatter_list=ins, src=root)
        close(torch, out, data(torch, rank, n, dt, salt=root), f"scatter {name}")
        # ---- reduce_scatter and _reduce_scatter_base ----------------------
        full_want, _ = reference(torch, world, world * n, dt, "SUM")
        ins = list(data(torch, rank, world * n, dt).split(n))
        out = torch.empty(n, dtype=dt)
        dist.reduce_scatter(out, ins)
        close(torch, out, full_want[rank * n:(rank + 1) * n], f"reduce_scatter {name}")
        out = torch.empty(n, dtype=dt)
        dist._reduce_scatter_base(out, data(torch, rank, world * n, dt))
        close(torch, out, full_want[rank * n:(rank + 1) * n], f"_reduce_scatter_base {name}")
        # ---- alltoall_base, equal and uneven splits; alltoall -------------
        rows = 3
        inp = data(torch, rank, world * rows * 2, dt).view(world * rows, 2)
        out = torch.empty_like(inp)
        dist.all_to_all_single(out, inp)
        for r in range(world):
            src = data(torch, r, world * rows * 2, dt).view(world * rows, 2)
            close(torch, out[r * rows:(r + 1) * rows], src[rank * rows:(rank + 1) * rows],
                  f"alltoall_base equal {name} from {r}")
        # rank r sends (r + d + 1) rows to rank d
        in_splits = [rank + d + 1 for d in range(world)]
        out_splits = [s + rank + 1 for s in range(world)]
        inp = data(torch, rank, sum(in_splits) * 2, dt).view(-1, 2)
        out = torch.empty(sum(out_splits), 2, dtype=dt)
        dist.all_to_all_single(out, inp, output_split_sizes=out_splits,
                               input_split_sizes=in_splits)
        off = 0
        for s in range(world):
            s_splits = [s + d + 1 for d in range(world)]
            src = data(torch, s, sum(s_splits) * 2, dt).view(-1, 2)
            start = sum(s_splits[:rank])
            close(torch, out[off:off + out_splits[s]], src[start:start + s_splits[rank]],
                  f"alltoall_base uneven {name} from {s}")
            off += out_splits[s]
        ins = [data(torch, rank, d + 2, dt, salt=d) for d in range(world)]
        outs = [torch.empty(rank + 2, dtype=dt) for _ in range(world)]
        dist.all_to_all(outs, ins)
        for s in range(world):
            close(torch, outs[s], data(torch, s, rank + 2, dt, salt=rank), f"alltoall {name} {s}")
        checks += 12
    # ---- a large float32 allreduce (pipelined algorithms) ------------------
    n = 300007
    t = torch.arange(n, dtype=torch.float32) * (rank + 1) % 1000
    want = sum(torch.arange(n, dtype=torch.float32) * (r + 1) % 1000 for r in range(world))
    dist.all_reduce(t)
    close(torch, t, want, "allreduce large")
    # ---- bool: logical, as gloo and NCCL; min and band are "and" ----------
    flags = torch.tensor([rank == 0, True, False, rank % 2 == 1])
    for op, want in (("SUM", [True, True, False, world > 1]), ("MAX", [True, True, False, world > 1]),
                     ("MIN", [world == 1, True, False, False]),
                     ("PRODUCT", [world == 1, True, False, False]),
                     ("BXOR", [True, world % 2 == 1, False, (world // 2) % 2 == 1])):
        t = flags.clone()
        dist.all_reduce(t, op=getattr(dist.ReduceOp, op))
        close(torch, t, torch.tensor(want), f"bool allreduce {op}")
        checks += 1
    # ---- complex and unsigned 16-bit types torch does not have: clear errors
    # (torch itself views complex as real pairs for allreduce, so that works)
    for call, bad in ((dist.broadcast, torch.ones(3, dtype=torch.complex64)),):
        try:
            call(bad, 0) if call is dist.broadcast else call(bad)
        except RuntimeError as e:
            assert f"zcomm rank {rank}/{world}: " in str(e) and "dtype" in str(e), str(e)
        else:
            raise AssertionError(f"{call.__name__} of {bad.dtype} did not fail")
    z = torch.complex(torch.ones(4), torch.arange(4.0) + rank)
    dist.all_reduce(z)
    close(torch, torch.view_as_real(z), torch.view_as_real(torch.complex(
        torch.full((4,), float(world)), torch.arange(4.0) * world + sum(range(world)))),
        "complex allreduce")
    # ---- barrier; the group still works after the refused calls ------------
    dist.barrier()
    t = torch.ones(3)
    dist.all_reduce(t)
    close(torch, t, torch.full((3,), float(world)), "allreduce after errors")
    return checks + 3


def main():
    h.require_torch()
    total = 0
    for world, init in ((2, "tcp"), (3, "file"), (4, "env")):
        counts = h.run(check_all, world, init=init, timeout=600)
        print(f"{world} ranks ({init}://): {counts[0]} checks passed on every rank", flush=True)
        total += sum(counts)
    print(f"OK: {total} checks")


if __name__ == "__main__":
    main()
