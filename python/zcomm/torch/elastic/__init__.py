"""Horovod's elastic API (horovod.torch.elastic) on zcomm:

    import zcomm.torch as hvd
    hvd.init()
    ...
    state = hvd.elastic.TorchState(model, optimizer, epoch=0, batch=0)

    @hvd.elastic.run
    def train(state):
        for state.epoch in range(state.epoch, epochs):
            for state.batch in range(state.batch, batches):
                step(...)
                if state.batch % 10 == 0:
                    state.commit()
            state.batch = 0

    train(state)

When a rank dies, every survivor's next Horovod call raises
HorovodInternalError; run() restores the last commit, shrinks the job to
the live ranks (no restart, no new rendezvous), restarts the engine on them
(hvd.size() and hvd.rank() change; a DistributedOptimizer keeps working),
calls the reset callbacks, syncs the state from rank 0 and calls train
again. When newcomers wait to join, commit() raises HostsUpdatedInterrupt
on every rank; run() grows the job to include them and syncs the state to
them. docs/elastic.md.
"""
import functools

from ..exceptions import HorovodInternalError, HostsUpdatedInterrupt
from ..mpi_ops import init, shutdown  # noqa: F401  (as Horovod's module has them)
from . import membership
from .sampler import ElasticSampler
from .state import ObjectState, State
from .torch_state import TorchState


def run(func):
    """Decorator: func(state, ...) runs until it returns, across failures
    and membership changes (see the module's text). State must be the first
    argument. func must not start with a collective of its own before it
    reads the state: the newcomers' first collectives are the sync's."""

    @functools.wraps(func)
    def wrapper(state, *args, **kwargs):
        skip_sync = False
        while True:
            try:
                if not skip_sync:
                    state.sync()
                return func(state, *args, **kwargs)
            except HorovodInternalError:
                state.restore()
                membership.reset(grow=False)
                skip_sync = False
            except HostsUpdatedInterrupt as e:
                membership.reset(grow=not e.skip_sync)
                skip_sync = e.skip_sync
            state.on_reset()
    return wrapper


__all__ = ["run", "State", "ObjectState", "TorchState", "ElasticSampler",
           "HorovodInternalError", "HostsUpdatedInterrupt"]
