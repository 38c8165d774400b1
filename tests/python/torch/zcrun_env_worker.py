"""One rank of test_zcrun_env.py, started by zcrun: torch's env:// rendezvous
from the variables zcrun exports, then an allreduce on zcomm."""
import os

import torch
import torch.distributed as dist

import zcomm.torch  # noqa: F401

rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
assert os.environ["LOCAL_RANK"] == os.environ["RANK"], "single host: local rank == rank"
assert os.environ["LOCAL_WORLD_SIZE"] == os.environ["WORLD_SIZE"]
assert os.environ["MASTER_ADDR"].startswith("127."), os.environ["MASTER_ADDR"]
dist.init_process_group("zcomm", init_method="env://")
assert dist.get_rank() == rank and dist.get_world_size() == world
t = torch.arange(6, dtype=torch.float32) + rank
dist.all_reduce(t)
want = torch.arange(6, dtype=torch.float32) * world + sum(range(world))
assert torch.equal(t, want), (t, want)
dist.destroy_process_group()
print(f"OK rank {rank} of {world} master {os.environ['MASTER_ADDR']}:{os.environ['MASTER_PORT']}",
      flush=True)
