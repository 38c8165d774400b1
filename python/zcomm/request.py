"""Nonblocking operations in flight."""

import threading


class Request:
    """A nonblocking operation (``isend``, ``irecv``, ``iallreduce``, ...).

    The arrays it uses stay alive, and belong to zcomm, until it is
    complete: do not read its output or change its input before ``wait()``
    returns or ``test()`` returns True. Dropping an unfinished Request waits
    for it. ``wait()`` and ``test()`` raise :class:`zcomm.Error` when the
    operation failed (each time they are called afterwards, too).
    """

    def __init__(self, handle, result=None, finish=None):
        self._handle = handle
        self._result = result
        self._finish = finish  # copies staged outputs back, once
        self._lock = threading.Lock()

    def test(self):
        """True once the operation is complete (never blocks)."""
        done = self._handle.test()
        if done:
            self._complete()
        return done

    def wait(self):
        """Blocks until the operation is complete and returns its output
        array (the received array, the reduced array; None for sends and
        barriers, and for reduce on ranks other than the root)."""
        self._handle.wait()
        self._complete()
        return self._result

    @property
    def source(self):
        """A receive's sender once complete (also for ``irecv`` from
        :data:`zcomm.ANY_SOURCE`); -1 before, and for other operations."""
        return self._handle.source

    @property
    def done(self):
        """True once complete (whether or not it succeeded)."""
        return self._handle.done

    def _complete(self):
        with self._lock:
            finish, self._finish = self._finish, None
        if finish is not None:
            finish()

    def __repr__(self):
        return f"<zcomm.Request {'done' if self.done else 'pending'}>"
