"""Arrays as the C ABI needs them: numpy, C-contiguous, aligned, in native
byte order. Others are staged: inputs are copied in, outputs are written
into a staging array and copied out once the call is complete."""

import numpy as np

from .errors import DtypeError, Status, invalid


def _ready(a):
    return a.flags.c_contiguous and a.flags.aligned and a.dtype.isnative


def check_array(a, rank, op, what):
    if not isinstance(a, np.ndarray):
        raise DtypeError(Status.INVALID_ARG,
                         f"rank {rank}: {op}: {what} must be a numpy array, "
                         f"got {type(a).__name__}")
    return a


def native(dt):
    return dt if dt.isnative else dt.newbyteorder("=")


def as_input(a):
    """`a` itself when ready, else a ready copy."""
    return a if _ready(a) else np.ascontiguousarray(a, dtype=native(a.dtype))


class Output:
    """Where a call writes: `wire` is what the C ABI gets; `finish()` copies
    it into the user's array when they differ."""

    def __init__(self, user, rank, op, what, copy_in=False):
        if not user.flags.writeable:
            raise invalid(rank, op, f"{what} is read-only")
        self.user = user
        if _ready(user):
            self.wire = user
        elif copy_in:  # in place: the staging array starts as the input
            self.wire = np.ascontiguousarray(user, dtype=native(user.dtype))
            if self.wire is user or np.may_share_memory(self.wire, user):
                self.wire = self.wire.copy()
        else:
            self.wire = np.empty(user.shape, dtype=native(user.dtype))

    @property
    def staged(self):
        return self.wire is not self.user

    def finish(self):
        if self.staged:
            np.copyto(self.user, self.wire)
        return self.user


def same_buffer(a, b):
    """True when a and b are the same memory, viewed alike (in place)."""
    if a is b:
        return True
    ia, ib = a.__array_interface__, b.__array_interface__
    return (ia["data"][0] == ib["data"][0] and a.nbytes == b.nbytes and a.dtype == b.dtype
            and a.flags.c_contiguous and b.flags.c_contiguous)


def separate_input(x, out):
    """The input as the C ABI gets it when the output is a different array:
    a copy when the two share memory (the C ABI only allows exact in place)."""
    wire = as_input(x)
    if wire is x and np.may_share_memory(x, out):
        wire = x.copy()
    return wire
