#!/usr/bin/python3
"""DDP's exposed communication time: zcomm against gloo, and zcomm's engine.

    zcrun -np 2 /usr/bin/python3 perf/exposed_comm_bench.py [--models mlp25m,vgg_fc]
        [--rounds 5] [--steps 5] [--batch 8] [--json FILE]

(PYTHONPATH=<build>/python.) On 2 cores a training step is mostly compute,
so throughput ratios hide the communication. This measures what the
communication adds to a step: the step time of a model trained with
communication minus the step time of the same model, batch and threads
without any (the plain module, no DDP wrapper, no hooks). Four variants of
the same model run in every process, each on its own copy of the weights:

  none         the plain module: forward, backward, SGD step
  ddp-zcomm    DistributedDataParallel on a zcomm process group
  ddp-gloo     DistributedDataParallel on a gloo process group
  engine       zcomm.torch's DistributedOptimizer (the Horovod-style engine)

in rounds (none, ddp-zcomm, ddp-gloo, engine; the next round starts one
later), each variant `--steps` steps per round after warm-up; a round's exposed time of a
variant is its median step minus the median step of `none` in the same
round (this VM's speed phases last minutes). Reported per model: the median
step of each variant and min/median/max over rounds of the exposed times
and of their ratios (ddp-zcomm / ddp-gloo, engine / ddp-gloo; goal <= 0.5).
Every rank's step is timed between barriers, and the slowest rank counts.

Models: mlp25m (a 25.2M-parameter MLP, 1024-4096-4096-1024-10) and vgg_fc
(VGG-16's classifier, 25088-4096-4096-1000: 123.6M parameters, the large
fully-connected layers of the paper's VGG-16). DDP uses
gradient_as_bucket_view (no second copy of the gradients) and the default
25 MiB buckets. Loopback only; torch uses one thread per rank.
"""
import argparse
import json
import os
import socket
import statistics
import sys
import time


def make_model(torch, kind):
    nn = torch.nn
    if kind == "mlp25m":
        return nn.Sequential(nn.Linear(1024, 4096), nn.ReLU(), nn.Linear(4096, 4096), nn.ReLU(),
                             nn.Linear(4096, 1024), nn.ReLU(), nn.Linear(1024, 10)), 1024, 10
    if kind == "vgg_fc":
        return nn.Sequential(nn.Linear(25088, 4096), nn.ReLU(), nn.Linear(4096, 4096), nn.ReLU(),
                             nn.Linear(4096, 1000)), 25088, 1000
    raise ValueError("unknown model %s" % kind)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Variant:
    """One copy of the model and the way its gradients are exchanged."""

    def __init__(self, name, torch, hvd, kind, group):
        from torch.nn.parallel import DistributedDataParallel as DDP
        torch.manual_seed(0)
        model, self.width, self.classes = make_model(torch, kind)
        self.name = name
        if name.startswith("ddp"):
            model = DDP(model, process_group=group, gradient_as_bucket_view=True)
        self.model = model
        opt = torch.optim.SGD(model.parameters(), lr=0.001)
        if name == "engine":
            opt = hvd.DistributedOptimizer(opt, named_parameters=model.named_parameters())
        self.opt = opt

    def step(self, torch, x, y):
        loss = torch.nn.functional.cross_entropy(self.model(x), y)
        self.opt.zero_grad()
        loss.backward()
        self.opt.step()


def timed_steps(torch, dist, variant, x, y, steps, sync):
    times = []
    for _ in range(steps):
        dist.barrier(group=sync)
        t0 = time.perf_counter()
        variant.step(torch, x, y)
        times.append(time.perf_counter() - t0)
    # the slowest rank's step
    v = torch.tensor(times, dtype=torch.float64)
    dist.all_reduce(v, op=dist.ReduceOp.MAX, group=sync)
    return statistics.median(v.tolist())


def bench_model(torch, dist, hvd, kind, groups, args):
    names = ["none", "ddp-zcomm", "ddp-gloo", "engine"]
    variants = {n: Variant(n, torch, hvd, kind, groups.get(n.split("-")[-1])) for n in names}
    params = sum(p.numel() for p in variants["none"].model.parameters())
    w, c = variants["none"].width, variants["none"].classes
    torch.manual_seed(1 + dist.get_rank())
    x, y = torch.randn(args.batch, w), torch.randint(0, c, (args.batch,))
    sync = groups["gloo"]
    for n in names:  # warm-up: DDP's first steps build its buckets
        timed_steps(torch, dist, variants[n], x, y, 2, sync)
    rounds = []
    for i in range(args.rounds):
        order = names[i % len(names):] + names[:i % len(names)]  # each goes first in turn
        rounds.append({n: timed_steps(torch, dist, variants[n], x, y, args.steps, sync)
                       for n in order})
    return {"model": kind, "params": params, "batch_per_rank": args.batch,
            "ranks": dist.get_world_size(), "rounds": rounds}


def mmm(v):
    return (min(v), statistics.median(v), max(v))


def report(res):
    for m in res:
        rs = m["rounds"]
        print("\n== %s (%.1fM parameters), %d ranks, batch %d per rank: step times in ms, "
              "median over %d rounds" % (m["model"], m["params"] / 1e6, m["ranks"],
                                         m["batch_per_rank"], len(rs)))
        for n in ("none", "ddp-zcomm", "ddp-gloo", "engine"):
            print("  %-10s step %9.1f ms" % (n, 1e3 * statistics.median(r[n] for r in rs)))
        exp = {n: [r[n] - r["none"] for r in rs] for n in ("ddp-zcomm", "ddp-gloo", "engine")}
        for n, v in exp.items():
            print("  exposed %-10s min %8.1f  median %8.1f  max %8.1f ms"
                  % ((n,) + tuple(1e3 * t for t in mmm(v))))
        for a in ("ddp-zcomm", "engine"):
            ratios = [za / g for za, g in zip(exp[a], exp["ddp-gloo"]) if g > 0]
            if ratios:
                print("  exposed %s / ddp-gloo: min %.2f  median %.2f  max %.2f (goal <= 0.5: %s)"
                      % ((a,) + mmm(ratios) + ("met" if statistics.median(ratios) <= 0.5
                                               else "NOT met",)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default="mlp25m,vgg_fc")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=5, help="timed steps per variant and round")
    ap.add_argument("--batch", type=int, default=8, help="samples per rank and step")
    ap.add_argument("--json", help="rank 0 writes the results here")
    args = ap.parse_args()
    try:
        import torch
        import torch.distributed as dist
    except ImportError:
        print("SKIP: torch is not installed")
        sys.exit(77)
    import zcomm.torch as hvd
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    os.environ.setdefault("ZC_SOCKET_IFNAME", "lo")
    torch.set_num_threads(1)
    hvd.init()
    port = hvd.broadcast_object(free_port() if hvd.rank() == 0 else None, root_rank=0)
    dist.init_process_group("gloo", init_method="tcp://127.0.0.1:%d" % port, rank=hvd.rank(),
                            world_size=hvd.size())
    ranks = list(range(hvd.size()))
    groups = {"gloo": dist.new_group(ranks, backend="gloo"),
              "zcomm": dist.new_group(ranks, backend="zcomm")}
    res = [bench_model(torch, dist, hvd, kind, groups, args) for kind in args.models.split(",")]
    if hvd.rank() == 0:
        report(res)
        if args.json:
            with open(args.json, "w") as f:
                json.dump(res, f, indent=1)
    dist.destroy_process_group()
    hvd.shutdown()


if __name__ == "__main__":
    main()
