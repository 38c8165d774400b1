"""Flight-recorder dumps: read them, diagnose a hung or failed job, export a
Chrome trace.

Every zcomm communicator records its last operations (ZC_TRACE_BUFFER_SIZE,
default 2000) and writes them as JSON, one file per communicator and rank,
when a call fails, on SIGUSR2 (with ZC_TRACE_DIR set) or on request
(``zc_comm_dump_trace``, :meth:`zcomm.Communicator.dump_trace`).

    python3 -m zcomm.trace DIR               # the verdict, in a few lines
    python3 -m zcomm.trace DIR --chrome t.json   # every rank's operations

The format is documented in docs/debugging.md ("The dump format"). The
analysis reads files only: the job need not be running, nor on this host.
"""

from .dump import FORMAT, VERSION, Dump, Entry, DumpError, load, load_dir, save
from .analyze import Diagnosis, diagnose
from .chrome import to_chrome

__all__ = ["FORMAT", "VERSION", "Diagnosis", "Dump", "DumpError", "Entry", "diagnose", "load",
           "load_dir", "save", "to_chrome"]
