#!/usr/bin/python3
"""zcomm's Python allreduce on numpy's own arrays against arrays in the
communicator's registered memory (Communicator.empty), alternated in one job.

    PYTHONPATH=build/python build/launcher/zcrun -np 2 /usr/bin/python3 \\
        perf/py_registered_bench.py [--sizes 1M,16M,64M] [--rounds 8] [--iters 10]

float32 sum, out of place. Each round times --iters calls on numpy arrays,
then --iters calls on registered ones (after 3 warm-up calls each), for
every size; a call's time is the slowest rank's mean. Prints, per size, the
min / median / max over the rounds of each and of registered / numpy
within a round.
"""
import argparse
import statistics
import sys
import time

import numpy as np
import zcomm


def parse_size(s):
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(s[:-1]) * mult[s[-1].upper()] if s[-1].upper() in mult else int(s)


def time_calls(comm, x, out, iters):
    for _ in range(3):
        comm.allreduce(x, out)
    comm.barrier()
    t0 = time.perf_counter()
    for _ in range(iters):
        comm.allreduce(x, out)
    mean = np.array([(time.perf_counter() - t0) / iters * 1e6])
    comm.allreduce(mean, op="max")
    return float(mean[0])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="1M,16M,64M", help="bytes per rank, K/M/G suffixes")
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--iters", type=int, default=10)
    a = ap.parse_args()
    comm = zcomm.init()
    sizes = [parse_size(s) for s in a.sizes.split(",")]
    res = {s: {"numpy": [], "registered": []} for s in sizes}
    for _ in range(a.rounds):
        for s in sizes:
            n = s // 4
            for kind in ("numpy", "registered"):
                make = np.empty if kind == "numpy" else comm.empty
                x, out = make(n, np.float32), make(n, np.float32)
                x[:] = comm.rank + 1
                res[s][kind].append(time_calls(comm, x, out, a.iters))
                if out[0] != comm.size * (comm.size + 1) / 2:
                    print(f"error: rank {comm.rank}: wrong sum {out[0]}", file=sys.stderr)
                    return 1
                del x, out
    if comm.rank == 0:
        print(f"# allreduce float32 sum, out of place, {comm.size} ranks, {a.rounds} rounds "
              f"of {a.iters} calls; us per call (slowest rank's mean): min / median / max")
        print(f"# {'bytes':>10} {'numpy arrays':>26} {'registered (empty)':>26} "
              f"{'registered / numpy':>22}")
        for s in sizes:
            num, reg = res[s]["numpy"], res[s]["registered"]
            ratio = [r / m for r, m in zip(reg, num)]
            fmt = lambda v, f: "/".join(f % x for x in (min(v), statistics.median(v), max(v)))
            print(f"  {s:>10} {fmt(num, '%.0f'):>26} {fmt(reg, '%.0f'):>26} "
                  f"{fmt(ratio, '%.2f'):>22}")
    comm.finalize()
    return 0


if __name__ == "__main__":
    sys.exit(main())
