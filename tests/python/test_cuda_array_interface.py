"""Objects with __cuda_array_interface__ take the stream-ordered path
(zcomm/cuda_arrays.py -> zc_*_on_stream). Debian's torch is CPU-only and
this machine has no GPU, so the objects here expose host memory through
the interface only (they have no __array_interface__: nothing but the CUDA
path can read them), on the NULL stream, which zcomm runs as the
nonblocking collective where no CUDA driver is loaded; the device side of
the path is tested through the C ABI on the fake driver (tests/gpu). Checks
allreduce (in place and out of place, blocking and nonblocking),
broadcast from the first and the last rank, allgather, and the refusals (a
stream where no CUDA is loaded, a non-contiguous object, a read-only
output, a wrong size). Run under zcrun -np 2..4."""

import sys

import zctest  # noqa: F401  (skips without numpy)
from zctest import Checker

import numpy as np
import zcomm


class HostCai:
    """Host memory seen only through __cuda_array_interface__ (version 3)."""

    def __init__(self, a, stream=None, strides=None, readonly=False):
        self.a = a
        self.__cuda_array_interface__ = {
            "shape": a.shape, "typestr": a.dtype.str, "data": (a.ctypes.data, readonly),
            "version": 3, "strides": strides, "stream": stream}


def expect_error(c, status, fn, what, text=None):
    try:
        fn()
    except zcomm.Error as e:
        c.true(e.status == status, f"{what}: {e.status.name}, want {status.name}: {e}")
        if text:
            c.true(text in str(e), f"{what}: {e!s} does not say {text!r}")
        return
    c.fail(f"{what}: no error")


def main():
    comm = zcomm.init()
    R, N = comm.rank, comm.size
    c = Checker(R, "cuda_array_interface")
    with comm:
        for t in (np.float32, np.int64):
            for n in (1, 7, 4099):
                base = (np.arange(n) % 97).astype(t)
                mine = base + (R + 1) * 1000
                want = sum(base + (r + 1) * 1000 for r in range(N)).astype(t)
                x, out = mine.copy(), np.zeros(n, t)
                got = comm.allreduce(HostCai(x), HostCai(out))
                c.true(isinstance(got, HostCai), "allreduce returns the output object")
                c.equal(np.dtype(t).name, out, want, f"allreduce {t.__name__} n={n}")
                y = mine.copy()
                comm.allreduce(HostCai(y), op="max")
                c.equal(np.dtype(t).name, y, (base + N * 1000).astype(t), f"allreduce max in place n={n}")
                z, zo = mine.copy(), np.zeros(n, t)
                req = comm.iallreduce(HostCai(z), HostCai(zo))
                req.wait()
                c.equal(np.dtype(t).name, zo, want, f"iallreduce n={n}")
                for root in (0, N - 1):
                    b = mine.copy() if R == root else np.zeros(n, t)
                    comm.broadcast(HostCai(b), root=root)
                    c.equal(np.dtype(t).name, b, (base + (root + 1) * 1000).astype(t),
                            f"broadcast root {root} n={n}")
                g = np.zeros(n * N, t)
                comm.allgather(HostCai(mine), HostCai(g))
                c.equal(np.dtype(t).name, g,
                        np.concatenate([(base + (r + 1) * 1000).astype(t) for r in range(N)]),
                        f"allgather n={n}")
        a = np.ones(8, np.float32)
        expect_error(c, zcomm.Status.UNSUPPORTED, lambda: comm.allreduce(HostCai(a, stream=12345)),
                     "a stream where no CUDA is loaded", "stream-ordered calls")
        expect_error(c, zcomm.Status.INVALID_ARG,
                     lambda: comm.allreduce(HostCai(np.ones((4, 4), np.float32), strides=(4, 16))),
                     "non-contiguous", "not C-contiguous")
        expect_error(c, zcomm.Status.INVALID_ARG,
                     lambda: comm.allreduce(HostCai(a), HostCai(np.ones(8, np.float32), readonly=True)),
                     "read-only output", "read-only")
        expect_error(c, zcomm.Status.INVALID_ARG,
                     lambda: comm.allgather(HostCai(a), HostCai(np.ones(8, np.float32))),
                     "allgather output size", "elements")
        comm.barrier()
    print(f"rank {R} of {N}: {c.checks} checks passed", flush=True)


if __name__ == "__main__":
    sys.exit(main())
