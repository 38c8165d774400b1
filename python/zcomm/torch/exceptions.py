"""Horovod's exceptions (horovod.common.exceptions), with Horovod's meaning.

HorovodInternalError: a Horovod call failed (a lost rank, a mismatch between
ranks, a stopped engine). In hvd.elastic.run it is recoverable: the
survivors roll back to the last commit, rebuild on the live ranks and go on.

HostsUpdatedInterrupt: the set of ranks changes at a point every rank
agreed on (newcomers wait to join): hvd.elastic.run rebuilds without rolling
back. skip_sync is True when only ranks left (no newcomer needs the state).
"""
from ._C import engine as _eng

HorovodInternalError = _eng.HorovodInternalError


class HostsUpdatedInterrupt(RuntimeError):
    """The ranks of the job change at a commit: hvd.elastic.run resets
    (without restoring the last commit) and, unless skip_sync, syncs the
    state to the newcomers."""

    def __init__(self, skip_sync):
        super().__init__("zcomm.torch: the ranks of the job change (%s)"
                         % ("ranks left" if skip_sync else "newcomers join"))
        self.skip_sync = skip_sync


__all__ = ["HorovodInternalError", "HostsUpdatedInterrupt"]
