"""A small fake of libvirt-python for the libvirt driver's tests and benches.

Only what the driver calls, with libvirt's real constant values. An
instance stands in for the ``libvirt`` module (tests put it into
``sys.modules``); every connection it opens sees the same domains. Calls
that change a domain are recorded in ``FakeLibvirt.calls``; a domain's
``fail`` dict makes one of its methods raise ``libvirtError``, its
``block`` dict makes one wait for a ``threading.Event`` (a QEMU whose
monitor does not answer); ``FakeLibvirt.open_block`` and ``list_block``
do the same for opening a connection and listing domains (a stuck
libvirtd). A domain's NICs are the ``<interface>`` elements of its live
XML; ``nic_counters`` holds their packet counters.

As in libvirt's QEMU driver, the calls that change a domain, and the
queries that ask its QEMU, run as the domain's *job*: one at a time per
domain (:meth:`FakeDomain.job`). A call that finds another call's job
waits for it, at most ``FakeLibvirt.job_wait`` seconds (libvirt's 30 s),
then fails with ``VIR_ERR_OPERATION_TIMEOUT``; a blocked job call holds
the job while it waits. Queries libvirt answers from its own state
(``vcpuPinInfo``, ``emulatorPinInfo``, ``XMLDesc``, ``state``) take no
job and answer meanwhile.

The calls a real client sends to libvirtd are counted in
``FakeLibvirt.daemon_calls``, and the CPU time the fake takes to answer
them (libvirtd's work, not the caller's) in ``daemon_seconds``: a bench
running the agent over the fake subtracts it from the agent's CPU time.
"""

import contextlib
import functools
import threading
import time
from xml.etree import ElementTree

from ufo_agent import cpuset

VIR_DOMAIN_EVENT_DEFINED = 0
VIR_DOMAIN_EVENT_UNDEFINED = 1
VIR_DOMAIN_EVENT_STARTED = 2
VIR_DOMAIN_EVENT_SUSPENDED = 3
VIR_DOMAIN_EVENT_RESUMED = 4
VIR_DOMAIN_EVENT_STOPPED = 5
VIR_DOMAIN_EVENT_SHUTDOWN = 6
VIR_DOMAIN_EVENT_PMSUSPENDED = 7
VIR_DOMAIN_EVENT_CRASHED = 8
VIR_DOMAIN_EVENT_ID_LIFECYCLE = 0
VIR_DOMAIN_EVENT_ID_REBOOT = 1
VIR_CONNECT_LIST_DOMAINS_ACTIVE = 1
VIR_CONNECT_LIST_DOMAINS_RUNNING = 16
VIR_CONNECT_LIST_DOMAINS_PAUSED = 32
VIR_DOMAIN_RUNNING = 1
VIR_DOMAIN_PAUSED = 3
VIR_DOMAIN_SHUTOFF = 5
VIR_DOMAIN_PAUSED_USER = 1
VIR_DOMAIN_PAUSED_MIGRATION = 2
VIR_DOMAIN_PAUSED_IOERROR = 5
VIR_DOMAIN_PAUSED_STARTING_UP = 11
VIR_DOMAIN_EVENT_SUSPENDED_PAUSED = 0
VIR_DOMAIN_EVENT_SUSPENDED_MIGRATED = 1
VIR_DOMAIN_EVENT_STARTED_MIGRATED = 1
VIR_DOMAIN_EVENT_RESUMED_MIGRATED = 1
VIR_DOMAIN_EVENT_STOPPED_MIGRATED = 3
VIR_DOMAIN_XML_INACTIVE = 2
VIR_DOMAIN_AFFECT_LIVE = 1
VIR_DOMAIN_AFFECT_CONFIG = 2
VIR_DOMAIN_STATS_INTERFACE = 16
VIR_CONNECT_GET_ALL_DOMAINS_STATS_NOWAIT = 1 << 29
VIR_ERR_INTERNAL_ERROR = 1
VIR_ERR_INVALID_ARG = 8
VIR_ERR_SYSTEM_ERROR = 38
VIR_ERR_NO_DOMAIN = 42
VIR_ERR_OPERATION_INVALID = 55
VIR_ERR_OPERATION_TIMEOUT = 68

