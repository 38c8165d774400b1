#!/usr/bin/python3
"""torch_allreduce — the torch.distributed (backend gloo) baseline of zc_coll.

    /usr/bin/python3 perf/peers/torch_allreduce.py -np 2 [-b 4] [-e 256M]
        [-f 2] [-d float32] [-n 20] [-w 5] [--min-iters 3] [-c 1]
        [--init file|tcp] [--timeout-s 600] [--json FILE]

Spawns its own ranks (one process each: this script with --rank), which meet
through init_method file:// (a fresh temporary file) or tcp://127.0.0.1:PORT,
and run dist.all_reduce (in place, op SUM) with the same sweep, data, check,
timing and columns as zc_coll: size count type redop time(us) algbw(GB/s)
busbw(GB/s) #wrong, GB = 1e9 B, busbw = algbw * 2(n-1)/n, time = the slowest
rank's mean per call. Uses Debian's python3-torch; run it with /usr/bin/python3.
"""
import argparse
import datetime
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time

DTYPES = {"float32": 4, "float64": 8, "float16": 2, "bfloat16": 2,
          "int32": 4, "int64": 8, "uint8": 1, "int8": 1}


def parse_size(text):
    t = text.strip().upper().rstrip("B")
    mul = 1
    if t and t[-1] in "KMG":
        mul = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}[t[-1]]
        t = t[:-1]
    return int(t) * mul


def iters_for(nbytes, iters, min_iters):
    """Same schedule as bu_iters_for() in perf/common/bench_util.h."""
    knee = 1 << 20
    if nbytes <= knee:
        return iters
    n = int(iters * knee / nbytes)
    return max(1, min(iters, max(n, min_iters)))


FILL_US = 2000.0
FILL_MAX_ITERS = 100000


def iters_to_fill(iters, us_per_call):
    """Same as bu_iters_to_fill() in perf/common/bench_util.h: enough calls
    to fill FILL_US, at least iters, at most FILL_MAX_ITERS."""
    if not us_per_call > 0:
        return iters
    return max(iters, int(min(FILL_US / us_per_call, FILL_MAX_ITERS)))


def write_json(path, rep, complete):
    if not path:
        return
    rep = dict(rep, complete=complete)
    tmp = "%s.%d.tmp" % (path, os.getpid())
    with open(tmp, "w") as f:
        json.dump(rep, f, indent=2)
    os.replace(tmp, path)


