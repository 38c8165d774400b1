"""Tensors in the registered memory of a zcomm process group.

zcomm.torch.empty and zcomm.torch.zeros make CPU tensors whose memory comes
from zcomm's registered pool of the group's ranks (zc_mem_alloc). The group's
collectives find them there and move them without copies: on shared memory,
dist.all_reduce of such a tensor reduces straight from every rank's tensor
into every rank's tensor (the zero-copy round, docs/algorithms.md), where a
tensor from torch's allocator goes through the sharded rounds, which copy it
into the owners' slots and back."""
import torch
from torch.distributed import distributed_c10d as _c10d

from ._C import ProcessGroupZcomm


def _zcomm_group(group, what):
    if group is None:
        group = _c10d._get_default_group()
    if group is _c10d.GroupMember.NON_GROUP_MEMBER:
        raise ValueError(f"zcomm.torch.{what}: this rank is not in the group")
    if not isinstance(group, ProcessGroupZcomm):
        raise ValueError(f"zcomm.torch.{what}: the group's backend is "
                         f"{group.name() if hasattr(group, 'name') else type(group).__name__}, "
                         "not zcomm")
    return group


def _sizes(size):
    if len(size) == 1 and isinstance(size[0], (tuple, list, torch.Size)):
        size = tuple(size[0])
    return [int(n) for n in size]


def empty(*size, dtype=None, group=None):
    """Like torch.empty(*size, dtype=dtype) on the CPU, in the registered memory
    of `group` (default: the default process group, whose backend must be
    zcomm). The tensor may outlive the group: the memory stays until the last
    tensor viewing it goes. A tensor with no elements is an ordinary one."""
    pg = _zcomm_group(group, "empty")
    return pg._empty_registered(_sizes(size), dtype or torch.get_default_dtype())


def zeros(*size, dtype=None, group=None):
    """empty(), filled with zeros."""
    return empty(*size, dtype=dtype, group=group).zero_()
