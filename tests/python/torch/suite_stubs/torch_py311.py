"""Lets Debian's torch 1.13 import torch.distributed._shard on Python 3.11.

torch 1.13's torch/distributed/_shard/sharded_tensor/metadata.py declares
`tensor_properties: TensorProperties = field(default=TensorProperties())`, a
dataclass instance as a field default, which Python 3.11's dataclasses refuse
("mutable default ... use default_factory"). DistributedDataParallel imports
that module when torch's distributed suite turns on ReplicatedTensor (every
test does, in TestDistBackend._run), so without this every DDP test fails on
any backend, gloo included, before it communicates.

install() changes exactly that field, at the moment dataclasses reads it,
into default_factory returning a copy of the same default (torch's own later
fix, upstream, is default_factory=TensorProperties). dist_suite_case.py
installs it for every backend alike; nothing else of torch changes.
"""
import copy
import dataclasses
import sys

_MODULE = "torch.distributed._shard.sharded_tensor.metadata"


def install():
    if sys.version_info < (3, 11) or getattr(dataclasses._get_field, "__zc_compat__", False):
        return
    original = dataclasses._get_field

    def _get_field(cls, a_name, a_type, *args, **kwargs):
        default = cls.__dict__.get(a_name, dataclasses.MISSING)
        if (cls.__module__ == _MODULE and isinstance(default, dataclasses.Field)
                and type(default.default).__name__ == "TensorProperties"):
            value = default.default
            default.default = dataclasses.MISSING
            default.default_factory = lambda: copy.copy(value)
        return original(cls, a_name, a_type, *args, **kwargs)

    _get_field.__zc_compat__ = True
    dataclasses._get_field = _get_field
