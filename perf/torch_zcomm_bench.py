#!/usr/bin/python3
"""torch.distributed on zcomm vs gloo, side by side in the same processes.

    PYTHONPATH=build/python /usr/bin/python3 perf/torch_zcomm_bench.py [--ranks 2,4] [--quick]
        [--ops all_reduce,broadcast,all_gather] [--async] [--no-ddp]

One job per rank count; its default group is gloo and a second group over the
same ranks is zcomm, so both run on the same processes and the measurements
alternate pair by pair (zcomm, gloo, zcomm, gloo, ...): the VM's speed phases
hit both alike. Reported: the time of dist.all_reduce (and, with --ops,
broadcast and all_gather; with --async, each as async_op=True followed by
wait()) per call, float32, 8 B to 64 MiB, as min/median/max over the pairs, and DDP training throughput (samples/s) of a
~25M-parameter MLP and a small one. Loopback only (ZC_SOCKET_IFNAME=lo,
GLOO_SOCKET_IFNAME=lo); torch uses one thread per rank (ranks >= cores).
"""
import argparse
import json
import multiprocessing as mp
import os
import socket
import statistics
import time

SIZES = [8 * 4 ** i for i in range(12)] + [64 << 20]  # 8 B ... 32 MiB, 64 MiB


def human(n):
    for unit in ("B", "KiB", "MiB"):
        if n < 1024 or unit == "MiB":
            return f"{n:g} {unit}" if unit == "B" else f"{n:.0f} {unit}"
        n /= 1024


def make_call(dist, torch, op, t, world, async_op):
    """One call of op on t, as users write it; returns f(group)."""
    if op == "all_reduce":
        fn = lambda g: dist.all_reduce(t, group=g, async_op=async_op)  # noqa: E731
    elif op == "broadcast":
        fn = lambda g: dist.broadcast(t, src=0, group=g, async_op=async_op)  # noqa: E731
    elif op == "all_gather":
        outs = [torch.empty_like(t) for _ in range(world)]
        fn = lambda g: dist.all_gather(outs, t, group=g, async_op=async_op)  # noqa: E731
    else:
        raise ValueError(op)
    if async_op:
        return lambda g: fn(g).wait()
    return fn


def time_calls(dist, call, group, iters):
    dist.barrier(group=group)
    start = time.perf_counter()
    for _ in range(iters):
        call(group)
    return (time.perf_counter() - start) / iters


