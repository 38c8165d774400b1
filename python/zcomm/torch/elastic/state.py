"""hvd.elastic.State and ObjectState (Horovod's horovod/common/elastic.py):
state that every rank keeps in memory, committed at points the application
chooses, restored after a failure and synced from rank 0 after a reset."""
from ..exceptions import HostsUpdatedInterrupt
from . import membership


class State:
    """What hvd.elastic.run keeps consistent across ranks.

    Subclasses define save() (copy the live state to the committed copy),
    restore() (back to the committed copy) and sync() (rank 0's state to
    every rank). commit() saves and then checks, collectively, whether the
    ranks of the job change (HostsUpdatedInterrupt)."""

    def __init__(self, bcast_object, get_rank):
        self._bcast_object = bcast_object
        self._rank = get_rank
        self._reset_callbacks = []

    def register_reset_callbacks(self, callbacks):
        """Functions called after every reset (a rank lost or added), e.g.
        to scale the learning rate with the new hvd.size()."""
        self._reset_callbacks.extend(callbacks)

    def on_reset(self):
        self.reset()
        for callback in self._reset_callbacks:
            callback()

    def commit(self):
        """Saves the state in memory (what a failure rolls back to), then
        check_host_updates(). Collective: every rank commits at the same
        points. Commit less often than every batch where saving is costly:
        a failure loses the steps since the last commit."""
        self.save()
        self.check_host_updates()

    def check_host_updates(self):
        """Raises HostsUpdatedInterrupt on every rank when newcomers wait to
        join the job (every rank decides the same). Collective."""
        if membership.newcomers_waiting():
            raise HostsUpdatedInterrupt(skip_sync=False)

    def save(self):
        """Copies the live state to the committed state."""
        raise NotImplementedError()

    def restore(self):
        """Back to the last committed state, undoing what came after."""
        raise NotImplementedError()

    def sync(self):
        """Rank 0's state to every rank. Collective."""
        raise NotImplementedError()

    def reset(self):
        """Called after a reset, before sync (e.g. repartition data)."""


class ObjectState(State):
    """State of plain Python objects, given as keyword arguments and kept as
    attributes: state.epoch, state.batch, ... Synced by broadcasting rank
    0's committed values (they must pickle)."""

    def __init__(self, bcast_object, get_rank, **kwargs):
        self._bcast_object = bcast_object
        self._saved_state = dict(kwargs)
        self._set_attrs()
        super().__init__(bcast_object=bcast_object, get_rank=get_rank)

    def save(self):
        self._saved_state = {name: getattr(self, name) for name in self._saved_state}

    def restore(self):
        self._set_attrs()

    def sync(self):
        if self._saved_state:
            self._saved_state = self._bcast_object(self._saved_state)
            self._set_attrs()

    def _set_attrs(self):
        for name, value in self._saved_state.items():
            setattr(self, name, value)
