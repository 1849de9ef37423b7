"""The hypervisor driver for libvirt/QEMU hosts (the real one).

* Inventory: running domains, parsed from their XML (Nova metadata,
  restore pins), filtered by :mod:`ufo_agent.hypervisor.policy`.
* Events: libvirt lifecycle and reboot events, delivered by libvirt's
  default event loop on a thread of its own, plus a comparison of the
  running domains on every tick, so nothing is missed across a libvirtd
  restart.
* Threads: vCPU threads and every other QEMU thread from /proc; vhost
  kernel threads by name.
* Enforcement: vCPU, emulator and I/O-thread pins through libvirt, live
  only (Nova's persistent XML is left alone); vhost threads with
  ``sched_setaffinity``.
* Channel: one ``<shmem>`` ivshmem-plain device per guest, named after
  its uuid, whose page is initialized before the device is hot-attached
  (as migration master).
"""

import collections
import logging
import os
import threading
import time
from xml.sax import saxutils

from ufo_agent.channel import host_channel
from ufo_agent.driver import base
from ufo_agent.hypervisor import domain as domain_xml
from ufo_agent.hypervisor import policy
from ufo_agent.hypervisor import procfs
from ufo_agent.hypervisor import sysfs

LOG = logging.getLogger(__name__)

_event_loop_started = False
_event_loop_lock = threading.Lock()


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


class _Tracked:
    """What the driver keeps per managed guest."""

    def __init__(self, guest, dom_id, pid, channel):
        self.guest = guest
        self.dom_id = dom_id
        self.pid = pid
        self.channel = channel
        self.threads = None


