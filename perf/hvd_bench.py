"""zcomm.torch's Horovod API against torch DDP on gloo, side by side.

    /usr/bin/python3 perf/hvd_bench.py [--ranks 2 4] [--pairs 3] [--quick]

(with PYTHONPATH=<build>/python; zcrun from <build>/launcher, or $ZCRUN).

1. Training throughput of examples/hvd_synthetic_benchmark.py (same model,
   batch, steps) with zcomm's engine (DistributedOptimizer) and with
   DistributedDataParallel on gloo, in alternating pairs (engine first, then
   DDP first, ...: the VM has speed phases), for each rank count: "Total
   img/sec" min/median/max and the ratio of medians (goal >= 1.3).
2. The engine's per-step overhead from Python: 128 small float32 tensors
   (odd sizes, 1-2 KiB) allreduced per step through allreduce_async_ +
   synchronize, fusion on (ZC_FUSION_THRESHOLD default) against fusion off
   (ZC_FUSION_THRESHOLD=0), alternating pairs: median step time of rank 0,
   cycles, negotiation collectives per cycle (goal <= 1 in steady state)
   and data collectives per step, from zc_engine_get_stats.
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def zcrun_path():
    if os.environ.get("ZCRUN"):
        return os.environ["ZCRUN"]
    for p in os.environ.get("PYTHONPATH", "").split(os.pathsep):
        cand = os.path.join(os.path.dirname(p.rstrip("/")), "launcher", "zcrun")
        if p and os.path.exists(cand):
            return cand
    return os.path.join(ROOT, "build", "launcher", "zcrun")


def run(n, args, env=None, timeout=600):
    e = dict(os.environ)
    e.setdefault("ZC_SOCKET_IFNAME", "lo")
    e.setdefault("GLOO_SOCKET_IFNAME", "lo")
    e.update(env or {})
    cmd = [zcrun_path(), "-np", str(n), sys.executable] + args
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=e)
    out = p.stdout + p.stderr
    if p.returncode != 0:
        raise SystemExit("FAILED (exit %d): %s\n%s" % (p.returncode, " ".join(cmd), out))
    return out


def mmm(xs):
    return "min %8.2f  median %8.2f  max %8.2f" % (min(xs), statistics.median(xs), max(xs))


def throughput(ranks, pairs, extra):
    bench = os.path.join(ROOT, "examples", "hvd_synthetic_benchmark.py")
    results = {}
    for n in ranks:
        eng, ddp = [], []
        for i in range(pairs):
            order = ("engine", "ddp") if i % 2 == 0 else ("ddp", "engine")
            for kind in order:
                args = [bench] + extra + (["--ddp"] if kind == "ddp" else [])
                out = run(n, args)
                v = float(re.search(r"Total img/sec on \d+ rank\(s\): ([\d.]+)", out).group(1))
                (eng if kind == "engine" else ddp).append(v)
                stat = re.search(r"Engine: .*", out)
                print("  np %d pair %d %-6s total img/sec %7.2f %s" % (
                    n, i, kind, v, stat.group(0) if stat else ""), flush=True)
        ratio = statistics.median(eng) / statistics.median(ddp)
        pair_ratios = [a / b for a, b in zip(eng, ddp)]
        print("np %d  engine  total img/sec: %s" % (n, mmm(eng)))
        print("np %d  DDP-gloo total img/sec: %s" % (n, mmm(ddp)))
        print("np %d  engine / DDP-gloo: %.3f (median of each; per pair %s); goal >= 1.3: %s"
              % (n, ratio, " ".join("%.2f" % r for r in pair_ratios),
                 "met" if ratio >= 1.3 else "NOT met"), flush=True)
        results[n] = (eng, ddp, ratio)
    return results


def overhead(ranks, pairs, steps):
    for n in ranks:
        res = {"on": [], "off": []}
        stats = {"on": [], "off": []}
        for i in range(pairs):
            order = ("on", "off") if i % 2 == 0 else ("off", "on")
            for kind in order:
                env = {"ZC_FUSION_THRESHOLD": "0"} if kind == "off" else {}
                out = run(n, [os.path.abspath(__file__), "--overhead-worker", str(steps)], env)
                m = re.search(r"OVERHEAD median_ms ([\d.]+) cycles_per_step ([\d.]+) "
                              r"neg_per_cycle ([\d.]+) data_per_step ([\d.]+)", out)
                res[kind].append(float(m.group(1)))
                stats[kind].append(tuple(float(m.group(k)) for k in (2, 3, 4)))
        for kind in ("on", "off"):
            c = statistics.median(s[0] for s in stats[kind])
            g = max(s[1] for s in stats[kind])
            d = statistics.median(s[2] for s in stats[kind])
            print("np %d  128 tensors/step, fusion %-3s: step ms %s | cycles/step %.2f, "
                  "negotiation collectives/cycle (max) %.3f, data collectives/step %.1f; "
                  "goal <= 1 per cycle: %s" % (n, kind, mmm(res[kind]), c, g, d,
                                               "met" if g <= 1.0 else "NOT met"), flush=True)


def overhead_worker(steps):
    import torch
    import zcomm.torch as hvd
    hvd.init()
    torch.set_num_threads(1)
    r = hvd.rank()
    ts = [torch.full((257 + 13 * (i % 19),), float(r + i)) for i in range(128)]
    times = []
    for s in range(steps + 5):
        if s == 5:
            s0 = hvd.engine_stats()
        t0 = time.perf_counter()
        hs = [hvd.allreduce_async_(t, name="small.%d" % i, op=hvd.Sum) for i, t in enumerate(ts)]
        for h in hs:
            hvd.synchronize(h)
        if s >= 5:
            times.append(time.perf_counter() - t0)
    s1 = hvd.engine_stats()
    cycles = s1["cycles"] - s0["cycles"]
    neg = s1["negotiation_collectives"] - s0["negotiation_collectives"]
    data = s1["data_collectives"] - s0["data_collectives"]
    if r == 0:
        print("OVERHEAD median_ms %.4f cycles_per_step %.3f neg_per_cycle %.4f data_per_step %.2f"
              % (1e3 * statistics.median(times), cycles / steps, neg / max(1, cycles),
                 data / steps), flush=True)
    hvd.shutdown()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ranks", type=int, nargs="+", default=[2, 4])
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--steps", type=int, default=100, help="overhead: steps per run")
    ap.add_argument("--quick", action="store_true", help="one pair, short runs (a smoke test)")
    ap.add_argument("--only", choices=["throughput", "overhead"])
    ap.add_argument("--overhead-worker", type=int, help=argparse.SUPPRESS)
    ap.add_argument("bench_args", nargs="*",
                    help="passed to hvd_synthetic_benchmark.py (after --)")
    a = ap.parse_args()
    if a.overhead_worker:
        return overhead_worker(a.overhead_worker)
    try:
        import torch  # noqa: F401
    except ImportError:
        print("SKIP: torch is not installed")
        sys.exit(77)
    pairs, steps, extra = a.pairs, a.steps, list(a.bench_args)
    if a.quick:
        pairs, steps = 1, 20
        extra = ["--num-iters", "2", "--num-batches-per-iter", "2", "--num-warmup-batches", "1"] \
            + extra
    print("zcomm.torch (Horovod API) vs DDP on gloo; %d alternating pairs per rank count"
          % pairs, flush=True)
    if a.only in (None, "throughput"):
        throughput(a.ranks, pairs, extra)
    if a.only in (None, "overhead"):
        overhead(a.ranks, pairs, steps)


if __name__ == "__main__":
    main()
