#!/usr/bin/python3
"""Allreduce on ordinary arrays against arrays in registered memory, from
Python, alternated in one job: zcomm's Python package (numpy arrays against
Communicator.empty), or with --torch torch.distributed on the zcomm backend
(torch.empty tensors against zcomm.torch.empty).

    PYTHONPATH=build/python build/launcher/zcrun -np 2 /usr/bin/python3 \\
        perf/py_registered_bench.py [--torch] [--sizes 1M,16M,64M] [--rounds 8] [--iters 10]

float32 sum; out of place for numpy, in place for torch (as dist.all_reduce
is). Each round times --iters calls on ordinary arrays, then --iters calls
on registered ones (after 3 warm-up calls each), for every size; a call's
time is the slowest rank's mean. Prints, per size, the min / median / max
over the rounds of each and of registered / ordinary within a round.
"""
import argparse
import statistics
import sys
import time


def parse_size(s):
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(s[:-1]) * mult[s[-1].upper()] if s[-1].upper() in mult else int(s)


class Numpy:
    kinds = ("numpy arrays", "Communicator.empty")

    def __init__(self):
        import numpy as np
        import zcomm
        self.np, self.comm = np, zcomm.init()
        self.rank, self.size = self.comm.rank, self.comm.size

    def buffers(self, kind, n):
        make = self.np.empty if kind == self.kinds[0] else self.comm.empty
        x, out = make(n, self.np.float32), make(n, self.np.float32)
        x[:] = self.rank + 1
        return lambda: self.comm.allreduce(x, out), lambda: float(out[0])  # out of place

    def barrier(self):
        self.comm.barrier()

    def slowest(self, v):
        a = self.np.array([v])
        self.comm.allreduce(a, op="max")
        return float(a[0])

    def close(self):
        self.comm.finalize()


class Torch:
    kinds = ("torch.empty", "zcomm.torch.empty")

    def __init__(self):
        import torch
        import torch.distributed as dist
        import zcomm.torch as zt
        dist.init_process_group("zcomm")  # env://, as zcrun sets it
        self.torch, self.dist, self.zt = torch, dist, zt
        self.rank, self.size = dist.get_rank(), dist.get_world_size()

    def buffers(self, kind, n):
        t = (self.torch.empty if kind == self.kinds[0] else self.zt.empty)(n)
        t.fill_(1.0)  # in place, the sums grow by a factor of size a call: exact

        def check():  # one more call from known values
            t.fill_(self.rank + 1)
            self.dist.all_reduce(t)
            return float(t[0])
        return lambda: self.dist.all_reduce(t), check

    def barrier(self):
        self.dist.barrier()

    def slowest(self, v):
        t = self.torch.tensor([v], dtype=self.torch.float64)
        self.dist.all_reduce(t, op=self.dist.ReduceOp.MAX)
        return float(t[0])

    def close(self):
        self.dist.destroy_process_group()


def time_calls(b, call, iters):
    for _ in range(3):
        call()
    b.barrier()
    t0 = time.perf_counter()
    for _ in range(iters):
        call()
    return b.slowest((time.perf_counter() - t0) / iters * 1e6)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--torch", action="store_true", help="torch.distributed on the zcomm backend")
    ap.add_argument("--sizes", default="1M,16M,64M", help="bytes per rank, K/M/G suffixes")
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--iters", type=int, default=10)
    a = ap.parse_args()
    b = Torch() if a.torch else Numpy()
    sizes = [parse_size(s) for s in a.sizes.split(",")]
    res = {s: {k: [] for k in b.kinds} for s in sizes}
    for _ in range(a.rounds):
        for s in sizes:
            for kind in b.kinds:
                call, check = b.buffers(kind, s // 4)
                res[s][kind].append(time_calls(b, call, a.iters))
                got = check()
                if got != b.size * (b.size + 1) / 2:
                    print(f"error: rank {b.rank}: {kind}: wrong sum {got}", file=sys.stderr)
                    return 1
                del call, check
    if b.rank == 0:
        print(f"# allreduce float32 sum, {'in place (torch)' if a.torch else 'out of place'}, "
              f"{b.size} ranks, {a.rounds} rounds of {a.iters} calls; us per call "
              "(slowest rank's mean): min / median / max")
        print(f"# {'bytes':>10} {b.kinds[0]:>22} {b.kinds[1]:>22} {'registered / ordinary':>22}")
        fmt = lambda v, f: "/".join(f % x for x in (min(v), statistics.median(v), max(v)))  # noqa: E731
        for s in sizes:
            plain, reg = res[s][b.kinds[0]], res[s][b.kinds[1]]
            ratio = [r / p for r, p in zip(reg, plain)]
            print(f"  {s:>10} {fmt(plain, '%.0f'):>22} {fmt(reg, '%.0f'):>22} "
                  f"{fmt(ratio, '%.2f'):>22}")
    b.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
