"""Horovod's pytorch_synthetic_benchmark.py on zcomm: training throughput on
synthetic data, printed as "Img/sec per rank" and "Total img/sec".

Runs unchanged on Horovod but for the import line:

    zcrun -np 2 /usr/bin/python3 examples/hvd_synthetic_benchmark.py
    mpirun --allow-run-as-root --oversubscribe -np 2 /usr/bin/python3 examples/hvd_synthetic_benchmark.py

--ddp runs the same model, batch and steps with torch's
DistributedDataParallel instead (backend --ddp-backend, gloo by default;
env:// from zcrun's RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT), for
perf/hvd_bench.py's side-by-side comparison. torchvision's model when
torchvision is installed, else a ResNet-18-shaped model defined here; small
default batch and image size so that it runs on a 2-core VM.
"""
import argparse
import os
import timeit

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim

import zcomm.torch as hvd  # import horovod.torch as hvd

parser = argparse.ArgumentParser(description="PyTorch Synthetic Benchmark",
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)
parser.add_argument("--fp16-allreduce", action="store_true", default=False,
                    help="use fp16 compression during allreduce")
parser.add_argument("--model", type=str, default="resnet18", help="model to benchmark")
parser.add_argument("--batch-size", type=int, default=8, help="input batch size")
parser.add_argument("--image-size", type=int, default=64, help="input image size")
parser.add_argument("--num-classes", type=int, default=100, help="number of classes")
parser.add_argument("--num-warmup-batches", type=int, default=2,
                    help="number of warm-up batches that don't count towards benchmark")
parser.add_argument("--num-batches-per-iter", type=int, default=3,
                    help="number of batches per benchmark iteration")
parser.add_argument("--num-iters", type=int, default=4, help="number of benchmark iterations")
parser.add_argument("--threads", type=int, default=0,
                    help="torch threads per rank (0: the cores divided by the local ranks)")
parser.add_argument("--use-adasum", action="store_true", default=False,
                    help="use adasum algorithm to do reduction")
parser.add_argument("--ddp", action="store_true", default=False,
                    help="torch DistributedDataParallel instead of the Horovod API")
parser.add_argument("--ddp-backend", type=str, default="gloo", help="torch.distributed backend")


class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                      nn.BatchNorm2d(cout))

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + (x if self.down is None else self.down(x)))


class ResNet18Like(nn.Module):
    """torchvision's resnet18 shape: 11.7 M parameters in 62 tensors."""

    def __init__(self, num_classes):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 64, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        layers, cin = [], 64
        for cout, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
            layers += [BasicBlock(cin, cout, stride), BasicBlock(cout, cout, 1)]
            cin = cout
        self.layers = nn.Sequential(*layers)
        self.fc = nn.Linear(512, num_classes)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 3, 2, 1)
        x = self.layers(x)
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


def make_model(name, num_classes):
    try:
        from torchvision import models
        return getattr(models, name)(num_classes=num_classes)
    except ImportError:
        if name != "resnet18":
            raise SystemExit("torchvision is not installed: only --model resnet18 (defined here)")
        return ResNet18Like(num_classes)


def main():
    args = parser.parse_args()
    if args.ddp:
        import torch.distributed as dist
        from torch.nn.parallel import DistributedDataParallel as DDP
        dist.init_process_group(args.ddp_backend, init_method="env://")
        rank, size = dist.get_rank(), dist.get_world_size()
        local_size = int(os.environ.get("LOCAL_WORLD_SIZE", size))
    else:
        hvd.init()
        rank, size, local_size = hvd.rank(), hvd.size(), hvd.local_size()
    threads = args.threads or max(1, (os.cpu_count() or 1) // local_size)
    torch.set_num_threads(threads)

    torch.manual_seed(0)
    model = make_model(args.model, args.num_classes)
    lr_scaler = 1 if args.use_adasum else size
    optimizer = optim.SGD(model.parameters(), lr=0.01 * lr_scaler)
    if args.ddp:
        model = DDP(model)
    else:
        compression = hvd.Compression.fp16 if args.fp16_allreduce else hvd.Compression.none
        optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters(),
                                             compression=compression,
                                             op=hvd.Adasum if args.use_adasum else hvd.Average)
        hvd.broadcast_parameters(model.state_dict(), root_rank=0)
        hvd.broadcast_optimizer_state(optimizer, root_rank=0)

    data = torch.randn(args.batch_size, 3, args.image_size, args.image_size)
    target = torch.LongTensor(args.batch_size).random_() % args.num_classes

    def benchmark_step():
        optimizer.zero_grad()
        output = model(data)
        loss = F.cross_entropy(output, target)
        loss.backward()
        optimizer.step()

    def log(s, nl=True):
        if rank != 0:
            return
        print(s, end="\n" if nl else "", flush=True)

    log("Model: %s" % args.model)
    log("Batch size: %d, image size: %d, threads per rank: %d" % (args.batch_size,
                                                                   args.image_size, threads))
    log("Number of ranks: %d (%s)" % (size, "DDP on " + args.ddp_backend if args.ddp
                                      else "zcomm.torch engine"))
    log("Running warmup...")
    timeit.timeit(benchmark_step, number=args.num_warmup_batches)
    log("Running benchmark...")
    img_secs = []
    for x in range(args.num_iters):
        t = timeit.timeit(benchmark_step, number=args.num_batches_per_iter)
        img_sec = args.batch_size * args.num_batches_per_iter / t
        log("Iter #%d: %.1f img/sec per rank" % (x, img_sec))
        img_secs.append(img_sec)
    img_sec_mean = np.mean(img_secs)
    img_sec_conf = 1.96 * np.std(img_secs)
    log("Img/sec per rank: %.1f +-%.1f" % (img_sec_mean, img_sec_conf))
    log("Total img/sec on %d rank(s): %.1f +-%.1f" % (size, size * img_sec_mean,
                                                      size * img_sec_conf))
    if not args.ddp:
        s = hvd.engine_stats()
        log("Engine: %d cycles, %.3f negotiation collectives per cycle, %d fused sets, "
            "%d data collectives" % (s["cycles"], s["negotiation_collectives"] / max(1, s["cycles"]),
                                     s["fused_sets"], s["data_collectives"]))
    else:
        import torch.distributed as dist
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
