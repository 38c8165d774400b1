"""The test class dist_suite.py runs: torch 1.13's own
DistributedTest._DistTestBase (torch/testing/_internal/distributed/
distributed_test.py, installed by python3-torch), mixed into TestDistBackend
as torch's test/distributed/test_distributed_spawn.py does: every test
starts WORLD_SIZE processes, each initialises the default group and runs
the test body. The processes come from a fork server (below), not spawn.

Imported by dist_suite.py after it has set the environment, and again by
the fork server the ranks start from (they unpickle the class from here),
so everything below depends on the environment only:

  BACKEND              the backend the suite is defined for (distributed_test
                       reads it at import: its skip decorators test it)
  ZC_SUITE_PG_BACKEND  set by the gloo-named pass only ("zcomm"): every
                       process group a test creates with backend "gloo"
                       (init_process_group, new_group, and the helpers of
                       torch.distributed that call them) is made on this
                       backend instead, so the suite's gloo-only tests run
                       against zcomm with BACKEND=gloo (the suite
                       constructs no ProcessGroupGloo itself, and torch
                       wraps only its built-in backends in debug mode);
                       dist.monitored_barrier becomes
                       zcomm.torch.monitored_barrier (torch's refuses any
                       backend not named gloo)
  WORLD_SIZE, INIT_METHOD, TEMP_DIR   as torch's run_test.py sets them

Nothing of the suite is copied or edited; for every backend alike, one
dataclass default of torch 1.13 that Python 3.11 refuses is made a
default_factory (suite_stubs/torch_py311.py).
"""
import functools
import inspect
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
_STUBS = os.path.join(_HERE, "suite_stubs")  # expecttest stand-in (Debian lacks it)
if _STUBS not in sys.path:
    sys.path.insert(0, _STUBS)

BACKEND = os.environ["BACKEND"]
PG_BACKEND = os.environ.get("ZC_SUITE_PG_BACKEND", "")

# Debian's torch 1.13 cannot import torch.distributed._shard on Python 3.11,
# which fails every DDP test on every backend before it communicates:
# torch_py311 changes that one dataclass default (suite_stubs/torch_py311.py).
import torch_py311  # noqa: E402

torch_py311.install()

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.distributed.distributed_c10d as _c10d  # noqa: E402

if "zcomm" in (BACKEND, PG_BACKEND):
    import zcomm.torch  # noqa: E402,F401  registers the backend "zcomm"

def _redirecting(fn):
    sig = inspect.signature(fn)

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        bound = sig.bind_partial(*args, **kwargs)
        backend = bound.arguments.get("backend")
        if backend is not None and str(backend).lower() == "gloo":
            bound.arguments["backend"] = PG_BACKEND
        return fn(*bound.args, **bound.kwargs)

    wrapper.__zc_redirect__ = True
    return wrapper


if PG_BACKEND:
    for _name in ("init_process_group", "new_group"):
        _orig = getattr(_c10d, _name)
        if not getattr(_orig, "__zc_redirect__", False):
            _wrapped = _redirecting(_orig)
            # The module's own callers (new_subgroups, ...) and the test's
            # dist.<name> both see the wrapper.
            setattr(_c10d, _name, _wrapped)
            setattr(dist, _name, _wrapped)
    # torch 1.13's dist.monitored_barrier refuses any group whose backend is
    # not named gloo before it calls the group (distributed_c10d.py:
    # "monitored_barrier is only implemented for GLOO backend."); zcomm's
    # version is the same call without that refusal.
    if PG_BACKEND == "zcomm":
        _c10d.monitored_barrier = zcomm.torch.monitored_barrier
        dist.monitored_barrier = zcomm.torch.monitored_barrier

import torch.testing._internal.distributed.distributed_test as _dt  # noqa: E402
import zc_torch_harness as h  # noqa: E402
from torch.testing._internal.distributed.distributed_test import (  # noqa: E402
    DistributedTest,
    TestDistBackend,
)


# The ranks start from multiprocessing's fork server, which imports this
# module (torch, the suite) once per run: spawning, as
# test_distributed_spawn.py does, re-imports all of it in every rank of
# every test, 3-7 s per test of a 2-core machine's time, more than most
# tests take. A rank is still a fresh child of that single-threaded server,
# not of the process running the tests, and it gets the environment the
# test's setUp left (the suite sets TEMP_DIR and MASTER_ADDR there), as a
# spawned rank would.
h.preload([__name__])


class _RankProcess(h.RankProcess):
    def prepare(self):
        # The one value the suite takes from the environment at import and
        # setUp changes per test (initialize_temp_directories): a spawned
        # rank imports the suite after that change.
        _dt.INIT_METHOD = os.getenv("INIT_METHOD", "env://")


class TestDistBackendWithSpawn(TestDistBackend, DistributedTest._DistTestBase):
    # As test_distributed_spawn.py, with ranks from the fork server.
    def setUp(self):
        super().setUp()
        self._start_processes(_RankProcess)
        torch.backends.cudnn.flags(enabled=True, allow_tf32=False).__enter__()
