#!/usr/bin/python3
"""Per-call latency of small torch.distributed calls on the zcomm backend.

    PYTHONPATH=build/python /usr/bin/python3 perf/torch_call_latency.py
        [--iters 100] [--sizes 8,2048] [--ops all_reduce,broadcast,all_gather]
        [--pin 0,1] [--backend zcomm] [--json FILE]

Two ranks (spawned, as perf/torch_zcomm_bench.py starts them), the zcomm
backend unless --backend gloo. For each mode (blocking, then async_op=True
followed by wait()), op and size: 10 warm-up calls, a barrier, then --iters
calls each timed on its own; prints the slowest rank's median and 90th
percentile per call in us. --ops send_recv times a ping-pong: one call is
rank 0's send and receive, rank 1's receive and send (dist.send/recv;
isend/irecv and wait() in the async mode), a round trip.
--pin C0,C1 binds rank r to CPU Cr before anything starts (0,0: both ranks on
one core; 0,1: one core each). Loopback only (ZC_SOCKET_IFNAME=lo).
"""
import argparse
import json
import multiprocessing as mp
import os
import socket
import statistics
import time


def ping_pong(dist, rank, t, async_op):
    """Rank 0 sends t to rank 1 and receives it back; rank 1 the reverse."""
    peer = 1 - rank
    steps = ("send", "recv") if rank == 0 else ("recv", "send")
    for step in steps:
        if async_op:
            (dist.isend if step == "send" else dist.irecv)(t, peer).wait()
        else:
            (dist.send if step == "send" else dist.recv)(t, peer)


def rank_main(rank, world, port, args, q):
    os.environ.update(ZC_SOCKET_IFNAME="lo", GLOO_SOCKET_IFNAME="lo")
    if args.pin:
        os.sched_setaffinity(0, {int(args.pin.split(",")[rank])})
    import torch
    import torch.distributed as dist
    import zcomm.torch  # noqa: F401  (registers the backend)
    torch.set_num_threads(1)
    dist.init_process_group(args.backend, init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=world)
    out = {}
    clock = time.perf_counter_ns
    for mode in ("sync", "async"):
        async_op = mode == "async"
        for op in args.ops.split(","):
            for size in (int(s) for s in args.sizes.split(",")):
                t = torch.ones(max(size // 4, 1))
                outs = [torch.empty_like(t) for _ in range(world)]
                if op == "all_reduce":
                    fn = lambda: dist.all_reduce(t, async_op=async_op)  # noqa: E731
                elif op == "broadcast":
                    fn = lambda: dist.broadcast(t, src=0, async_op=async_op)  # noqa: E731
                elif op == "all_gather":
                    fn = lambda: dist.all_gather(outs, t, async_op=async_op)  # noqa: E731
                elif op != "send_recv":
                    raise ValueError(op)
                if op == "send_recv":
                    call = lambda: ping_pong(dist, rank, t, async_op)  # noqa: E731
                else:
                    call = (lambda: fn().wait()) if async_op else fn
                for _ in range(10):
                    call()
                dist.barrier()
                times = []
                for _ in range(args.iters):
                    start = clock()
                    call()
                    times.append((clock() - start) / 1000)
                times.sort()
                out[f"{mode} {op} {size}"] = [statistics.median(times),
                                              times[int(len(times) * 0.9)]]
    q.put((rank, out))
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--iters", type=int, default=100)
    p.add_argument("--sizes", default="8,2048", help="bytes, comma-separated")
    p.add_argument("--ops", default="all_reduce,broadcast,all_gather")
    p.add_argument("--pin", help="CPU of rank 0,CPU of rank 1")
    p.add_argument("--backend", choices=["zcomm", "gloo"], default="zcomm")
    p.add_argument("--json", help="write {\"mode op size\": [[median, p90] per rank]} here")
    args = p.parse_args()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    procs = [ctx.Process(target=rank_main, args=(r, 2, port, args, q)) for r in range(2)]
    for pr in procs:
        pr.start()
    res = dict(q.get(timeout=600) for _ in procs)
    for pr in procs:
        pr.join()
    rows = {k: [res[0][k], res[1][k]] for k in res[0]}
    print(f"{'call':>28} | median (us) | p90 (us)   (slowest rank)")
    for k, v in rows.items():
        print(f"{k:>28} | {max(r[0] for r in v):11.1f} | {max(r[1] for r in v):8.1f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
