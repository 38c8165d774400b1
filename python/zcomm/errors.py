"""zcomm's errors: every failing call raises :class:`Error`."""

import enum


class Status(enum.IntEnum):
    """zc_status of the C ABI (include/zcomm/zcomm.h), same values."""

    OK = 0
    INVALID_ARG = 1
    MISMATCH = 2
    TIMEOUT = 3
    PEER_LOST = 4
    ABORTED = 5
    NO_MEMORY = 6
    UNSUPPORTED = 7
    SYSTEM = 8
    INTERNAL = 9


class Error(Exception):
    """A failed zcomm call.

    Attributes:
        status: a :class:`Status` (never ``Status.OK``).
        message: the library's detail (``zc_last_error``): rank, operation,
            peer and cause, e.g. ``"rank 1: allreduce #3: peer 2 lost: ..."``.
    """

    def __init__(self, status, message):
        self.status = Status(status)
        self.message = str(message)
        super().__init__(f"{self.status.name}: {self.message}")

    def __reduce__(self):  # picklable, e.g. through multiprocessing
        return (type(self), (int(self.status), self.message))


class DtypeError(Error, TypeError):
    """An array zcomm cannot send: an unsupported dtype (bool, complex,
    object, ...), arrays whose dtypes differ, or an object that is not a
    numpy array. Its status is ``Status.INVALID_ARG``."""

    def __init__(self, status, message=None):
        if message is None:  # DtypeError("text")
            status, message = Status.INVALID_ARG, status
        super().__init__(status, message)


def error_for(status, message):
    """The exception _zcomm raises for a failed C call."""
    return Error(status, message)


def invalid(rank, op, cause):
    """An :class:`Error` for bad arguments caught in Python, worded as the
    library's own ("rank R: op: cause")."""
    return Error(Status.INVALID_ARG, f"rank {rank}: {op}: {cause}")
