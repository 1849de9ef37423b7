"""One ufo-agent per host: an exclusive ``flock`` on a file.

Two agents would pin the same guests to different CPUs, and each would
continue the other's target sequence on the guests' pages, so one could
take the other's acknowledgement for its own. ``ufo-agent --restore``
needs the lock too: it would undo what a running agent applies.

The lock is ``flock(LOCK_EX | LOCK_NB)`` on ``ufo-agent.lock`` in
:data:`HOST_LOCK_DIR`, ``/run/ufo-agent``, which then holds the holder's
pid. The place is fixed, never derived from the configuration: an agent
started with another configuration file or state directory finds the
same lock (``/run`` is the host's; a container or namespace with a
``/run`` of its own is a host of its own). The directory is the agent
user's alone (mode 0700; the packaged unit's ``RuntimeDirectory=``), so
no other user can open the file and hold the lock to keep the agent out.

The kernel releases the lock when the holder dies however it dies, so a
stale file never blocks anyone; the file itself is left in place
(removing it would let two processes lock two different files). A file
this process may not write (root's, left by an agent run as root) is
locked through a read-only descriptor; its pid is then not updated.
"""

import errno
import fcntl
import os
import time

LOCK_NAME = 'ufo-agent.lock'
# Where the host-wide lock lives. A constant, not an option: a second
# agent must not be able to choose another lock. Unit tests point it at
# a directory of their own.
HOST_LOCK_DIR = '/run/ufo-agent'


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


def host_lock_path():
    """The file of the host-wide lock."""
    return os.path.join(HOST_LOCK_DIR, LOCK_NAME)


def _open(path):
    """A descriptor of the lock file: read-write, else read-only.

    flock works on either; a file another user left (root's) can only
    be opened read-only by the agent's user.
    """
    try:
        return os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    except PermissionError:
        return os.open(path, os.O_RDONLY | os.O_CLOEXEC)


def acquire(directory=None, wait=0.0, poll=0.1, name=LOCK_NAME):
    """Take the lock in ``directory``, trying for up to ``wait`` seconds.

    ``directory`` defaults to :data:`HOST_LOCK_DIR`, the host-wide lock.
    Returns a :class:`PidLock`; raises :class:`Locked` naming the holder,
    or OSError when the file cannot be opened.
    """
    if directory is None:
        directory = HOST_LOCK_DIR
    os.makedirs(directory, mode=0o700, exist_ok=True)
    path = os.path.join(directory, name)
    fd = _open(path)
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
    except OSError as exc:
        if exc.errno not in (errno.EBADF, errno.EINVAL):
            os.close(fd)
            raise
        # Read-only: held all the same, the pid is not written.
    return PidLock(path, fd)
