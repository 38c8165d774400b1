"""zcomm.torch: a torch.distributed backend named "zcomm".

Importing this module registers the backend, so that

    import zcomm.torch
    torch.distributed.init_process_group("zcomm", init_method=..., rank=..., world_size=...)

runs torch.distributed (and DistributedDataParallel) over zcomm. The backend
bootstraps from the store torch passes (rank 0 makes a zcomm unique id and sets
it there); no ZC_* variable is needed. CPU tensors only.
"""
import torch.distributed as _dist

from ._C import ProcessGroupZcomm, create_process_group, zcomm_version

BACKEND = "zcomm"

if BACKEND.upper() not in _dist.Backend._plugins:
    _dist.Backend.register_backend(BACKEND, create_process_group)

__all__ = ["BACKEND", "ProcessGroupZcomm", "create_process_group", "zcomm_version"]
