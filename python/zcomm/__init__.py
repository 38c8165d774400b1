"""zcomm: zero-copy communication for distributed deep learning, on numpy
arrays.

    import numpy as np, zcomm
    with zcomm.init() as comm:              # under zcrun, PMIx, or alone
        x = np.arange(4, dtype=np.float32) * comm.rank
        comm.allreduce(x)                   # in place, sum over ranks

The parameter server is :mod:`zcomm.ps`. See docs/python.md for the whole
API.
"""

from . import _zcomm
from . import ps
from .communicator import Communicator, init, is_joiner, join
from .dtypes import Dtype, Op
from .errors import DtypeError, Error, Status
from .request import Request

UNIQUE_ID_BYTES = _zcomm.UNIQUE_ID_BYTES
#: The peer of :meth:`Communicator.recv` / ``irecv`` / ``recv_source`` that
#: takes the next message from any rank (C: ZC_ANY_SOURCE).
ANY_SOURCE = _zcomm.ANY_SOURCE

__all__ = ["ANY_SOURCE", "Communicator", "Dtype", "DtypeError", "Error", "Op", "Request", "Status",
           "UNIQUE_ID_BYTES", "get_unique_id", "init", "is_joiner", "join", "ps", "trace_label", "version"]


def trace_label(label):
    """Labels the operations this thread starts from now on in every
    communicator's flight recorder (a layer, a tensor name); None or ""
    clears it. Kept to 47 bytes. See docs/debugging.md."""
    _zcomm.trace_set_label(label or "")


def version():
    """The library's version as (major, minor, patch)."""
    return _zcomm.version()


__version__ = "%d.%d.%d" % version()


def get_unique_id():
    """128 bytes from which :meth:`Communicator.from_unique_id` makes a
    communicator. Call it on one rank, which must itself take part (it serves
    the rendezvous), and carry the bytes to the others (a file, a pipe, a
    store). Treat it as a secret of the job: it holds the job's key."""
    return _zcomm.get_unique_id()
