"""One ufo-agent per host: an exclusive ``flock`` on a file.

Two agents would pin the same guests to different CPUs, and each would
continue the other's target sequence on the guests' pages, so one could
take the other's acknowledgement for its own. ``ufo-agent --restore``
needs the lock too: it would undo what a running agent applies.

The lock is ``flock(LOCK_EX | LOCK_NB)`` on ``ufo-agent.lock`` in
``[agent] state_path``, which then holds the holder's pid. The kernel
releases it when the holder dies however it dies, so a stale file never
blocks anyone; the file itself is left in place (removing it would let
two processes lock two different files).
"""

import errno
import fcntl
import os
import time

LOCK_NAME = 'ufo-agent.lock'


class Locked(Exception):
    """Another process holds the lock."""

    def __init__(self, path, pid):
        self.path = path
        self.pid = pid
        super().__init__('%s is locked by %s' % (
            path, 'pid %d' % pid if pid else 'another process'))


class PidLock:
    """A held lock; :meth:`release` (or exiting) gives it up."""

    def __init__(self, path, fd):
        self.path = path
        self._fd = fd

    def release(self):
        if self._fd is not None:
            try:
                os.ftruncate(self._fd, 0)
            except OSError:
                pass
            os.close(self._fd)      # closing the last descriptor unlocks
            self._fd = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.release()


def holder(path):
    """The pid written in the lock file (0 if none or unreadable)."""
    try:
        with open(path) as handle:
            return int(handle.read().strip() or 0)
    except (OSError, ValueError):
        return 0


def acquire(directory, wait=0.0, poll=0.1, name=LOCK_NAME):
    """Take the lock in ``directory``, trying for up to ``wait`` seconds.

    Returns a :class:`PidLock`; raises :class:`Locked` naming the holder,
    or OSError when the file cannot be opened.
    """
    os.makedirs(directory, mode=0o700, exist_ok=True)
    path = os.path.join(directory, name)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    deadline = time.monotonic() + wait
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except OSError as exc:
            if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                os.close(fd)
                raise
            if time.monotonic() >= deadline:
                os.close(fd)
                raise Locked(path, holder(path))
            time.sleep(poll)
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, b'%d\n' % os.getpid(), 0)
    except OSError:
        os.close(fd)
        raise
    return PidLock(path, fd)