#: Calls that run as the domain's job, by the name of the RPC libvirt
#: names as the job's holder.
JOB_METHODS = {
    'pinVcpuFlags': 'DomainPinVcpuFlags',
    'pinEmulator': 'DomainPinEmulator',
    'pinIOThread': 'DomainPinIOThread',
    'attachDeviceFlags': 'DomainAttachDeviceFlags',
    'ioThreadInfo': 'DomainGetIOThreadInfo',
}
#: How long a call waits for another call's job (libvirt's
#: VIR_JOB_WAIT_TIME), seconds.
JOB_WAIT = 30.0


def _daemon(method):
    """A call libvirtd answers: its CPU time is the daemon's (see above).

    Time waited at a gate or in a hang is no CPU time of anybody's.
    """
    @functools.wraps(method)
    def answered(self, *args, **kwargs):
        started = time.thread_time()
        try:
            return method(self, *args, **kwargs)
        finally:
            self.hv.served(time.thread_time() - started)
    return answered


class libvirtError(Exception):
    def __init__(self, msg, code=VIR_ERR_INTERNAL_ERROR):
        super().__init__(msg)
        self.code = code

    def get_error_code(self):
        return self.code


class FakeDomain:
    """One domain: its persistent definition and its live XML."""

    def __init__(self, hv, uuid, xml, live_xml=None, dom_id=1,
                 persistent=True, running=True, iothreads=()):
        self.hv = hv
        self.uuid = uuid
        self.config_xml = xml
        self.live_xml = live_xml or xml.replace(
            "<domain type='kvm'>", "<domain type='kvm' id='%d'>" % dom_id)
        self.dom_id = dom_id
        self.persistent = persistent
        self.running = running
        self.paused = None              # or a VIR_DOMAIN_PAUSED_* reason
        self.iothreads = list(iothreads)
        # <vcpu current='n'>max</vcpu>: vCPUs 0..current-1 are plugged.
        try:
            vcpu = ElementTree.fromstring(xml).find('vcpu')
        except ElementTree.ParseError:
            vcpu = None             # a test of unreadable definitions
        self.max_vcpus = int(vcpu.text) if vcpu is not None else 1
        self.current_vcpus = int(vcpu.get('current') or self.max_vcpus) \
            if vcpu is not None else 1
        cpus = cpuset.parse_cpuset(vcpu.get('cpuset') or '') \
            if vcpu is not None else frozenset()
        # Where libvirt runs a vCPU nobody pinned: <vcpu cpuset>, else
        # every CPU (8 here).
        self.default_pin = tuple(c in cpus for c in range(
            max(cpus) + 1)) if cpus else (True,) * 8
        # vCPU index -> its live pin; libvirt keeps the pin of a vCPU
        # that is not plugged and applies it when the vCPU is plugged.
        self.vcpu_pins = {}
        self.emulator_pin = None
        self.fail = {}
        self.block = {}             # method -> threading.Event
        self._job = threading.Lock()
        self.job_holder = None      # the method whose job runs
        # NIC name -> {'rx.pkts': n, ...}, the guest's view; a counter
        # libvirt could not read is missing.
        self.nic_counters = {}
        self._nets = (None, ())         # (live XML, its NIC devices)

    def _maybe_fail(self, method):
        self.hv.wait_gate(self.block.get(method), (self.uuid, method))
        exc = self.fail.get(method)
        if exc is not None:
            raise exc

    @contextlib.contextmanager
    def job(self, method):
        """Run the body as ``method``'s job of this domain.

        Waits for the job of another call, at most ``job_wait`` seconds;
        then raises libvirt's "cannot acquire state change lock".
        """
        if not self._job.acquire(timeout=self.hv.job_wait):
            holder = JOB_METHODS.get(self.job_holder, 'Unknown')
            raise libvirtError(
                'Timed out during operation: cannot acquire state change '
                'lock (held by monitor=remoteDispatch%s)' % holder,
                VIR_ERR_OPERATION_TIMEOUT)
        self.job_holder = method
        try:
            yield
        finally:
            self.job_holder = None
            self._job.release()

    def _record(self, *call):
        self.hv.calls.append((self.uuid,) + call)

    def UUIDString(self):
        return self.uuid

    def ID(self):
        return self.dom_id if self.running else -1

    @_daemon
    def state(self, flags=0):
        self._maybe_fail('state')
        if not self.running:
            return [VIR_DOMAIN_SHUTOFF, 1]
        if self.paused is not None:
            return [VIR_DOMAIN_PAUSED, self.paused]
        return [VIR_DOMAIN_RUNNING, 1]

    @_daemon
    def isPersistent(self):
        self._maybe_fail('isPersistent')
        return 1 if self.persistent else 0

    @_daemon
    def XMLDesc(self, flags=0):
        self._maybe_fail('XMLDesc')
        if flags & VIR_DOMAIN_XML_INACTIVE and self.persistent:
            return self.config_xml
        return self.live_xml

    @_daemon
    def attachDeviceFlags(self, xml, flags):
        with self.job('attachDeviceFlags'):
            self._maybe_fail('attachDeviceFlags')
            self._record('attachDeviceFlags', xml, flags)
            self.live_xml = self.live_xml.replace('</devices>',
                                                  xml + '</devices>')

    @_daemon
    def pinVcpuFlags(self, vcpu, cpumap, flags):
        with self.job('pinVcpuFlags'):
            self._maybe_fail('pinVcpuFlags')
            if vcpu >= self.max_vcpus:
                raise libvirtError(
                    'invalid argument: vcpu %d is out of range of live cpu '
                    'count %d' % (vcpu, self.max_vcpus), VIR_ERR_INVALID_ARG)
            self._record('pinVcpuFlags', vcpu, tuple(cpumap), flags)
            self.vcpu_pins[vcpu] = tuple(cpumap)

    @_daemon
    def pinEmulator(self, cpumap, flags):
        with self.job('pinEmulator'):
            self._maybe_fail('pinEmulator')
            self._record('pinEmulator', tuple(cpumap), flags)
            self.emulator_pin = tuple(cpumap)

    @_daemon
    def ioThreadInfo(self, flags):
        with self.job('ioThreadInfo'):
            self._maybe_fail('ioThreadInfo')
            return [(i, (True,)) for i in self.iothreads]

    @_daemon
    def pinIOThread(self, iothread, cpumap, flags):
        with self.job('pinIOThread'):
            self._maybe_fail('pinIOThread')
            self._record('pinIOThread', iothread, tuple(cpumap), flags)

    @_daemon
    def vcpuPinInfo(self, flags):
        """The pins of the plugged vCPUs.

        libvirt-python asks for as many as the domain's current count.
        """
        self._maybe_fail('vcpuPinInfo')
        return [self.vcpu_pins.get(i, self.default_pin)
                for i in range(self.current_vcpus)]

    @_daemon
    def emulatorPinInfo(self, flags):
        self._maybe_fail('emulatorPinInfo')
        return self.emulator_pin or self.default_pin

    def stats_gate(self, nowait):
        """What a bulk stats call meets of this domain.

        ``nowait``: the call asked for what libvirt can tell without
        waiting for the domain's job (a QEMU monitor that does not
        answer holds it).
        """
        self._maybe_fail('domainListGetStats')

    def interface_stats(self):
        """The ``net.*`` parameters of libvirt's bulk stats record."""
        if not self.running:
            return {}
        # Parsed once per live XML: a bench asks every tick.
        if self._nets[0] != self.live_xml:
            self._nets = (self.live_xml, [
                net.find('target') for net in ElementTree.fromstring(
                    self.live_xml).findall('./devices/interface')])
        nets = self._nets[1]
        stats = {'net.count': len(nets)}
        for index, target in enumerate(nets):
            if target is None:
                continue                # user, hostdev: no host device
            name = target.get('dev')
            stats['net.%d.name' % index] = name
            for key, value in self.nic_counters.get(name, {}).items():
                stats['net.%d.%s' % (index, key)] = value
        return stats


