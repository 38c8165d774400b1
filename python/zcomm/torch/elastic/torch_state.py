"""hvd.elastic.TorchState (Horovod's horovod/torch/elastic/state.py): the
state of a torch training process. Models, optimizers and ElasticSamplers
given as keyword arguments are saved as deep copies of their state_dict()
and synced from rank 0 (parameters, optimizer state, the sampler's place);
the other arguments are plain objects (ObjectState)."""
import copy

import torch

from ..functions import broadcast_object, broadcast_optimizer_state, broadcast_parameters
from ..mpi_ops import rank
from .sampler import ElasticSampler
from .state import ObjectState


class _StateDictHandler:
    """Keeps a deep copy of value.state_dict() as the committed state."""

    def __init__(self, value):
        self.value = value
        self.save()

    def save(self):
        self._saved = copy.deepcopy(self.value.state_dict())

    def restore(self):
        self.value.load_state_dict(self._saved)

    def set_value(self, value):
        self.value = value
        self.save()


class _ModelHandler(_StateDictHandler):
    def sync(self):
        broadcast_parameters(self.value.state_dict(), root_rank=0)


class _OptimizerHandler(_StateDictHandler):
    def sync(self):
        broadcast_optimizer_state(self.value, root_rank=0)


class _SamplerHandler(_StateDictHandler):
    def sync(self):
        self.value.load_state_dict(broadcast_object(self.value.state_dict()))


_HANDLERS = [(torch.nn.Module, _ModelHandler), (torch.optim.Optimizer, _OptimizerHandler),
             (ElasticSampler, _SamplerHandler)]


def _handler_for(value):
    for kind, handler in _HANDLERS:
        if isinstance(value, kind):
            return handler(value)
    return None


class TorchState(ObjectState):
    """TorchState(model=None, optimizer=None, **kwargs): every argument
    becomes an attribute (state.model, state.epoch, ...); assigning a new
    model or optimizer to it commits that object's state."""

    def __init__(self, model=None, optimizer=None, **kwargs):
        kwargs.update(model=model, optimizer=optimizer)
        handlers, plain = {}, {}
        for name, value in kwargs.items():
            handler = _handler_for(value)
            if handler is None:
                plain[name] = value
            else:
                handlers[name] = handler
        self._handlers = handlers
        for name, handler in handlers.items():
            setattr(self, name, handler.value)
        super().__init__(bcast_object=broadcast_object, get_rank=rank, **plain)

    def save(self):
        for handler in self._handlers.values():
            handler.save()
        super().save()

    def restore(self):
        for handler in self._handlers.values():
            handler.restore()
        super().restore()

    def sync(self):
        for handler in self._handlers.values():
            handler.sync()
        super().sync()

    def __setattr__(self, name, value):
        handlers = self.__dict__.get("_handlers", {})
        if name in handlers and name in self.__dict__:
            handlers[name].set_value(value)
        super().__setattr__(name, value)
