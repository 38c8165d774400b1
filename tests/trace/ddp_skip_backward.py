"""One rank of the DDP scenario (test_trace_diagnosis.py ... ddp ...):
torch DDP on the zcomm backend; at step 3 the last rank skips the backward
and waits elsewhere (as a rank stuck in its input pipeline would), so the
others wait for it in the gradient allreduce of that backward."""
import datetime
import os
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

import zcomm.torch  # noqa: F401  (registers the backend)

dist.init_process_group("zcomm", init_method="env://", timeout=datetime.timedelta(seconds=30))
rank, world = dist.get_rank(), dist.get_world_size()
torch.manual_seed(0)
model = DDP(torch.nn.Linear(8, 4))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(6):
    opt.zero_grad()
    loss = model(torch.randn(16, 8)).sum()
    if step == 3 and rank == world - 1:
        while True:  # until zcrun stops the job
            time.sleep(1)
    loss.backward()
    opt.step()
dist.destroy_process_group()
