#!/usr/bin/python3
"""DistributedDataParallel on zcomm (or gloo): an MLP learns scikit-learn's
handwritten digits (8x8 images, 10 classes, shipped with python3-sklearn, no
download). Each rank trains on its shard of the training set; rank 0 prints
the loss and the test accuracy after every epoch.

    zcrun -np 4 /usr/bin/python3 examples/torch_ddp.py             # env:// from zcrun
    /usr/bin/python3 examples/torch_ddp.py --spawn 2 --backend gloo # ranks started here

PYTHONPATH must reach zcomm.torch (build/python in a build tree).
"""
import argparse
import datetime
import os
import socket
import time


def parse():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--backend", choices=["zcomm", "gloo"], default="zcomm")
    p.add_argument("--epochs", type=int, default=10)
    p.add_argument("--batch", type=int, default=32, help="per-rank batch size")
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--spawn", type=int, default=0,
                   help="start this many ranks here (default: ranks come from zcrun, env://)")
    return p.parse_args()


def load_digits():
    from sklearn.datasets import load_digits as digits
    from sklearn.model_selection import train_test_split
    x, y = digits(return_X_y=True)
    x = x / 16.0  # pixels are 0..16
    return train_test_split(x, y, test_size=0.25, random_state=0, stratify=y)


def train(rank, world, args):
    import torch
    import torch.distributed as dist
    import torch.nn as nn
    from torch.nn.parallel import DistributedDataParallel as DDP
    if args.backend == "zcomm":
        import zcomm.torch  # noqa: F401  registers the backend
    dist.init_process_group(args.backend, init_method="env://", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=120))
    x_train, x_test, y_train, y_test = load_digits()
    x_train = torch.tensor(x_train, dtype=torch.float32)
    y_train = torch.tensor(y_train)
    x_test, y_test = torch.tensor(x_test, dtype=torch.float32), torch.tensor(y_test)
    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 64), nn.ReLU(),
                              nn.Linear(64, 10)))
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    # Every rank sees the same shuffle and takes its own shard of each batch.
    gen = torch.Generator().manual_seed(1)
    global_batch = args.batch * world
    start = time.perf_counter()
    for epoch in range(args.epochs):
        order = torch.randperm(len(x_train), generator=gen)
        total, batches = 0.0, 0
        for b in range(0, len(order) - global_batch + 1, global_batch):
            idx = order[b + rank * args.batch:b + (rank + 1) * args.batch]
            loss = nn.functional.cross_entropy(model(x_train[idx]), y_train[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += loss.item()
            batches += 1
        mean = torch.tensor([total / max(batches, 1)])
        dist.all_reduce(mean, op=dist.ReduceOp.AVG if args.backend == "zcomm" else
                        dist.ReduceOp.SUM)
        if args.backend == "gloo":
            mean /= world
        with torch.no_grad():
            acc = (model(x_test).argmax(1) == y_test).float().mean().item()
        if rank == 0:
            print(f"[{args.backend} x{world}] epoch {epoch + 1:2d}  loss {mean.item():.4f}  "
                  f"test accuracy {acc:.4f}", flush=True)
    if rank == 0:
        print(f"[{args.backend} x{world}] {args.epochs} epochs in "
              f"{time.perf_counter() - start:.2f} s, final test accuracy {acc:.4f}", flush=True)
    dist.destroy_process_group()
    return acc


def _spawned(rank, world, args, port):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank),
                      WORLD_SIZE=str(world))
    train(rank, world, args)


def main():
    args = parse()
    if args.spawn:
        import multiprocessing as mp
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        procs = [mp.get_context("spawn").Process(target=_spawned,
                                                 args=(r, args.spawn, args, port))
                 for r in range(args.spawn)]
        for p in procs:
            p.start()
        for p in procs:
            p.join()
        raise SystemExit(max(abs(p.exitcode) for p in procs))
    train(int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), args)


if __name__ == "__main__":
    main()