class FakeConnection:
    def __init__(self, hv, uri):
        self.hv = hv
        self.uri = uri
        self.alive = True
        self.closed = False
        self.callbacks = {}
        self.keepalive = None
        self.handed_out = set()     # uuids of the domains it returned

    def isAlive(self):
        if self.hv.is_alive_error:
            raise libvirtError('connection is broken')
        return 1 if self.alive and not self.closed else 0

    def close(self):
        self.closed = True
        return 0

    def setKeepAlive(self, interval, count):
        self.keepalive = (interval, count)

    def domainEventRegisterAny(self, dom, event_id, callback, opaque):
        self.callbacks[event_id] = (callback, opaque)
        return len(self.callbacks)

    @_daemon
    def listAllDomains(self, flags=0):
        self.hv.wait_gate(self.hv.list_block, ('listAllDomains',))
        if self.hv.list_error is not None:
            self.alive = not self.hv.error_kills_connection
            raise self.hv.list_error
        domains = list(self.hv.domains.values())
        if flags & VIR_CONNECT_LIST_DOMAINS_ACTIVE:
            domains = [d for d in domains if d.running]
        if flags & VIR_CONNECT_LIST_DOMAINS_RUNNING:
            domains = [d for d in domains
                       if d.running and d.paused is None]
        if flags & VIR_CONNECT_LIST_DOMAINS_PAUSED:
            domains = [d for d in domains
                       if d.running and d.paused is not None]
        self.handed_out.update(d.uuid for d in domains)
        return domains

    @_daemon
    def getHostname(self):
        return self.hv.hostname

    @_daemon
    def lookupByUUIDString(self, uuid):
        if self.hv.lookup_error is not None:
            raise self.hv.lookup_error
        try:
            dom = self.hv.domains[uuid]
        except KeyError:
            raise libvirtError('Domain not found: no domain with matching '
                               'uuid %r' % uuid, VIR_ERR_NO_DOMAIN)
        self.handed_out.add(uuid)
        return dom

    @_daemon
    def domainListGetStats(self, doms, stats=0, flags=0):
        """[(domain, {name: value})]; domains gone meanwhile are left out.

        libvirt sends the call over the connection of the domains: here
        a domain this connection did not return is an error, so that a
        caller mixing connections is caught.
        """
        if self.closed or not self.alive:
            raise libvirtError('internal error: client socket is closed')
        if not doms:
            raise libvirtError('doms array in virDomainListGetStats must '
                               'contain at least one domain')
        nowait = bool(flags & VIR_CONNECT_GET_ALL_DOMAINS_STATS_NOWAIT)
        for dom in doms:
            dom.stats_gate(nowait)
            if dom.uuid not in self.handed_out:
                raise libvirtError('domains in doms array must belong to a '
                                   'single connection')
        return [(dom, dom.interface_stats()
                 if stats & VIR_DOMAIN_STATS_INTERFACE else {})
                for dom in doms if dom.uuid in self.hv.domains]

    # What libvirt's event loop thread would do.
    def fire_lifecycle(self, dom, event, detail=0):
        callback, opaque = self.callbacks[VIR_DOMAIN_EVENT_ID_LIFECYCLE]
        callback(self, dom, event, detail, opaque)

    def fire_reboot(self, dom):
        callback, opaque = self.callbacks[VIR_DOMAIN_EVENT_ID_REBOOT]
        callback(self, dom, opaque)