def run_rank(a):
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    dt = getattr(torch, a.dtype)
    ts = DTYPES[a.dtype]
    n, rank = a.np, a.rank
    rep = {"benchmark": "allreduce", "library": "torch-gloo",
           "variant": "torch %s gloo" % torch.__version__, "ranks": n,
           "dtype": a.dtype, "op": "sum", "transport": "tcp(lo)",
           "inplace": True,
           "timing": "max over ranks of mean time per call",
           "error": None, "results": []}
    path = a.json if rank == 0 else None
    try:
        dist.init_process_group(
            "gloo", init_method=a.init_method, rank=rank, world_size=n,
            timeout=datetime.timedelta(seconds=a.timeout_s))
    except Exception as e:  # noqa: BLE001
        rep["error"] = "torch rank %d: init_process_group: %s" % (rank, e)
        write_json(path, rep, False)
        print("error: " + rep["error"], file=sys.stderr)
        return 1
    max_count = max(1, a.max_size // ts)
    buf = torch.zeros(max_count, dtype=dt)
    pattern = (torch.arange(max_count, dtype=torch.int64) % 7 + 1)
    if rank == 0:
        print("# torch_allreduce: torch %s backend gloo ranks=%d init=%s"
              % (torch.__version__, n, a.init_method.split(":")[0]))
        print("# time = slowest rank's mean per call; GB/s = 1e9 B/s; "
              "busbw factor %.4f" % (2.0 * (n - 1) / n if n > 1 else 1.0))
        print("#%11s %12s %8s %6s %12s %12s %12s %8s" % (
            "size", "count", "type", "redop", "time(us)", "algbw(GB/s)",
            "busbw(GB/s)", "#wrong"))
        sys.stdout.flush()
    sz, last = a.min_size, 0
    tol = {"float16": 1e-2, "bfloat16": 1e-2, "float32": 1e-5,
           "float64": 1e-12}.get(a.dtype, 0)
    try:
        while sz <= a.max_size:
            count = sz // ts
            size = count * ts
            if count == 0 or size == last:
                sz *= a.factor
                continue
            last = size
            t = buf[:count]
            wrong = -1
            if a.check:
                t.copy_(pattern[:count] * (rank + 1))
                dist.all_reduce(t, op=dist.ReduceOp.SUM)
                want = (pattern[:count] * (n * (n + 1) // 2)).to(torch.float64)
                got = t.to(torch.float64)
                bad = (got - want).abs() > tol * want.abs().clamp(min=1)
                w = torch.tensor([int(bad.sum().item())], dtype=torch.int64)
                dist.all_reduce(w, op=dist.ReduceOp.SUM)
                wrong = int(w.item())
            it_n = iters_for(size, a.iters, a.min_iters)
            it_w = a.warmup if size <= (64 << 10) else min(a.warmup, 1)
            t_warm = 0.0
            for i in range(it_w):
                if i == 1:
                    t_warm = time.perf_counter()
                dist.all_reduce(t)
            if it_w > 1:  # iters_to_fill: the slowest rank's warm-up call
                per = (time.perf_counter() - t_warm) * 1e6 / (it_w - 1)
                tw = torch.tensor([per], dtype=torch.float64)
                dist.all_reduce(tw, op=dist.ReduceOp.MAX)
                it_n = iters_to_fill(it_n, float(tw.item()))
            dist.barrier()
            t0 = time.perf_counter()
            for _ in range(it_n):
                dist.all_reduce(t)
            mine = (time.perf_counter() - t0) * 1e6 / it_n
            tm = torch.tensor([mine], dtype=torch.float64)
            dist.all_reduce(tm, op=dist.ReduceOp.MAX)
            slowest = float(tm.item())
            algbw = size / (slowest * 1e3)
            busbw = algbw * (2.0 * (n - 1) / n if n > 1 else 1.0)
            row = {"size": size, "count": count, "iters": it_n,
                   "time_us": slowest, "algbw_GBps": algbw,
                   "busbw_GBps": busbw, "wrong": wrong}
            if rank == 0:
                print("%12d %12d %8s %6s %12.2f %12.3f %12.3f %8d" % (
                    size, count, a.dtype, "sum", slowest, algbw, busbw, wrong))
                sys.stdout.flush()
                rep["results"].append(row)
                write_json(path, rep, False)
            sz *= a.factor
    except Exception as e:  # noqa: BLE001
        rep["error"] = "torch rank %d: %s" % (rank, e)
        write_json(path, rep, False)
        print("error: " + rep["error"], file=sys.stderr)
        return 1
    write_json(path, rep, True)
    dist.destroy_process_group()
    return 0


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(a, argv):
    """Starts a.np copies of this script with --rank and waits for them."""
    tmpdir = tempfile.mkdtemp(prefix="zcperf-torch-")
    if a.init == "tcp":
        init_method = "tcp://127.0.0.1:%d" % free_port()
    else:
        init_method = "file://" + os.path.join(tmpdir, "rendezvous")
    procs = []
    env = dict(os.environ, OMP_NUM_THREADS="1")
    for r in range(a.np):
        cmd = [sys.executable, os.path.abspath(__file__)] + argv + [
            "--rank", str(r), "--init-method", init_method]
        procs.append(subprocess.Popen(cmd, env=env))
    deadline = time.time() + a.timeout_s + 30
    rc = 0
    try:
        for p in procs:
            left = max(1, deadline - time.time())
            try:
                r = p.wait(timeout=left)
            except subprocess.TimeoutExpired:
                print("error: torch rank timed out", file=sys.stderr)
                r = 124
            if r != 0 and rc == 0:
                rc = r
                for q in procs:  # one rank failed: stop the others
                    if q.poll() is None:
                        q.send_signal(signal.SIGTERM)
    finally:
        for q in procs:
            if q.poll() is None:
                q.kill()
                q.wait()
        try:
            for f in os.listdir(tmpdir):
                os.unlink(os.path.join(tmpdir, f))
            os.rmdir(tmpdir)
        except OSError:
            pass
    return rc


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-np", type=int, default=2)
    ap.add_argument("-b", dest="min_size", type=parse_size, default=4)
    ap.add_argument("-e", dest="max_size", type=parse_size,
                    default=256 << 20)
    ap.add_argument("-f", dest="factor", type=int, default=2)
    ap.add_argument("-d", dest="dtype", default="float32",
                    choices=sorted(DTYPES))
    ap.add_argument("-n", dest="iters", type=int, default=20)
    ap.add_argument("-w", dest="warmup", type=int, default=5)
    ap.add_argument("--min-iters", type=int, default=3)
    ap.add_argument("-c", dest="check", type=int, default=1)
    ap.add_argument("--init", choices=["file", "tcp"], default="file")
    ap.add_argument("--timeout-s", type=float, default=600)
    ap.add_argument("--json")
    ap.add_argument("--rank", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--init-method", help=argparse.SUPPRESS)
    a = ap.parse_args()
    a.factor = max(2, a.factor)
    if a.rank is not None:
        return run_rank(a)
    if a.json:
        a.json = os.path.abspath(a.json)
    argv, skip = [], False
    for x in sys.argv[1:]:  # ranks get the absolute --json path
        if skip:
            skip = False
        elif x == "--json":
            skip = True
        elif not x.startswith("--json="):
            argv.append(x)
    if a.json:
        argv += ["--json", a.json]
    try:
        import torch  # noqa: F401
    except Exception as e:  # noqa: BLE001
        write_json(a.json, {"benchmark": "allreduce", "library": "torch-gloo",
                            "error": "cannot import torch: %s" % e,
                            "results": []}, False)
        print("error: cannot import torch: %s" % e, file=sys.stderr)
        return 1
    return launch(a, argv)


if __name__ == "__main__":
    sys.exit(main())
