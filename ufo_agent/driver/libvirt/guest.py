"""One managed domain: its threads, counters, pins and channel.

Pins go through libvirt, live only (Nova's persistent XML is left
alone): vCPUs, the emulator and I/O threads; vhost kernel threads get
``sched_setaffinity``. Threads and CPU counters come from /proc, traffic
counters from libvirt's bulk stats. The domain is looked up by uuid for
every operation (for the stats, once per connection), so a reconnected
:class:`~ufo_agent.driver.libvirt.host.Host` serves it too.
"""

import logging
import os
import time

from ufo_agent.driver import base
from ufo_agent.hypervisor import cgroup
from ufo_agent.hypervisor import procfs

LOG = logging.getLogger(__name__)


def cpumap(cpus, managed_cpus):
    """libvirt's CPU map of ``cpus``.

    As wide as the highest of those CPUs, the managed CPUs and the host's
    CPU count: libvirt leaves the CPUs beyond a short map as they were.
    """
    width = max(cpus) + 1 if cpus else 1
    width = max(width, max(managed_cpus, default=0) + 1,
                os.cpu_count() or 1)
    return tuple(cpu in cpus for cpu in range(width))


def _as_set(bits):
    return frozenset(i for i, on in enumerate(bits) if on)


# NicCounters fields from libvirt's bulk stats names.
_NIC_STATS = ('rx.pkts', 'tx.pkts', 'rx.bytes', 'tx.bytes')


def nic_counters(stats):
    """{NIC name: NicCounters} of a bulk stats record.

    libvirt counts from the guest's side (qemuDomainGetStatsInterface):
    it swaps the host tap's counters (type ethernet, bridge, a network
    of bridges) and Open vSwitch's (vhostuser), and takes macvtap's as
    they are (direct), whose host view is the guest's. A NIC libvirt
    names no host device for (user, hostdev) and one lacking a counter
    are left out. None without ``net.count``: the domain is not running.
    """
    count = stats.get('net.count')
    if count is None:
        return None
    out = {}
    for index in range(count):
        prefix = 'net.%d.' % index
        name = stats.get(prefix + 'name')
        values = [stats.get(prefix + key) for key in _NIC_STATS]
        if name is not None and None not in values:
            out[name] = base.NicCounters(*values)
    return out


