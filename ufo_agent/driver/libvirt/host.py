"""The libvirt connection of the driver, and the events it delivers.

One :class:`Host` holds one connection (with keepalive), opens it again
when libvirtd went away, and queues lifecycle and reboot events. libvirt
calls the callbacks from its default event loop, run once per process on
a daemon thread of its own; the agent loop drains the queue.

Every call that can reach libvirtd goes through :meth:`Host.call` (or
:meth:`Host.run`) with a deadline (:mod:`.deadline`): a domain whose
call hangs is skipped until that call returns, and the agent carries on
with the others.

A connection with a call outstanding answers the other calls made on it
late (libvirt 9.0's client picks their replies up on its next keepalive,
up to 5 s later), so the connection of a call that missed its deadline
is retired: later calls go over a new connection, and the retired one is
closed once its calls have returned.
"""

import collections
import logging
import threading

from ufo_agent.driver import base
from ufo_agent.driver.libvirt import deadline

LOG = logging.getLogger(__name__)

#: The state of an active domain that is neither running nor paused, or
#: cannot be read: see :meth:`Host.active_domains`.
UNKNOWN = 'unknown'

_event_loop_started = False
_event_loop_lock = threading.Lock()


# Seconds a pin call, or a read of pins, is waited for before it is left
# in flight: the agent pins (and checks the pins of) the guests one after
# the other, and a hung one would hold every guest after it for the whole
# deadline. These calls return within milliseconds even from a busy
# libvirtd; one left in flight early only keeps its guest's CPUs held
# until it returns (as a timed-out one).
PIN_WAIT = 0.5


def _start_event_loop(libvirt):
    """libvirt's default event loop, once per process, on a daemon."""
    global _event_loop_started
    with _event_loop_lock:
        if _event_loop_started:
            return
        libvirt.virEventRegisterDefaultImpl()

        def run():
            while True:
                libvirt.virEventRunDefaultImpl()

        threading.Thread(target=run, name='libvirt-events',
                         daemon=True).start()
        _event_loop_started = True


