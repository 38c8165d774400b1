"""A rank of the pip test's job (tests/pip/pip_install.sh), run by the venv's
zcrun with the venv's Python: the installed package, not the build tree,
does a numpy allreduce, and (where zcomm.torch was built) an allreduce
through Horovod's API. Prints one line per check; exits non-zero on a
wrong result.

    installed_job.py SITE_PACKAGES EXPECTED_VERSION
"""
import os
import sys

import numpy as np

import zcomm

site, expected_version = sys.argv[1], sys.argv[2]


def loaded_libzcomm():
    """Paths of the libzcomm.so files this process has mapped."""
    with open("/proc/self/maps") as maps:
        return {line.split()[-1] for line in maps if "libzcomm.so" in line}


def under(path, folder):
    return os.path.realpath(path).startswith(os.path.realpath(folder) + os.sep)


assert under(zcomm.__file__, site), f"zcomm imported from {zcomm.__file__}, not {site}"
libs = loaded_libzcomm()
assert libs and all(under(p, site) for p in libs), f"libzcomm mapped from {libs}, not {site}"
assert zcomm.__version__ == expected_version, (zcomm.__version__, expected_version)

with zcomm.init() as comm:
    r, n = comm.rank, comm.size
    count = 1009  # prime: no size the algorithms split evenly
    x = (np.arange(count, dtype=np.float64) + 1) * (r + 1)
    comm.allreduce(x)
    expect = (np.arange(count, dtype=np.float64) + 1) * (n * (n + 1) / 2)
    assert np.array_equal(x, expect), f"rank {r}: allreduce wrong at {np.flatnonzero(x != expect)[:5]}"
    print(f"rank {r}/{n}: numpy allreduce of {count} float64 correct; "
          f"zcomm {zcomm.__version__} from {os.path.dirname(zcomm.__file__)}, "
          f"libzcomm {sorted(libs)[0]}", flush=True)

if os.environ.get("PIP_TEST_TORCH") == "1":
    import torch
    import zcomm.torch as hvd
    assert under(hvd.__file__, site), f"zcomm.torch imported from {hvd.__file__}"
    hvd.init()
    t = torch.arange(7, dtype=torch.float32) * (hvd.rank() + 1)
    s = hvd.allreduce(t, op=hvd.Sum, name="pip_test")
    want = torch.arange(7, dtype=torch.float32) * (hvd.size() * (hvd.size() + 1) / 2)
    assert torch.equal(s, want), f"rank {hvd.rank()}: {s} != {want}"
    libs = loaded_libzcomm()
    assert libs and all(under(p, site) for p in libs), f"libzcomm mapped from {libs} after zcomm.torch"
    print(f"rank {hvd.rank()}/{hvd.size()}: zcomm.torch (Horovod API) allreduce correct, "
          f"from {os.path.dirname(hvd.__file__)}", flush=True)
    hvd.shutdown()
