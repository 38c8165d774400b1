"""One rank of test_hvd_failures.py.

mismatch: the last rank submits 'w' with another shape; every rank's
synchronize raises HorovodInternalError naming the tensor, and the engine
stays shut down (later calls raise too).
killed: the last rank SIGKILLs itself in the middle of training; every other
rank's engine ends with an error (no hang), printed as 'ERROR rank R'."""
import os
import signal
import sys
import time

import torch

import zcomm.torch as hvd


def mismatch():
    hvd.init()
    r, n = hvd.rank(), hvd.size()
    hvd.allreduce(torch.ones(4), name="fine")  # the engine works before
    shape = (4, 5) if r == n - 1 else (4, 3)
    try:
        hvd.allreduce(torch.ones(shape), name="w")
        raise AssertionError("rank %d: the mismatch did not raise" % r)
    except hvd.HorovodInternalError as e:
        msg = str(e)
        assert isinstance(e, RuntimeError)
        for part in ("rank %d" % r, "allreduce.w", "mismatch", "[4, 3]", "[4, 5]"):
            assert part in msg, "rank %d: %r not in the message: %s" % (r, part, msg)
        print("MISMATCH rank %d: %s" % (r, msg), flush=True)
    try:
        hvd.allreduce(torch.ones(2), name="after")
        raise AssertionError("rank %d: a call after the failure did not raise" % r)
    except hvd.HorovodInternalError:
        pass
    hvd.shutdown()
    print("OK rank %d" % r, flush=True)


def killed():
    # zcrun SIGTERMs the job once a rank dies: the survivors wait for their
    # own engine's verdict instead (zcrun SIGKILLs after its grace period).
    signal.signal(signal.SIGTERM, lambda *a: None)
    hvd.init()
    r, n = hvd.rank(), hvd.size()
    model = torch.nn.Linear(64, 64)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.01),
                                   named_parameters=model.named_parameters())
    x = torch.randn(8, 64)
    step = 0
    try:
        while True:
            if r == n - 1 and step == 5:
                os.kill(os.getpid(), signal.SIGKILL)
            opt.zero_grad()
            model(x).sum().backward()
            opt.step()
            step += 1
            if step == 5:
                t0 = time.time()
            assert step < 100000, "rank %d: the victim's death was never noticed" % r
    except hvd.HorovodInternalError as e:
        print("ERROR rank %d after %.2f s at step %d: %s" % (r, time.time() - t0, step, e),
              flush=True)
    os._exit(0)


if __name__ == "__main__":
    {"mismatch": mismatch, "killed": killed}[sys.argv[1]]()
