"""Objects with ``__cuda_array_interface__`` (CuPy and Numba arrays, torch
CUDA tensors): what the stream-ordered calls of the C ABI need from them.

Such an object is passed to the C ABI by its pointer, on the stream its
interface names (version 3's ``stream``: an integer CUstream, 1 the legacy
default stream, 2 the per-thread one; absent or None: the legacy default
stream, which then orders nothing the producer did elsewhere). The call
returns once its host part is done; the device output is written in
stream order (later work on that stream sees it). Where zcomm has no CUDA
(a build without it, or no driver loaded) only the NULL stream works, on
host memory."""

import numpy as np

from .errors import invalid


class CudaArray:
    """The parts of one ``__cuda_array_interface__`` zcomm uses."""

    def __init__(self, obj, rank, op, what):
        cai = obj.__cuda_array_interface__
        try:
            self.ptr = int(cai["data"][0])
            self.readonly = bool(cai["data"][1])
            self.shape = tuple(int(d) for d in cai["shape"])
            self.dtype = np.dtype(cai["typestr"])
        except (KeyError, TypeError, ValueError, IndexError) as e:
            raise invalid(rank, op, f"{what}: malformed __cuda_array_interface__ ({e})") from None
        self.size = int(np.prod(self.shape, dtype=np.int64)) if self.shape else 1
        strides = cai.get("strides")
        if strides is not None and self.size > 1:
            want, step = [], self.dtype.itemsize
            for d in reversed(self.shape):
                want.append(step)
                step *= d
            if tuple(int(s) for s in strides) != tuple(reversed(want)):
                raise invalid(rank, op, f"{what} is not C-contiguous (strides {tuple(strides)})")
        if cai.get("mask") is not None:
            raise invalid(rank, op, f"{what} has a mask")
        if self.size and self.ptr == 0:
            raise invalid(rank, op, f"{what} has a NULL data pointer")
        stream = cai.get("stream")
        self.stream = 0 if stream is None else int(stream)
        self.obj = obj


def is_cuda_array(x):
    """True for an object that only the CUDA path can take."""
    return not isinstance(x, np.ndarray) and hasattr(x, "__cuda_array_interface__")
