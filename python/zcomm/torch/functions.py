"""Horovod's torch helpers (horovod/torch/functions.py) on zcomm's engine."""
import io
import pickle

import torch

from .mpi_ops import (allgather_async, broadcast_, broadcast_async_, global_process_set, rank,
                      synchronize, _check_process_set)


def broadcast_parameters(params, root_rank, process_set=global_process_set):
    """Broadcasts a model's state_dict() or named_parameters() (or a list of
    parameters) from root_rank, in place. All broadcasts are in flight at
    once; the engine fuses nothing here but negotiates them together."""
    _check_process_set(process_set, "broadcast_parameters")
    if isinstance(params, dict):
        params = sorted(params.items())
    elif isinstance(params, list):
        params = [p if isinstance(p, tuple) else (None, p) for p in params]
    else:
        raise ValueError("zcomm.torch: broadcast_parameters: invalid params of type: %s"
                         % type(params))
    handles = []
    for i, (name, p) in enumerate(params):
        if p is None:
            continue
        t = p.data if isinstance(p, torch.nn.Parameter) else p
        handles.append(broadcast_async_(t, root_rank,
                                        "parameters.%s" % (name if name is not None else i)))
    for h in handles:
        synchronize(h)


def broadcast_optimizer_state(optimizer, root_rank, process_set=global_process_set):
    """Makes every rank's optimizer state (state and hyperparameters of
    every param group) root_rank's.

    Unlike Horovod, which broadcasts tensor by tensor (first running a step
    with zero gradients to create missing state), zcomm.torch broadcasts
    root's optimizer.state_dict() as one object and loads it: ranks whose
    state is missing get root's, and root's empty state stays empty."""
    _check_process_set(process_set, "broadcast_optimizer_state")
    if isinstance(optimizer, torch.optim.LBFGS):
        raise ValueError("zcomm.torch: broadcast_optimizer_state: cannot broadcast torch.optim.LBFGS "
                         "state")
    state = broadcast_object(optimizer.state_dict() if rank() == root_rank else None, root_rank,
                             name="optimizer_state")
    if rank() != root_rank:
        optimizer.load_state_dict(state)


def _dumps(obj):
    buf = io.BytesIO()
    torch.save(obj, buf, pickle_protocol=pickle.HIGHEST_PROTOCOL)
    return buf.getvalue()


def _loads(data):
    return torch.load(io.BytesIO(data))


def broadcast_object(obj, root_rank=0, name=None, process_set=global_process_set):
    """root_rank's obj (any picklable object) on every rank."""
    _check_process_set(process_set, "broadcast_object")
    # The name must be the same on every rank (obj's type is root's alone).
    name = "object" if name is None else name
    if rank() == root_rank:
        data = _dumps(obj)
        sz = torch.tensor([len(data)], dtype=torch.int64)
        broadcast_(sz, root_rank, name + ".sz")
        t = torch.frombuffer(bytearray(data), dtype=torch.uint8)
        broadcast_(t, root_rank, name + ".t")
        return obj
    sz = torch.zeros(1, dtype=torch.int64)
    broadcast_(sz, root_rank, name + ".sz")
    t = torch.empty(int(sz.item()), dtype=torch.uint8)
    broadcast_(t, root_rank, name + ".t")
    return _loads(t.numpy().tobytes())


def allgather_object(obj, name=None, process_set=global_process_set):
    """The list of every rank's obj (picklable), in rank order."""
    _check_process_set(process_set, "allgather_object")
    name = "object" if name is None else name
    data = _dumps(obj)
    sizes = synchronize(allgather_async(torch.tensor([len(data)], dtype=torch.int64),
                                        name + ".sz")).tolist()
    t = torch.frombuffer(bytearray(data), dtype=torch.uint8) if data else \
        torch.empty(0, dtype=torch.uint8)
    gathered = synchronize(allgather_async(t, name + ".t")).numpy().tobytes()
    out, off = [], 0
    for n in sizes:
        out.append(_loads(gathered[off:off + n]))
        off += n
    return out