class FakeLibvirt:
    """Stands in for the ``libvirt`` module."""

    libvirtError = libvirtError

    def __init__(self):
        self.domains = {}
        self.hostname = 'compute-1.example.org'
        self.connections = []
        self.calls = []
        self.open_error = None
        self.list_error = None
        self.error_kills_connection = False
        self.lookup_error = None
        self.is_alive_error = False
        self.open_block = None
        self.list_block = None
        self.job_wait = JOB_WAIT
        self.blocked = []           # calls that waited at a gate
        self.event_impl_registered = 0
        self.event_loop_ran = threading.Event()
        self.daemon_calls = 0
        self.daemon_seconds = 0.0
        self._served_lock = threading.Lock()
        for name, value in globals().items():
            if name.startswith('VIR_'):
                setattr(self, name, value)

    def add(self, uuid, xml, **kwargs):
        dom = FakeDomain(self, uuid, xml, **kwargs)
        self.domains[uuid] = dom
        return dom

    @property
    def conn(self):
        """The latest connection."""
        return self.connections[-1]

    def served(self, seconds):
        """One call answered in ``seconds`` of CPU time (libvirtd's)."""
        with self._served_lock:
            self.daemon_calls += 1
            self.daemon_seconds += seconds

    def wait_gate(self, gate, call):
        """Wait for ``gate`` (an Event) if there is one, noting ``call``."""
        if gate is not None:
            self.blocked.append(call)
            gate.wait()

    def open(self, uri):
        self.wait_gate(self.open_block, ('open', uri))
        if self.open_error is not None:
            raise self.open_error
        conn = FakeConnection(self, uri)
        self.connections.append(conn)
        return conn

    def virEventRegisterDefaultImpl(self):
        self.event_impl_registered += 1

    def virEventRunDefaultImpl(self):
        self.event_loop_ran.set()
        threading.Event().wait()        # the loop thread parks for good