class LibvirtDriver(base.HypervisorDriver):
    """:class:`HypervisorDriver` over libvirt-python."""

    def __init__(self, uri='qemu:///system', managed_cpus=frozenset(),
                 manage_non_nova=False, shm_dir='/dev/shm',
                 name_prefix='ufo-', shm_size_mib=1, read_retries=100,
                 attach_channels=True, run_dir='/run/libvirt/qemu',
                 proc_root='/proc', sysfs_root=sysfs.CPU_ROOT):
        import libvirt
        self.libvirt = libvirt
        self.uri = uri
        self.managed_cpus = frozenset(managed_cpus)
        self.manage_non_nova = manage_non_nova
        self.shm_dir = shm_dir
        self.name_prefix = name_prefix
        self.shm_size_mib = shm_size_mib
        self.read_retries = read_retries
        self.attach_channels = attach_channels
        self.run_dir = run_dir
        self.proc_root = proc_root
        self.sysfs_root = sysfs_root
        self._conn = None
        self._tracked = {}
        self._skipped = {}            # uuid -> reason (logged once)
        self._events = collections.deque()
        self._events_lock = threading.Lock()
        _start_event_loop(libvirt)
        self._connect()

    # -- connection --------------------------------------------------------
    def _connect(self):
        if self._conn is not None:
            try:
                if self._conn.isAlive():
                    return self._conn
            except self.libvirt.libvirtError:
                pass
            self._conn = None
        try:
            conn = self.libvirt.open(self.uri)
        except self.libvirt.libvirtError as exc:
            raise base.DriverError('cannot connect to %s: %s'
                                   % (self.uri, exc))
        lv = self.libvirt
        conn.domainEventRegisterAny(
            None, lv.VIR_DOMAIN_EVENT_ID_LIFECYCLE, self._on_lifecycle, None)
        conn.domainEventRegisterAny(
            None, lv.VIR_DOMAIN_EVENT_ID_REBOOT, self._on_reboot, None)
        conn.setKeepAlive(5, 3)
        self._conn = conn
        LOG.info('Connected to %s', self.uri)
        return conn

    def _call(self, what, func, *args):
        try:
            return func(*args)
        except self.libvirt.libvirtError as exc:
            try:
                alive = self._conn is not None and self._conn.isAlive()
            except self.libvirt.libvirtError:
                alive = False
            if not alive:
                self._conn = None
            raise base.DriverError('%s: %s' % (what, exc))

    def _on_lifecycle(self, conn, dom, event, detail, opaque):
        lv = self.libvirt
        mapping = {
            lv.VIR_DOMAIN_EVENT_STARTED: base.GuestEvent.STARTED,
            lv.VIR_DOMAIN_EVENT_RESUMED: base.GuestEvent.STARTED,
            lv.VIR_DOMAIN_EVENT_STOPPED: base.GuestEvent.STOPPED,
            lv.VIR_DOMAIN_EVENT_SUSPENDED: base.GuestEvent.STOPPED,
            lv.VIR_DOMAIN_EVENT_SHUTDOWN: None,
            lv.VIR_DOMAIN_EVENT_UNDEFINED: base.GuestEvent.UNDEFINED,
        }
        kind = mapping.get(event)
        if kind is not None:
            with self._events_lock:
                self._events.append((dom.UUIDString(), kind))

    def _on_reboot(self, conn, dom, opaque):
        with self._events_lock:
            self._events.append((dom.UUIDString(), base.GuestEvent.REBOOTED))

    # -- inventory ---------------------------------------------------------
    def host_cpus(self):
        return sysfs.host_cpus(self.sysfs_root)

    def _all_cpus(self):
        return sysfs.host_cpus(self.sysfs_root).online

    def _pid(self, name):
        try:
            with open(os.path.join(self.run_dir, name + '.pid')) as handle:
                return int(handle.read().strip())
        except (OSError, ValueError):
            return None

    def guests(self):
        conn = self._connect()
        domains = self._call('list domains', conn.listAllDomains,
                             self.libvirt.VIR_CONNECT_LIST_DOMAINS_RUNNING)
        seen = set()
        for dom in domains:
            uuid = dom.UUIDString()
            seen.add(uuid)
            tracked = self._tracked.get(uuid)
            if tracked is not None and tracked.dom_id == dom.ID():
                continue
            try:
                self._adopt(dom, uuid, tracked)
            except (base.DriverError, domain_xml.DomainXMLError,
                    OSError, ValueError) as exc:
                LOG.warning('Not managing domain %s: %s', uuid, exc)
                self._skipped[uuid] = str(exc)
        for uuid in list(self._tracked):
            if uuid not in seen:
                self._drop(uuid, base.GuestEvent.STOPPED)
        return [t.guest for t in self._tracked.values()]

    def _adopt(self, dom, uuid, tracked):
        xml = self._call('XML of %s' % uuid, dom.XMLDesc, 0)
        # The persistent definition holds Nova's pins, never ufo-agent's
        # live ones: it decides the policy and what to restore.
        persistent = bool(self._call('persistence of %s' % uuid,
                                     dom.isPersistent))
        if persistent:
            parsed = domain_xml.parse_domain(self._call(
                'XML of %s' % uuid, dom.XMLDesc,
                self.libvirt.VIR_DOMAIN_XML_INACTIVE))
        else:
            parsed = domain_xml.parse_domain(xml)
        verdict = policy.decide(parsed, self.managed_cpus,
                                self.manage_non_nova, persistent)
        if not verdict.managed:
            if self._skipped.get(uuid) != verdict.reason:
                LOG.info('Not managing domain %s (%s): %s', uuid,
                         parsed.name, verdict.reason)
                self._skipped[uuid] = verdict.reason
            return
        if tracked is not None:
            # Same uuid, new QEMU process (hard reboot, migration back).
            self._drop(uuid, base.GuestEvent.STARTED)
        pid = self._pid(parsed.name)
        if pid is None:
            raise base.DriverError('no pid file for %s' % parsed.name)
        restore_vcpu = parsed.vcpu_cpuset or self._all_cpus()
        restore_emu = (parsed.emulatorpin if persistent else None) or \
            restore_vcpu
        channel = None
        if self.attach_channels:
            channel = self._ensure_channel(dom, uuid, parsed, xml)
        guest = base.Guest(uuid, parsed.nova.name if parsed.nova else
                           parsed.name, verdict.vcpus,
                           verdict.vm_class.value, frozenset(restore_vcpu),
                           frozenset(restore_emu), channel is not None)
        self._tracked[uuid] = _Tracked(guest, dom.ID(), pid, channel)
        self._skipped.pop(uuid, None)

    def _ensure_channel(self, dom, uuid, parsed, xml):
        name = host_channel.shm_name(uuid, self.name_prefix)
        path = os.path.join(self.shm_dir, name)
        attached = ("<shmem name='%s'" % name) in xml or \
            ('<shmem name="%s"' % name) in xml
        try:
            channel = host_channel.HostChannel(
                path, parsed.vcpus, size=self.shm_size_mib * 1024 * 1024)
            # Keeps a live guest's state: a restarted agent picks up.
            channel.initialize()
        except (OSError, ValueError) as exc:
            LOG.warning('No channel for %s: %s', uuid, exc)
            return None
        if not attached:
            host_channel.hand_to_qemu(path)
            device = ("<shmem name='%s' role='master'>"
                      "<model type='ivshmem-plain'/>"
                      "<size unit='M'>%d</size></shmem>"
                      % (saxutils.escape(name), self.shm_size_mib))
            try:
                self._call('attach channel to %s' % uuid,
                           dom.attachDeviceFlags, device,
                           self.libvirt.VIR_DOMAIN_AFFECT_LIVE)
                LOG.info('Attached UFO channel %s to %s', name, uuid)
            except base.DriverError as exc:
                LOG.warning('%s', exc)
                channel.close()
                return None
        return channel

    def _drop(self, uuid, event):
        tracked = self._tracked.pop(uuid, None)
        if tracked is not None and tracked.channel is not None:
            tracked.channel.close()
        with self._events_lock:
            self._events.append((uuid, event))

    def events(self):
        with self._events_lock:
            out = list(self._events)
            self._events.clear()
        for uuid, event in out:
            tracked = self._tracked.get(uuid)
            if event == base.GuestEvent.REBOOTED and tracked is not None:
                tracked.threads = None
                if tracked.channel is not None:
                    tracked.channel.reset_history()
            elif event in (base.GuestEvent.STOPPED,
                           base.GuestEvent.UNDEFINED) and tracked:
                self._tracked.pop(uuid)
                if tracked.channel is not None:
                    tracked.channel.close()
        # A stopped domain that no longer exists (transient, or undefined
        # meanwhile) is gone for good; drop duplicates (callback and poll).
        unique = []
        for uuid, event in out:
            if event == base.GuestEvent.STOPPED and not self._exists(uuid):
                event = base.GuestEvent.UNDEFINED
            if (uuid, event) not in unique:
                unique.append((uuid, event))
        return unique

    def _exists(self, uuid):
        try:
            self._connect().lookupByUUIDString(uuid)
        except self.libvirt.libvirtError as exc:
            return exc.get_error_code() != self.libvirt.VIR_ERR_NO_DOMAIN
        except base.DriverError:
            return True
        return True

    # -- observation ---------------------------------------------------------
    def _get(self, uuid):
        tracked = self._tracked.get(uuid)
        if tracked is None:
            raise base.DriverError('guest %s is not managed' % uuid)
        return tracked

    def _threads(self, tracked):
        if tracked.threads is None:
            try:
                tracked.threads = procfs.qemu_threads(tracked.pid,
                                                      self.proc_root)
            except OSError as exc:
                raise base.DriverError('threads of %s: %s'
                                       % (tracked.guest.uuid, exc))
        return tracked.threads

    def observe(self, uuid):
        tracked = self._get(uuid)
        threads = self._threads(tracked)
        now = time.monotonic()
        cpu = wait = slices = emu = 0
        try:
            for tid in threads.vcpus.values():
                stat = procfs.schedstat(tracked.pid, tid, self.proc_root)
                cpu += stat.cpu_ns
                wait += stat.wait_ns
                slices += stat.slices
            for tid in threads.others:
                try:
                    emu += procfs.schedstat(tracked.pid, tid,
                                            self.proc_root).cpu_ns
                except FileNotFoundError:
                    tracked.threads = None      # a worker came or went
            for pid in threads.vhost:
                emu += procfs.schedstat(pid, None, self.proc_root).cpu_ns
        except FileNotFoundError as exc:
            tracked.threads = None
            raise base.DriverError('guest %s: %s' % (uuid, exc))
        report = None
        if tracked.channel is not None:
            report = tracked.channel.read_guest(self.read_retries)
        return base.Observation(now, cpu, wait, slices, emu, report)

    # -- enforcement ---------------------------------------------------------
    def _dom(self, uuid):
        conn = self._connect()
        return self._call('domain %s' % uuid, conn.lookupByUUIDString, uuid)

    def _cpumap(self, cpus):
        width = max(cpus) + 1 if cpus else 1
        width = max(width, max(self.managed_cpus, default=0) + 1,
                    os.cpu_count() or 1)
        return tuple(cpu in cpus for cpu in range(width))

    def pin_vcpus(self, uuid, cpus):
        tracked = self._get(uuid)
        dom = self._dom(uuid)
        cpumap = self._cpumap(cpus)
        vcpus = self._threads(tracked).vcpus or {
            i: None for i in range(tracked.guest.vcpus)}
        for index in sorted(vcpus):
            self._call('pin vCPU %d of %s' % (index, uuid),
                       dom.pinVcpuFlags, index, cpumap,
                       self.libvirt.VIR_DOMAIN_AFFECT_LIVE)

    def pin_emulator(self, uuid, cpus):
        tracked = self._get(uuid)
        dom = self._dom(uuid)
        cpumap = self._cpumap(cpus)
        live = self.libvirt.VIR_DOMAIN_AFFECT_LIVE
        self._call('pin emulator of %s' % uuid, dom.pinEmulator, cpumap,
                   live)
        try:
            iothreads = dom.ioThreadInfo(live)
        except self.libvirt.libvirtError:
            iothreads = []
        for info in iothreads:
            self._call('pin I/O thread %d of %s' % (info[0], uuid),
                       dom.pinIOThread, info[0], cpumap, live)
        for pid in self._threads(tracked).vhost:
            try:
                os.sched_setaffinity(pid, cpus)
            except OSError as exc:
                LOG.warning('Cannot pin vhost thread %d of %s: %s', pid,
                            uuid, exc)

    def read_pins(self, uuid):
        self._get(uuid)
        dom = self._dom(uuid)
        live = self.libvirt.VIR_DOMAIN_AFFECT_LIVE
        vcpus = self._call('pins of %s' % uuid, dom.vcpuPinInfo, live)
        emulator = self._call('emulator pin of %s' % uuid,
                              dom.emulatorPinInfo, live)
        as_set = (lambda bits: frozenset(i for i, on in enumerate(bits)
                                         if on))
        return frozenset(as_set(m) for m in vcpus), as_set(emulator)

    def set_vcpu_target(self, uuid, vcpus):
        tracked = self._get(uuid)
        if tracked.channel is None:
            return None
        try:
            return tracked.channel.set_target(
                max(1, min(vcpus, tracked.channel.max_vcpus)))
        except (OSError, ValueError) as exc:
            raise base.DriverError('target of %s: %s' % (uuid, exc))

    def acknowledged(self, uuid, seq):
        tracked = self._get(uuid)
        if tracked.channel is None:
            return True
        report = tracked.channel.read_guest(self.read_retries)
        return report.ok and report.sample.ack_target_seq == seq

    def heartbeat(self):
        for tracked in self._tracked.values():
            if tracked.channel is not None:
                tracked.channel.beat()

    def release(self, uuid):
        tracked = self._get(uuid)
        errors = []
        if tracked.channel is not None:
            try:
                tracked.channel.set_target(tracked.channel.max_vcpus)
            except (OSError, ValueError) as exc:
                errors.append('target: %s' % exc)
        for step, cpus in ((self.pin_vcpus, tracked.guest.restore_vcpu_cpus),
                           (self.pin_emulator,
                            tracked.guest.restore_emulator_cpus)):
            try:
                step(uuid, cpus)
            except base.DriverError as exc:
                errors.append(str(exc))
        if errors:
            raise base.DriverError('release of %s: %s'
                                   % (uuid, '; '.join(errors)))

    def forget(self, uuid):
        tracked = self._tracked.pop(uuid, None)
        if tracked is not None and tracked.channel is not None:
            tracked.channel.close()
        path = os.path.join(self.shm_dir,
                            host_channel.shm_name(uuid, self.name_prefix))
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass

    def remove_stale_pages(self):
        """Delete the pages of domains that no longer exist."""
        conn = self._connect()
        known = {dom.UUIDString() for dom in self._call(
            'list domains', conn.listAllDomains, 0)}
        removed = []
        for name in os.listdir(self.shm_dir):
            if not name.startswith(self.name_prefix):
                continue
            uuid = name[len(self.name_prefix):]
            if uuid not in known and len(uuid) == 36:
                os.unlink(os.path.join(self.shm_dir, name))
                removed.append(uuid)
        return removed

    def close(self):
        for tracked in self._tracked.values():
            if tracked.channel is not None:
                tracked.channel.close()
        self._tracked.clear()
        if self._conn is not None:
            try:
                self._conn.close()
            except self.libvirt.libvirtError:
                pass
            self._conn = None
