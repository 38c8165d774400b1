"""DistributedDataParallel on zcomm: 20 training steps (several gradient
buckets, ranks starting from different parameters so the construction-time
broadcast matters, rank-dependent data) end with parameters identical on every
rank and equal, to float tolerance, to the same run on gloo."""
import zc_torch_harness as h

STEPS = 20


def train(rank, world, steps):
    import torch
    import torch.nn as nn
    from torch.nn.parallel import DistributedDataParallel as DDP
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(20, 64), nn.Tanh(), nn.Linear(64, 33), nn.Tanh(),
                          nn.Linear(33, 5))
    with torch.no_grad():  # DDP must broadcast rank 0's parameters
        for p in model.parameters():
            p.add_(0.01 * rank)
    # Tiny buckets: several allreduces per step, as with a large model.
    ddp = DDP(model, bucket_cap_mb=0.004)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)
    gen = torch.Generator().manual_seed(1000 + rank)
    for _ in range(steps):
        x = torch.randn(16, 20, generator=gen)
        y = torch.randint(0, 5, (16,), generator=gen)
        loss = nn.functional.cross_entropy(ddp(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return [p.detach().numpy().copy() for p in model.parameters()], float(loss)


def main():
    h.require_torch()
    import numpy as np
    for world in (2, 3):
        zc = h.run(train, world, STEPS, backend="zcomm", init="tcp")
        gl = h.run(train, world, STEPS, backend="gloo", init="tcp")
        for r in range(1, world):
            for i, (a, b) in enumerate(zip(zc[0][0], zc[r][0])):
                assert np.array_equal(a, b), f"{world} ranks: parameter {i} differs on rank {r}"
        worst = 0.0
        for i, (a, b) in enumerate(zip(zc[0][0], gl[0][0])):
            assert np.allclose(a, b, rtol=1e-4, atol=1e-5), \
                f"{world} ranks: parameter {i}: zcomm and gloo differ by {np.abs(a - b).max()}"
            worst = max(worst, float(np.abs(a - b).max()))
        print(f"{world} ranks: {STEPS} steps, parameters identical on every rank; "
              f"final loss zcomm {zc[0][1]:.6f} gloo {gl[0][1]:.6f}; "
              f"max |zcomm - gloo| = {worst:.2e}", flush=True)
    print("OK")


if __name__ == "__main__":
    main()