def bench_op(rank, dist, torch, groups, pairs, sizes, op, async_op):
    rows = []
    for size in sizes:
        n = max(size // 4, 1)
        t = torch.ones(n)
        call = make_call(dist, torch, op, t, dist.get_world_size(), async_op)
        iters = max(1, min(100, (4 << 20) // size))
        times = {name: [] for name in groups}
        for name, g in groups.items():  # warm-up: connections, buffers
            time_calls(dist, call, g, 1)
        for _ in range(pairs):
            for name, g in groups.items():
                times[name].append(time_calls(dist, call, g, iters))
        # Every rank's time counts: take the slowest rank of each pair.
        agg = {}
        for name in groups:
            v = torch.tensor(times[name], dtype=torch.float64)
            dist.all_reduce(v, op=dist.ReduceOp.MAX, group=groups["gloo"])
            agg[name] = v.tolist()
        rows.append({"bytes": size, **{name: agg[name] for name in groups}})
    return rows


def make_model(torch, kind):
    nn = torch.nn
    if kind == "large":  # 1024*4096 + 4096*4096 + 4096*1024 + ... = ~25.2M parameters
        return nn.Sequential(nn.Linear(1024, 4096), nn.ReLU(), nn.Linear(4096, 4096), nn.ReLU(),
                             nn.Linear(4096, 1024), nn.ReLU(), nn.Linear(1024, 10)), 1024
    return nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 64), nn.ReLU(),
                         nn.Linear(64, 10)), 64


def bench_ddp(rank, dist, torch, groups, pairs, kind, batch, steps):
    from torch.nn.parallel import DistributedDataParallel as DDP
    ddps, opts = {}, {}
    for name, g in groups.items():
        torch.manual_seed(0)
        model, width = make_model(torch, kind)
        ddps[name] = DDP(model, process_group=g)
        opts[name] = torch.optim.SGD(ddps[name].parameters(), lr=0.01)
    params = sum(p.numel() for p in ddps["gloo"].parameters())
    x, y = torch.randn(batch, width), torch.randint(0, 10, (batch,))

    def run(name, n):
        dist.barrier(group=groups[name])
        start = time.perf_counter()
        for _ in range(n):
            loss = torch.nn.functional.cross_entropy(ddps[name](x), y)
            opts[name].zero_grad()
            loss.backward()
            opts[name].step()
        return time.perf_counter() - start

    for name in groups:
        run(name, 2)  # warm-up (DDP's first iteration rebuilds buckets)
    rates = {name: [] for name in groups}
    for _ in range(pairs):
        for name in groups:
            rates[name].append(batch * dist.get_world_size() * steps / run(name, steps))
    agg = {}
    for name in groups:  # the slowest rank's view
        v = torch.tensor(rates[name], dtype=torch.float64)
        dist.all_reduce(v, op=dist.ReduceOp.MIN, group=groups["gloo"])
        agg[name] = v.tolist()
    return {"model": kind, "params": params, "batch_per_rank": batch, **agg}


def rank_main(rank, world, port, args, q):
    os.environ.update(ZC_SOCKET_IFNAME="lo", GLOO_SOCKET_IFNAME="lo")
    import torch
    import torch.distributed as dist
    import zcomm.torch  # noqa: F401
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=world)
    groups = {"zcomm": dist.new_group(list(range(world)), backend="zcomm"),
              "gloo": dist.new_group(list(range(world)), backend="gloo")}
    sizes = [s for s in SIZES if s <= args.max_bytes]
    out = {"ranks": world, "async": args.async_op,
           "ops": {op: bench_op(rank, dist, torch, groups, args.pairs, sizes, op, args.async_op)
                   for op in args.ops.split(",")}}
    # "allreduce": the key earlier result files use for dist.all_reduce.
    if "all_reduce" in out["ops"]:
        out["allreduce"] = out["ops"]["all_reduce"]
    out["ddp"] = [] if args.no_ddp else [
        bench_ddp(rank, dist, torch, groups, args.pairs, "small", 32, 50),
        bench_ddp(rank, dist, torch, groups, max(2, args.pairs // 2), "large", 8,
                  args.large_steps)]
    if rank == 0:
        q.put(out)
    dist.destroy_process_group()


def report(res):
    world = res["ranks"]
    how = " (async_op=True, then wait())" if res.get("async") else ""
    for op, rows in res["ops"].items():
        print(f"\n== {world} ranks: dist.{op}{how} float32, time per call in us "
              f"(min / median / max over pairs; slowest rank)")
        print(f"{'size':>9} | {'zcomm':>26} | {'gloo':>26} | zcomm/gloo (median)")
        for row in rows:
            cells = []
            for name in ("zcomm", "gloo"):
                v = [x * 1e6 for x in row[name]]
                cells.append(f"{min(v):8.1f} {statistics.median(v):8.1f} {max(v):8.1f}")
            ratio = statistics.median(row["zcomm"]) / statistics.median(row["gloo"])
            print(f"{human(row['bytes']):>9} | {cells[0]:>26} | {cells[1]:>26} | {ratio:.2f}")
    if not res["ddp"]:
        return
    print(f"== {world} ranks: DDP training throughput, samples/s (min / median / max)")
    for d in res["ddp"]:
        z, g = d["zcomm"], d["gloo"]
        print(f"{d['model']:>6} model ({d['params'] / 1e6:.2f}M params, batch {d['batch_per_rank']}"
              f"/rank): zcomm {min(z):.1f} / {statistics.median(z):.1f} / {max(z):.1f}   "
              f"gloo {min(g):.1f} / {statistics.median(g):.1f} / {max(g):.1f}   "
              f"zcomm/gloo {statistics.median(z) / statistics.median(g):.2f}")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--ranks", default="2,4")
    p.add_argument("--pairs", type=int, default=7, help="alternating zcomm/gloo pairs")
    p.add_argument("--max-bytes", type=int, default=64 << 20)
    p.add_argument("--large-steps", type=int, default=3)
    p.add_argument("--quick", action="store_true", help="3 pairs, up to 4 MiB")
    p.add_argument("--ops", default="all_reduce",
                   help="comma-separated: all_reduce, broadcast, all_gather")
    p.add_argument("--async", dest="async_op", action="store_true",
                   help="each call with async_op=True, then wait()")
    p.add_argument("--no-ddp", action="store_true", help="collectives only")
    p.add_argument("--json", help="write the results here")
    args = p.parse_args()
    if args.quick:
        args.pairs, args.max_bytes = 3, 4 << 20
    results = []
    for world in (int(x) for x in args.ranks.split(",")):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        ctx = mp.get_context("spawn")
        q = ctx.Queue()
        procs = [ctx.Process(target=rank_main, args=(r, world, port, args, q))
                 for r in range(world)]
        for pr in procs:
            pr.start()
        res = q.get(timeout=3600)
        for pr in procs:
            pr.join()
        results.append(res)
        report(res)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
