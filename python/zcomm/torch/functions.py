"""Horovod's torch helpers (horovod/torch/functions.py) on zcomm's engine."""
import io
import pickle

import torch

from .mpi_ops import (allgather_async, broadcast_, broadcast_async_, global_process_set, rank,
                      synchronize)


def broadcast_parameters(params, root_rank, process_set=global_process_set):
    """Broadcasts a model's state_dict() or named_parameters() (or a list of
    parameters) from root_rank, in place. All broadcasts are in flight at
    once; the engine fuses nothing here but negotiates them together."""
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
                                        "parameters.%s" % (name if name is not None else i),
                                        process_set=process_set))
    for h in handles:
        synchronize(h)


def broadcast_optimizer_state(optimizer, root_rank, model=None, process_set=global_process_set):
    """Makes every rank's optimizer state (state and hyperparameters of
    every param group) root_rank's.

    As Horovod: an optimizer without state first runs one step of its own
    (the wrapped optimizer's, not a DistributedOptimizer's) on zero
    gradients, so that every rank has the state to receive; the gradients
    stay zero after it. Then root's optimizer.state_dict() is broadcast as
    one object and loaded. model names the sparse embeddings whose zero
    gradients must be sparse."""
    if isinstance(optimizer, torch.optim.LBFGS):
        raise ValueError("zcomm.torch: broadcast_optimizer_state: cannot broadcast torch.optim.LBFGS "
                         "state")
    if len(optimizer.state_dict()["state"]) == 0:
        _step_on_zero_grads(optimizer, model)
    state = broadcast_object(optimizer.state_dict() if rank() == root_rank else None, root_rank,
                             name="optimizer_state", process_set=process_set)
    if rank() != root_rank:
        optimizer.load_state_dict(state)


def _step_on_zero_grads(optimizer, model):
    sparse = set()
    if model is not None:
        for m in model.modules():
            if isinstance(m, torch.nn.Embedding) and m.sparse:
                sparse.update(id(p) for p in m.parameters())
    for group in optimizer.param_groups:
        for p in group["params"]:
            if not p.requires_grad:
                continue
            p.grad = p.data.new(p.size()).zero_()
            if isinstance(optimizer, torch.optim.SparseAdam) or id(p) in sparse:
                p.grad = p.grad.to_sparse()
    # A DistributedOptimizer's step would allreduce: step the wrapped one.
    getattr(optimizer, "_local_step", optimizer.step)()


def _dumps(obj):
    buf = io.BytesIO()
    torch.save(obj, buf, pickle_protocol=pickle.HIGHEST_PROTOCOL)
    return buf.getvalue()


def _loads(data):
    return torch.load(io.BytesIO(data))


def broadcast_object(obj, root_rank=0, name=None, process_set=global_process_set):
    """root_rank's obj (any picklable object) on every rank of process_set
    (root_rank is a global rank)."""
    # The name must be the same on every rank (obj's type is root's alone).
    name = "object" if name is None else name
    if rank() == root_rank:
        data = _dumps(obj)
        sz = torch.tensor([len(data)], dtype=torch.int64)
        broadcast_(sz, root_rank, name + ".sz", process_set=process_set)
        t = torch.frombuffer(bytearray(data), dtype=torch.uint8)
        broadcast_(t, root_rank, name + ".t", process_set=process_set)
        return obj
    sz = torch.zeros(1, dtype=torch.int64)
    broadcast_(sz, root_rank, name + ".sz", process_set=process_set)
    t = torch.empty(int(sz.item()), dtype=torch.uint8)
    broadcast_(t, root_rank, name + ".t", process_set=process_set)
    return _loads(t.numpy().tobytes())


def allgather_object(obj, name=None, process_set=global_process_set):
    """The list of every rank's obj (picklable), in rank order (of the
    process set)."""
    name = "object" if name is None else name
    data = _dumps(obj)
    sizes = synchronize(allgather_async(torch.tensor([len(data)], dtype=torch.int64),
                                        name + ".sz", process_set=process_set)).tolist()
    t = torch.frombuffer(bytearray(data), dtype=torch.uint8) if data else \
        torch.empty(0, dtype=torch.uint8)
    gathered = synchronize(allgather_async(t, name + ".t",
                                           process_set=process_set)).numpy().tobytes()
    out, off = [], 0
    for n in sizes:
        out.append(_loads(gathered[off:off + n]))
        off += n
    return out
