"""systemd's readiness and watchdog notifications (``sd_notify(3)``).

With ``Type=notify`` systemd passes the path of a datagram socket in
``NOTIFY_SOCKET`` (``@`` starts a name in the abstract namespace); each
notification is one datagram of ``KEY=value`` lines. With ``WatchdogSec=``
it also passes ``WATCHDOG_USEC``, and kills the service (then runs its
``ExecStopPost``) when no ``WATCHDOG=1`` comes for that long. Without
``NOTIFY_SOCKET`` (not under systemd) every call does nothing.
"""

import logging
import os
import socket

LOG = logging.getLogger(__name__)


class Notifier:
    """Sends notifications to systemd, if it listens."""

    def __init__(self, environ=None):
        environ = os.environ if environ is None else environ
        self.address = None
        address = environ.get('NOTIFY_SOCKET') or ''
        if address.startswith('@'):
            self.address = '\0' + address[1:]
        elif address.startswith('/'):
            self.address = address
        elif address:
            LOG.warning('NOTIFY_SOCKET=%s: unsupported address, systemd '
                        'is not notified', address)
        self.watchdog_usec = None
        usec = environ.get('WATCHDOG_USEC')
        pid = environ.get('WATCHDOG_PID')
        if usec and (not pid or pid == str(os.getpid())):
            try:
                self.watchdog_usec = int(usec)
            except ValueError:
                pass
        self._sock = None

    @property
    def enabled(self):
        return self.address is not None

    def notify(self, *lines):
        """Send one notification; returns False when not sent."""
        if self.address is None:
            return False
        try:
            if self._sock is None:
                self._sock = socket.socket(socket.AF_UNIX,
                                           socket.SOCK_DGRAM |
                                           socket.SOCK_CLOEXEC)
            self._sock.sendto('\n'.join(lines).encode(), self.address)
        except OSError as exc:
            LOG.warning('Could not notify systemd (%s): %s',
                        ', '.join(lines), exc)
            return False
        return True

    def ready(self, status=None):
        return self.notify('READY=1', *(['STATUS=%s' % status]
                                        if status else []))

    def watchdog(self):
        return self.notify('WATCHDOG=1')

    def stopping(self, status=None):
        return self.notify('STOPPING=1', *(['STATUS=%s' % status]
                                           if status else []))

    def close(self):
        if self._sock is not None:
            self._sock.close()
            self._sock = None