class Guest:
    """A running domain the driver manages.

    ``info`` is the :class:`~ufo_agent.driver.base.Guest` the agent loop
    sees; ``dom_id`` and ``pid`` identify the QEMU process; ``channel``
    is its :class:`~ufo_agent.channel.host_channel.HostChannel` or None.
    """

    def __init__(self, host, info, dom_id, pid, channel,
                 managed_cpus=frozenset(), proc_root='/proc'):
        self.host = host
        self.info = info
        self.dom_id = dom_id
        self.pid = pid
        self.channel = channel
        self.managed_cpus = frozenset(managed_cpus)
        self.proc_root = proc_root
        self.paused = False
        self._threads = None
        self._vhost_denied = False
        self._stats_dom = None      # (connection generation, domain)
        self._nic_failed = False

    @property
    def uuid(self):
        return self.info.uuid

    def _dom(self):
        return self.host.lookup(self.uuid)

    def _call(self, what, func, *args):
        """A libvirt call on this domain, with its deadline."""
        return self.host.call(what, func, *args, key=self.uuid)

    def _cpumap(self, cpus):
        return cpumap(cpus, self.managed_cpus)

    def rebooted(self):
        """The guest kernel starts over: find threads, restart history."""
        self._threads = None
        if self.channel is not None:
            self.channel.reset_history()

    def close(self):
        if self.channel is not None:
            self.channel.close()

    # -- observation ---------------------------------------------------------
    def threads(self):
        """QEMU's threads, from /proc, cached until one comes or goes."""
        if self._threads is None:
            try:
                self._threads = procfs.qemu_threads(self.pid, self.proc_root)
            except OSError as exc:
                raise base.DriverError('threads of %s: %s'
                                       % (self.uuid, exc))
        return self._threads

    def observe(self, read_retries):
        threads = self.threads()
        now = time.monotonic()
        # The page first: a guest sample it shows ended before the vCPU
        # counters below are read, so they cover it (crosscheck).
        report = None
        if self.channel is not None:
            report = self.channel.read_guest(read_retries)
        cpu = wait = slices = emu = emu_wait = 0
        try:
            for tid in threads.vcpus.values():
                stat = procfs.schedstat(self.pid, tid, self.proc_root)
                cpu += stat.cpu_ns
                wait += stat.wait_ns
                slices += stat.slices
            for tid in threads.others:
                try:
                    stat = procfs.schedstat(self.pid, tid, self.proc_root)
                except FileNotFoundError:
                    self._threads = None        # a worker came or went
                    continue
                emu += stat.cpu_ns
                emu_wait += stat.wait_ns
            for pid in threads.vhost:
                stat = procfs.schedstat(pid, None, self.proc_root)
                emu += stat.cpu_ns
                emu_wait += stat.wait_ns
        except FileNotFoundError as exc:
            self._threads = None
            raise base.DriverError('guest %s: %s' % (self.uuid, exc))
        return base.Observation(
            now, cpu, wait, slices, emu, report, emulator_wait_ns=emu_wait,
            emulator_threads=len(threads.others) + len(threads.vhost),
            nics=self._nic_counters())

    def _nic_counters(self):
        """The NICs' traffic counters, or None: they are optional."""
        host = self.host
        try:
            conn = host.get_connection()
            # libvirt asks the connection of the domains it is given, so
            # the domain must be one of ``conn``'s. Looked up once per
            # connection: a tick costs one call.
            if self._stats_dom is None or \
                    self._stats_dom[0] != host.generation:
                self._stats_dom = (host.generation, host.call(
                    'domain %s' % self.uuid, conn.lookupByUUIDString,
                    self.uuid, key=self.uuid))
            records = self._call(
                'NIC counters of %s' % self.uuid, conn.domainListGetStats,
                [self._stats_dom[1]],
                host.libvirt.VIR_DOMAIN_STATS_INTERFACE, 0)
        except base.DriverError as exc:
            self._stats_dom = None
            # Each tick would say it again.
            log = LOG.debug if self._nic_failed else LOG.warning
            self._nic_failed = True
            log('No NIC counters of %s: %s', self.uuid, exc)
            return None
        # No record: the domain went away meanwhile.
        return nic_counters(records[0][1]) if records else None

    # -- enforcement ---------------------------------------------------------
    def pin_vcpus(self, cpus):
        dom = self._dom()
        bits = self._cpumap(cpus)
        vcpus = self.threads().vcpus or {
            i: None for i in range(self.info.vcpus)}
        for index in sorted(vcpus):
            self._call('pin vCPU %d of %s' % (index, self.uuid),
                       dom.pinVcpuFlags, index, bits,
                       self.host.libvirt.VIR_DOMAIN_AFFECT_LIVE)

    def pin_emulator(self, cpus):
        self._pin_other_threads('pin', cpus)

    def _pin_other_threads(self, verb, cpus, iothread_cpus=None):
        """The emulator, every I/O thread and vhost thread to ``cpus``.

        ``iothread_cpus`` maps I/O thread ids to CPUs of their own.
        """
        iothread_cpus = iothread_cpus or {}
        dom = self._dom()
        lv = self.host.libvirt
        live = lv.VIR_DOMAIN_AFFECT_LIVE
        self._call('%s emulator of %s' % (verb, self.uuid), dom.pinEmulator,
                   self._cpumap(cpus), live)
        try:
            iothreads = self.host.run(self.uuid,
                                      'I/O threads of %s' % self.uuid,
                                      dom.ioThreadInfo, live)
        except lv.libvirtError:
            iothreads = []
        for thread in iothreads:
            own = iothread_cpus.get(thread[0], cpus)
            self._call('%s I/O thread %d of %s' % (verb, thread[0],
                                                   self.uuid),
                       dom.pinIOThread, thread[0], self._cpumap(own), live)
        for pid in self.threads().vhost:
            try:
                os.sched_setaffinity(pid, cpus)
            except PermissionError as exc:
                # Unprivileged (no CAP_SYS_NICE): the same on every call.
                log = LOG.debug if self._vhost_denied else LOG.warning
                self._vhost_denied = True
                log('Cannot %s vhost thread %d of %s: %s', verb, pid,
                    self.uuid, exc)
            except OSError as exc:
                LOG.warning('Cannot %s vhost thread %d of %s: %s', verb,
                            pid, self.uuid, exc)

    def read_pins(self):
        dom = self._dom()
        live = self.host.libvirt.VIR_DOMAIN_AFFECT_LIVE
        vcpus = self._call('pins of %s' % self.uuid, dom.vcpuPinInfo, live)
        emulator = self._call('emulator pin of %s' % self.uuid,
                              dom.emulatorPinInfo, live)
        return frozenset(_as_set(m) for m in vcpus), _as_set(emulator)

    def set_vcpu_target(self, vcpus):
        if self.channel is None:
            return None
        try:
            return self.channel.set_target(
                max(1, min(vcpus, self.channel.max_vcpus)))
        except (OSError, ValueError) as exc:
            raise base.DriverError('target of %s: %s' % (self.uuid, exc))

    def acknowledged(self, seq, read_retries):
        if self.channel is None:
            return True
        report = self.channel.read_guest(read_retries)
        return report.ok and report.sample.ack_target_seq == seq

    def heartbeat(self):
        if self.channel is not None:
            self.channel.beat()

    def _group(self):
        threads = self.threads()
        try:
            return cgroup.guest_group(
                self.pid, list(threads.vcpus.values()), self.proc_root)
        except cgroup.CgroupError as exc:
            raise base.DriverError('cgroup of %s: %s' % (self.uuid, exc))

    def set_vcpus_idle(self, idle):
        """Its group at idle priority (``cpu.idle``) or back."""
        try:
            cgroup.write_idle(self._group(), idle)
        except cgroup.CgroupError as exc:
            raise base.DriverError('idle priority of %s: %s'
                                   % (self.uuid, exc))

    def _restore_priority(self, pins_restored=True):
        """``cpu.idle`` 0, as libvirt creates the group: nobody else sets it.

        Not while its vCPU pins may still span other guests' CPUs: at
        normal priority there it would hurt them. A group that cannot be
        found was not set by the agent either.
        """
        try:
            group = self._group()
        except base.DriverError as exc:
            LOG.debug('No idle priority to restore: %s', exc)
            return
        try:
            if not cgroup.read_idle(group):
                return
            if not pins_restored:
                raise base.DriverError('idle priority of %s kept: its vCPU '
                                       'pins are not restored' % self.uuid)
            cgroup.write_idle(group, False)
        except cgroup.CgroupError as exc:
            raise base.DriverError('idle priority of %s: %s'
                                   % (self.uuid, exc))

    def _restore_vcpus(self):
        """Each vCPU back to exactly what the definition gives it."""
        info = self.info
        if not info.restore_vcpus:
            self.pin_vcpus(info.restore_vcpu_cpus)
            return
        dom = self._dom()
        live = self.host.libvirt.VIR_DOMAIN_AFFECT_LIVE
        present = self.threads().vcpus or info.restore_vcpus
        for index in sorted(present):
            cpus = info.restore_vcpus.get(index, info.restore_vcpu_cpus)
            self._call('restore vCPU %d of %s' % (index, self.uuid),
                       dom.pinVcpuFlags, index, self._cpumap(cpus), live)

    def _restore_emulator(self):
        """Emulator, each I/O thread and vhost back to the definition."""
        self._pin_other_threads('restore', self.info.restore_emulator_cpus,
                                self.info.restore_iothreads)

    def release(self):
        """All vCPUs online and the definition's pins back, per vCPU.

        Every step is tried.

        Raises one DriverError naming every step that failed.
        """
        errors = []
        if self.channel is not None:
            try:
                self.channel.set_target(self.channel.max_vcpus)
            except (OSError, ValueError) as exc:
                errors.append('target: %s' % exc)
        steps = [('vCPU pins', self._restore_vcpus),
                 ('emulator pins', self._restore_emulator),
                 ('priority', self._restore_priority)]
        failed = set()
        for what, step in steps:
            try:
                if what == 'priority':
                    step('vCPU pins' not in failed)
                else:
                    step()
            except base.DriverError as exc:
                failed.add(what)
                errors.append(str(exc))
        if errors:
            raise base.DriverError('release of %s: %s'
                                   % (self.uuid, '; '.join(errors)))
