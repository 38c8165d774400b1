"""zcomm.torch: a torch.distributed backend named "zcomm", and Horovod's API.

Importing this module registers the backend, so that

    import zcomm.torch
    torch.distributed.init_process_group("zcomm", init_method=..., rank=..., world_size=...)

runs torch.distributed (and DistributedDataParallel) over zcomm. The backend
bootstraps from the store torch passes (rank 0 makes a zcomm unique id and sets
it there); no ZC_* variable is needed. CPU tensors only. zcomm.torch.empty and
zcomm.torch.zeros make tensors in the group's registered memory, which its
collectives move without copies (registered.py).

It is also a drop-in for `import horovod.torch as hvd` (docs/horovod.md):

    import zcomm.torch as hvd
    hvd.init()                                   # zcrun, mpirun (PMIx) or one process
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)

on zcomm's engine (include/zcomm/zcomm_engine.h).
"""
import torch.distributed as _dist

from ._C import ProcessGroupZcomm, create_process_group, zcomm_version

BACKEND = "zcomm"

if BACKEND.upper() not in _dist.Backend._plugins:
    _dist.Backend.register_backend(BACKEND, create_process_group)

# In a task of an srun step, torch's env:// works with no variable set by
# hand: RANK, WORLD_SIZE, MASTER_ADDR, ... from Slurm's (slurm_env.py).
from .slurm_env import fill_from_slurm as _fill_from_slurm  # noqa: E402
_fill_from_slurm()


def monitored_barrier(group=None, timeout=None, wait_all_ranks=False):
    """torch.distributed.monitored_barrier for any process group: torch 1.13's
    own refuses every backend but gloo by name before it reaches the group.
    Same arguments and errors (rank 0 names the first rank that did not come
    within `timeout`, or all of them with wait_all_ranks); a rank outside
    `group` returns at once; timeout None is torch's default group timeout."""
    from torch.distributed import distributed_c10d as c10d
    if c10d._rank_not_in_group(group):
        return None
    if timeout is None:
        timeout = c10d.default_pg_timeout
    pg = c10d._get_default_group() if group is None else group
    return pg.monitored_barrier(timeout, wait_all_ranks=wait_all_ranks)


from .compression import Compression  # noqa: E402
from .functions import (allgather_object, broadcast_object, broadcast_optimizer_state,  # noqa: E402
                        broadcast_parameters)
from .mpi_ops import (Adasum, Average, HorovodInternalError, Max, Min, Product,  # noqa: E402
                      ProcessSet, Sum, add_process_set, allgather, allgather_async, allreduce,
                      allreduce_, allreduce_async, allreduce_async_, alltoall, alltoall_async,
                      barrier, broadcast, broadcast_, broadcast_async, broadcast_async_,
                      ccl_built, cross_rank, cross_size, cuda_built, ddl_built, engine_stats,
                      gloo_built, gloo_enabled, global_process_set, grouped_allgather,
                      grouped_allgather_async, grouped_allreduce, grouped_allreduce_,
                      grouped_allreduce_async, grouped_allreduce_async_, grouped_reducescatter,
                      grouped_reducescatter_async, init, is_homogeneous, is_initialized, join,
                      local_rank, local_size, mpi_built, mpi_enabled, mpi_threads_supported,
                      nccl_built, poll, rank, reducescatter, reducescatter_async,
                      remove_process_set, rocm_built, shutdown, size, sparse_allreduce_async,
                      synchronize)
from .optimizer import DistributedOptimizer  # noqa: E402
from .mpi_ops import init_rank  # noqa: E402  (a zcomm extension: ranks from a unique id)
from .exceptions import HostsUpdatedInterrupt  # noqa: E402
from .registered import empty, zeros  # noqa: E402  (tensors in registered memory)
from . import elastic  # noqa: E402  (Horovod's hvd.elastic)

__all__ = ["BACKEND", "ProcessGroupZcomm", "create_process_group", "zcomm_version", "empty", "zeros",
           "monitored_barrier", "elastic", "HostsUpdatedInterrupt", "init_rank",
           "Compression", "DistributedOptimizer", "HorovodInternalError",
           "Average", "Sum", "Adasum", "Min", "Max", "Product", "ProcessSet", "global_process_set",
           "add_process_set", "remove_process_set", "grouped_allgather",
           "grouped_allgather_async", "grouped_reducescatter", "grouped_reducescatter_async",
           "sparse_allreduce_async",
           "init", "shutdown", "is_initialized", "size", "local_size", "cross_size", "rank",
           "local_rank", "cross_rank", "is_homogeneous", "engine_stats",
           "allreduce", "allreduce_", "allreduce_async", "allreduce_async_",
           "grouped_allreduce", "grouped_allreduce_", "grouped_allreduce_async",
           "grouped_allreduce_async_", "allgather", "allgather_async",
           "broadcast", "broadcast_", "broadcast_async", "broadcast_async_",
           "alltoall", "alltoall_async", "reducescatter", "reducescatter_async",
           "poll", "synchronize", "join", "barrier",
           "broadcast_parameters", "broadcast_optimizer_state", "broadcast_object",
           "allgather_object", "mpi_threads_supported", "mpi_enabled", "mpi_built",
           "gloo_enabled", "gloo_built", "nccl_built", "ddl_built", "ccl_built", "cuda_built",
           "rocm_built"]
