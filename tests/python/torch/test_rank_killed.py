"""A rank killed (SIGKILL) in the middle of DDP training on zcomm: every
survivor gets a RuntimeError naming zcomm, its rank and the cause within
10 s, and every survivor's process ends (the job does not hang)."""
import os
import signal
import time

import zc_torch_harness as h

WORLD = 3
VICTIM = 2
KILL_AT = 8
LIMIT_S = 10.0


def train_until_error(rank, world, stamp_path):
    import torch
    import torch.nn as nn
    from torch.nn.parallel import DistributedDataParallel as DDP
    torch.manual_seed(0)
    ddp = DDP(nn.Sequential(nn.Linear(32, 256), nn.ReLU(), nn.Linear(256, 10)),
              bucket_cap_mb=0.05)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
    x, y = torch.randn(8, 32), torch.randint(0, 10, (8,))
    step = 0
    try:
        while True:
            if rank == VICTIM and step == KILL_AT:
                with open(stamp_path, "w") as f:
                    f.write(repr(time.time()))
                os.kill(os.getpid(), signal.SIGKILL)
            loss = nn.functional.cross_entropy(ddp(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            step += 1
            if step > 100000:
                return {"error": None, "step": step}
    except RuntimeError as e:
        return {"error": str(e), "when": time.time(), "step": step}


def main():
    h.require_torch()
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        stamp = os.path.join(tmp, "killed_at")
        start = time.monotonic()
        results = h.run(train_until_error, WORLD, stamp, init="tcp", timeout=120,
                        may_die=(VICTIM,))
        took = time.monotonic() - start
        with open(stamp) as f:
            killed_at = float(f.read())
    assert results[VICTIM] is None, results[VICTIM]
    for r in range(WORLD):
        if r == VICTIM:
            continue
        res = results[r]
        assert res["error"], f"rank {r} never saw an error: {res}"
        delay = res["when"] - killed_at
        msg = res["error"]
        print(f"rank {r}: error after {delay:.2f} s at step {res['step']}: {msg[:300]}",
              flush=True)
        assert "zcomm" in msg and f"rank {r}/{WORLD}" in msg, msg
        assert "lost" in msg or "exited" in msg or "died" in msg, f"no cause in: {msg}"
        assert delay < LIMIT_S, f"rank {r}: error {delay:.1f} s after the kill"
    print(f"OK: the job ended {took:.1f} s after it started")


if __name__ == "__main__":
    main()
