#!/usr/bin/python3
"""The Python jobs the Slurm and ssh tests run (tests/slurm).

    torch_job.py env   torch.distributed over the "zcomm" backend with
                       init_method="env://" and nothing set by hand: under
                       srun, `import zcomm.torch` derives RANK, WORLD_SIZE,
                       MASTER_ADDR, ... from Slurm's variables; under zcrun,
                       zcrun sets them
    torch_job.py hvd   Horovod's API (import zcomm.torch as hvd): hvd.init()
                       through PMIx under srun, zcrun's store under zcrun

Each checks rank and size against the launcher's own variables, collectives
on rank-dependent tensors, and a few DistributedDataParallel (env) or
DistributedOptimizer (hvd) steps that leave the parameters identical on
every rank. Rank 0 prints "torch_job MODE: N ranks OK". Exit 1 on a wrong
value, with the rank and what differed.
"""
import os
import socket
import sys


def launcher_rank_size():
    for r, s in (("SLURM_PROCID", "SLURM_STEP_NUM_TASKS"), ("ZC_RANK", "ZC_SIZE")):
        if r in os.environ and s in os.environ:
            return int(os.environ[r]), int(os.environ[s]), r
    sys.exit("torch_job: neither srun's nor zcrun's variables are set")


def fail(rank, what):
    print("rank %d: %s" % (rank, what), file=sys.stderr, flush=True)
    sys.exit(1)


def model_and_data(torch, rank):
    torch.manual_seed(0)  # same initial parameters on every rank
    model = torch.nn.Sequential(torch.nn.Linear(7, 5), torch.nn.Tanh(), torch.nn.Linear(5, 1))
    g = torch.Generator().manual_seed(100 + rank)  # each rank its own batch
    return model, torch.randn(16, 7, generator=g), torch.randn(16, 1, generator=g)


def same_everywhere(torch, allgather, rank, world, params, what):
    flat = torch.cat([p.detach().reshape(-1) for p in params])
    got = allgather(flat, world)
    for r in range(world):
        if not torch.equal(got[r], flat):
            fail(rank, "%s: parameters differ from rank %d's" % (what, r))


def run_env(rank, world):
    import torch
    import torch.distributed as dist
    import zcomm.torch  # noqa: F401  (registers "zcomm"; fills env:// from Slurm)
    dist.init_process_group("zcomm", init_method="env://")
    if dist.get_rank() != rank or dist.get_world_size() != world:
        fail(rank, "env:// gave rank %d of %d" % (dist.get_rank(), dist.get_world_size()))
    for n in (1, 7, 1031, 65537):
        x = torch.arange(n, dtype=torch.float64) + rank
        dist.all_reduce(x)
        want = torch.arange(n, dtype=torch.float64) * world + world * (world - 1) / 2
        if not torch.equal(x, want):
            fail(rank, "all_reduce of %d elements" % n)
        b = torch.full((n,), float(rank))
        dist.broadcast(b, src=world - 1)
        if not torch.equal(b, torch.full((n,), float(world - 1))):
            fail(rank, "broadcast of %d elements" % n)
        parts = [torch.empty(n) for _ in range(world)]
        dist.all_gather(parts, torch.full((n,), float(rank * 3)))
        if any(not torch.equal(parts[r], torch.full((n,), float(r * 3))) for r in range(world)):
            fail(rank, "all_gather of %d elements" % n)
    dist.barrier()

    def gather(t, w):
        out = [torch.empty_like(t) for _ in range(w)]
        dist.all_gather(out, t)
        return out

    model, x, y = model_and_data(torch, rank)
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
    for _ in range(3):
        opt.zero_grad()
        torch.nn.functional.mse_loss(ddp(x), y).backward()
        opt.step()
    same_everywhere(torch, gather, rank, world, model.parameters(), "DDP")
    dist.destroy_process_group()
    return "MASTER_ADDR=%s MASTER_PORT=%s" % (os.environ.get("MASTER_ADDR"), os.environ.get("MASTER_PORT"))


def run_hvd(rank, world):
    import torch
    import zcomm.torch as hvd
    hvd.init()
    if hvd.rank() != rank or hvd.size() != world:
        fail(rank, "hvd.init gave rank %d of %d" % (hvd.rank(), hvd.size()))
    lr = os.environ.get("SLURM_LOCALID", os.environ.get("ZC_LOCAL_RANK"))
    if lr is not None and hvd.local_rank() != int(lr):
        fail(rank, "hvd.local_rank() %d, the launcher says %s" % (hvd.local_rank(), lr))
    s = hvd.allreduce(torch.arange(1031, dtype=torch.float64) + rank, op=hvd.Sum, name="s")
    if not torch.equal(s, torch.arange(1031, dtype=torch.float64) * world + world * (world - 1) / 2):
        fail(rank, "hvd.allreduce")
    g = hvd.allgather(torch.full((rank + 1, 2), float(rank)), name="g")
    want = torch.cat([torch.full((r + 1, 2), float(r)) for r in range(world)])
    if not torch.equal(g, want):
        fail(rank, "hvd.allgather")
    b = hvd.broadcast(torch.full((5,), float(rank)), root_rank=world - 1, name="b")
    if not torch.equal(b, torch.full((5,), float(world - 1))):
        fail(rank, "hvd.broadcast")

    model, x, y = model_and_data(torch, rank)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                   named_parameters=model.named_parameters())
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    for _ in range(3):
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()

    def gather(t, w):
        return list(hvd.allgather(t.reshape(1, -1), name="params").reshape(w, -1))

    same_everywhere(torch, gather, rank, world, model.parameters(), "DistributedOptimizer")
    info = "local rank %d of %d" % (hvd.local_rank(), hvd.local_size())
    hvd.shutdown()
    return info


def main():
    mode = sys.argv[1] if len(sys.argv) > 1 else ""
    if mode not in ("env", "hvd"):
        sys.exit("usage: torch_job.py env|hvd")
    rank, world, source = launcher_rank_size()
    info = run_env(rank, world) if mode == "env" else run_hvd(rank, world)
    print("rank %d of %d on %s (%s from %s): %s" % (rank, world, socket.gethostname(), mode, source, info),
          flush=True)
    if rank == 0:
        print("torch_job %s: %d ranks OK" % (mode, world), flush=True)


if __name__ == "__main__":
    main()
