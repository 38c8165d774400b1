"""One rank of test_hvd_train.py: DistributedOptimizer training (gradients
allreduced from backward hooks) whose parameters stay identical across
ranks and match single-process training on the concatenated batch.

usage: hvd_train_worker.py MODE   (sgd, adam, fp16, bpps2, join)"""
import sys

import torch
import torch.nn as nn

import zcomm.torch as hvd

B, STEPS, DIN, DOUT = 6, 8, 13, 5


def make_model(seed):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(DIN, 17), nn.Tanh(), nn.Linear(17, 9), nn.ReLU(),
                         nn.Linear(9, DOUT)).double()


def batch(step, q):
    g = torch.Generator().manual_seed(1000 * step + q)
    return torch.randn(B, DIN, generator=g, dtype=torch.float64), \
        torch.randint(0, DOUT, (B,), generator=g)


def make_opt(mode, params):
    if mode == "adam":
        return torch.optim.Adam(params, lr=0.01)
    return torch.optim.SGD(params, lr=0.1, momentum=0.9)


def flat(model):
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()])


def main():
    mode = sys.argv[1]
    hvd.init()
    r, n = hvd.rank(), hvd.size()
    loss_fn = nn.CrossEntropyLoss()

    model = make_model(seed=r)  # different on every rank until the broadcast
    opt = make_opt(mode, model.parameters())
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(opt, root_rank=0)
    kw = {}
    if mode == "fp16":
        kw["compression"] = hvd.Compression.fp16
    if mode == "bpps2":
        kw["backward_passes_per_step"] = 2
    opt = hvd.DistributedOptimizer(opt, named_parameters=model.named_parameters(), **kw)

    steps = STEPS + r if mode == "join" else STEPS
    for s in range(steps):
        x, y = batch(s, r)
        opt.zero_grad()
        if mode == "bpps2":
            for half in (slice(0, B // 2), slice(B // 2, B)):
                loss_fn(model(x[half]), y[half]).backward()
        else:
            loss_fn(model(x), y).backward()
        opt.step()
    if mode == "join":
        last = hvd.join()
        assert last == n - 1, "join: last rank %d, expected %d" % (last, n - 1)

    # The reference: one process, rank 0's initial model, the concatenated
    # batch (join: the ranks still active at each step, averaged over n).
    ref = make_model(seed=0)
    ref_opt = make_opt(mode, ref.parameters())
    for s in range(steps):
        ref_opt.zero_grad()
        if mode == "join":
            active = [q for q in range(n) if s < STEPS + q]
            grads = None
            for q in active:
                ref.zero_grad()
                x, y = batch(s, q)
                loss_fn(ref(x), y).backward()
                g = [p.grad.clone() for p in ref.parameters()]
                grads = g if grads is None else [a + b for a, b in zip(grads, g)]
            for p, g in zip(ref.parameters(), grads):
                p.grad = g / n
        else:
            xs, ys = zip(*[batch(s, q) for q in range(n)])
            x, y = torch.cat(xs), torch.cat(ys)
            if mode == "bpps2":
                # Two half-batch means summed: twice the full-batch mean.
                (2 * loss_fn(ref(x), y)).backward()
            else:
                loss_fn(ref(x), y).backward()
        ref_opt.step()

    tol = 1e-2 if mode == "fp16" else 1e-9
    diff = (flat(model) - flat(ref)).abs().max().item()
    assert diff <= tol, "rank %d: %s: parameters differ from single-process training by %g" % (
        r, mode, diff)
    if mode != "join":
        everyone = hvd.allgather_object(flat(model))
        for q, f in enumerate(everyone):
            assert torch.equal(f, everyone[0]), "rank %d: %s: rank %d's parameters differ from " \
                "rank 0's" % (r, mode, q)
    print("rank %d: %s: max difference from single-process training %.3g" % (r, mode, diff))
    hvd.shutdown()
    print("OK rank %d" % r, flush=True)


if __name__ == "__main__":
    main()