class Host:
    """A libvirt connection that reconnects, and its event queue.

    ``libvirt`` is the libvirt-python module; ``call_timeout`` the
    deadline of each call in seconds (0: none); ``pin_wait`` how long a
    pin call or pin read is waited for before it is left in flight (see
    :mod:`.deadline`; at most the deadline).
    """

    def __init__(self, libvirt, uri, call_timeout=0, pin_wait=PIN_WAIT):
        self.libvirt = libvirt
        self.pin_wait = pin_wait
        self.uri = uri
        self._conn = None
        self._retired = []          # (connection, keys of its hung calls)
        self.generation = 0         # connections opened so far
        self._events = collections.deque()
        self._events_lock = threading.Lock()
        self.deadlines = deadline.Deadlines(call_timeout)
        _start_event_loop(libvirt)

    def get_connection(self):
        """The open connection, opened (again) if it is not alive.

        ``isAlive`` is local to the client: it never waits for libvirtd.
        """
        if self._retired:
            self._close_retired()
        if self._conn is not None:
            try:
                if self._conn.isAlive():
                    return self._conn
            except self.libvirt.libvirtError:
                pass
            self._conn = None
        try:
            conn = self.deadlines.run(deadline.CONNECTION,
                                      'connect to %s' % self.uri, self._open,
                                      discard=self._discard)
        except self.libvirt.libvirtError as exc:
            raise base.DriverError('cannot connect to %s: %s'
                                   % (self.uri, exc))
        except base.DriverError as exc:
            # Timed out or skipped: the same kind of error, said so.
            raise type(exc)('cannot connect to %s: %s' % (self.uri, exc))
        self._conn = conn
        self.generation += 1
        LOG.info('Connected to %s', self.uri)
        return conn

    def current(self, generation):
        """True while the connection of ``generation`` is still in use."""
        return self._conn is not None and self.generation == generation

    def _retire(self, conn, key):
        """A call on ``conn`` missed its deadline: stop using ``conn``."""
        if conn is None:
            return
        for old, keys in self._retired:
            if old is conn:
                keys.add(key)
                break
        else:
            self._retired.append((conn, {key}))
        if self._conn is conn:
            self._conn = None
            LOG.warning('A call on the libvirt connection hangs: later calls '
                        'use a new connection')

    def _close_retired(self):
        """Close the retired connections whose hung calls have returned."""
        busy = set(self.deadlines.outstanding())
        for entry in list(self._retired):
            conn, keys = entry
            if keys & busy:
                continue
            try:
                self.deadlines.run('retired connection %x' % id(conn),
                                   'close a retired connection', conn.close)
            except deadline.CallSkipped:
                continue                # libvirtd is busy: later
            except (self.libvirt.libvirtError, base.DriverError) as exc:
                LOG.debug('Could not close a retired connection: %s', exc)
            self._retired.remove(entry)

    def _open(self):
        lv = self.libvirt
        conn = lv.open(self.uri)
        conn.domainEventRegisterAny(
            None, lv.VIR_DOMAIN_EVENT_ID_LIFECYCLE, self._on_lifecycle, None)
        conn.domainEventRegisterAny(
            None, lv.VIR_DOMAIN_EVENT_ID_REBOOT, self._on_reboot, None)
        # libvirt drops a connection whose daemon stopped answering: the
        # calls waiting on it fail, and the next call opens a new one.
        conn.setKeepAlive(5, 3)
        return conn

    def _discard(self, conn):
        """A connection opened after its deadline: nobody will use it."""
        try:
            conn.close()
        except self.libvirt.libvirtError:
            pass

    def run(self, key, what, func, *args):
        """``func(*args)`` within the deadline, libvirt errors unchanged.

        ``key`` is the uuid of the domain the call concerns, or
        :data:`~.deadline.CONNECTION`. Raises a DriverError when the
        call times out or is skipped (the key is busy).
        """
        conn = self._conn
        try:
            return self.deadlines.run(key, what, func, *args)
        except deadline.CallTimedOut as exc:
            error = exc
        self._retire(conn, key)
        raise error

    def call(self, what, func, *args, key=deadline.CONNECTION):
        """``func(*args)`` within the deadline; errors become DriverError.

        A connection found dead on the way is dropped, so that the next
        call opens a new one.
        """
        try:
            return self.run(key, what, func, *args)
        except self.libvirt.libvirtError as exc:
            raise self._failed(what, exc)

    def call_each(self, calls, key=deadline.CONNECTION, wait=None):
        """Each ``(what, func, args)`` in turn, as :meth:`call` each.

        One hand-off to a worker thread for them all, with the deadlines
        of one :meth:`call` each (:meth:`.Deadlines.run_each`, ``wait``
        as there); the first that fails ends them. Returns their values.
        """
        calls = list(calls)
        if not calls:
            return []
        outcome, = self.call_batch([(key, calls)], wait)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    def call_batch(self, items, wait=None):
        """``(key, calls)`` items, one hand-off for all of them.

        As :meth:`.Deadlines.run_batch`, with the errors :meth:`call`
        raises: an outcome per item run, its values or its exception (a
        DriverError, or what a call raised that is not a libvirt error);
        the first that fails ends the batch.
        """
        conn = self._conn
        outcomes = self.deadlines.run_batch(items, wait)
        if outcomes and isinstance(outcomes[-1], Exception):
            error = outcomes[-1]
            if isinstance(error, deadline.CallTimedOut):
                key = items[len(outcomes) - 1][0]
                self._retire(conn, key)
            elif isinstance(error, deadline.ItemFailed):
                exc = error.error
                outcomes[-1] = (self._failed(error.what, exc)
                                if isinstance(exc, self.libvirt.libvirtError)
                                else exc)
        return outcomes

    def _failed(self, what, exc):
        """The DriverError of a failed call; a dead connection is dropped."""
        try:
            alive = self._conn is not None and self._conn.isAlive()
        except self.libvirt.libvirtError:
            alive = False
        if not alive:
            self._conn = None
        return base.DriverError('%s: %s' % (what, exc))

    # -- domains -----------------------------------------------------------
    def running_domains(self):
        conn = self.get_connection()
        return self.call('list domains', conn.listAllDomains,
                         self.libvirt.VIR_CONNECT_LIST_DOMAINS_RUNNING)

    def active_domains(self):
        """Every domain whose QEMU runs, as (domain, state).

        The state is None for a running domain, libvirt's
        ``VIR_DOMAIN_PAUSED_*`` reason for a paused one, and
        :data:`UNKNOWN` for one whose state cannot be read (its calls
        hang or fail) or is neither (shutting down, suspended to RAM...):
        its QEMU, its threads and their pins are there all the same. A
        domain is left out only when libvirt says it is not active.
        """
        conn = self.get_connection()
        lv = self.libvirt
        # Both lists in one hand-off to the call thread.
        active, running = self.call_each(
            [('list domains', conn.listAllDomains,
              (lv.VIR_CONNECT_LIST_DOMAINS_ACTIVE,)),
             ('list domains', conn.listAllDomains,
              (lv.VIR_CONNECT_LIST_DOMAINS_RUNNING,))])
        running = {dom.UUIDString() for dom in running}
        out = []
        for dom in active:
            uuid = dom.UUIDString()
            if uuid in running:
                out.append((dom, None))
                continue
            try:
                state, reason = self.run(uuid, 'state of %s' % uuid,
                                         dom.state)
            except self.libvirt.libvirtError as exc:
                if exc.get_error_code() == lv.VIR_ERR_NO_DOMAIN:
                    continue        # gone meanwhile
                out.append((dom, UNKNOWN))
                continue
            except base.DriverError:
                out.append((dom, UNKNOWN))     # hangs: it is there
                continue
            if state == lv.VIR_DOMAIN_PAUSED:
                out.append((dom, reason))
            elif state == lv.VIR_DOMAIN_RUNNING:
                out.append((dom, None))     # resumed meanwhile
            elif state != lv.VIR_DOMAIN_SHUTOFF:
                out.append((dom, UNKNOWN))
        return out

    def all_domain_uuids(self):
        """The uuids of every domain, running or only defined."""
        conn = self.get_connection()
        return {dom.UUIDString() for dom in self.call(
            'list domains', conn.listAllDomains, 0)}

    def lookup(self, uuid):
        conn = self.get_connection()
        return self.call('domain %s' % uuid, conn.lookupByUUIDString, uuid,
                         key=uuid)

    def exists(self, uuid):
        """False only when libvirt says the domain does not exist."""
        try:
            self.run(uuid, 'domain %s' % uuid,
                     self.get_connection().lookupByUUIDString, uuid)
        except self.libvirt.libvirtError as exc:
            return exc.get_error_code() != self.libvirt.VIR_ERR_NO_DOMAIN
        except base.DriverError:
            return True
        return True

    # -- events --------------------------------------------------------------
    def _on_lifecycle(self, conn, dom, event, detail, opaque):
        lv = self.libvirt
        mapping = {
            lv.VIR_DOMAIN_EVENT_STARTED: base.GuestEvent.STARTED,
            lv.VIR_DOMAIN_EVENT_RESUMED: base.GuestEvent.RESUMED,
            lv.VIR_DOMAIN_EVENT_STOPPED: base.GuestEvent.STOPPED,
            # Paused (by a user, an I/O error, a migration's switchover):
            # its QEMU and the live pins of its threads stay.
            lv.VIR_DOMAIN_EVENT_SUSPENDED: base.GuestEvent.PAUSED,
            lv.VIR_DOMAIN_EVENT_SHUTDOWN: None,
            lv.VIR_DOMAIN_EVENT_UNDEFINED: base.GuestEvent.UNDEFINED,
        }
        kind = mapping.get(event)
        if event == lv.VIR_DOMAIN_EVENT_SUSPENDED and \
                detail == lv.VIR_DOMAIN_EVENT_SUSPENDED_MIGRATED:
            # The switchover of an outgoing live migration: it is gone in
            # a moment, or runs on here if the migration fails.
            kind = None
        if kind is not None:
            self.queue_event(dom.UUIDString(), kind)

    def _on_reboot(self, conn, dom, opaque):
        self.queue_event(dom.UUIDString(), base.GuestEvent.REBOOTED)

    def queue_event(self, uuid, event):
        """Queue an event (the callbacks do; so does the driver's poll)."""
        with self._events_lock:
            self._events.append((uuid, event))

    def take_events(self):
        """The queued (uuid, GuestEvent) pairs, oldest first; forgotten."""
        with self._events_lock:
            out = list(self._events)
            self._events.clear()
        return out

    def close(self):
        for conn, _ in self._retired:
            try:
                self.deadlines.run('retired connection %x' % id(conn),
                                   'close a retired connection', conn.close)
            except (self.libvirt.libvirtError, base.DriverError):
                pass
        self._retired = []
        if self._conn is not None:
            try:
                self.run(deadline.CONNECTION, 'close the connection',
                         self._conn.close)
            except (self.libvirt.libvirtError, base.DriverError):
                pass
            self._conn = None
