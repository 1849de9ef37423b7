"""One managed domain: its threads, counters, pins and channel.

Pins go through libvirt, live only (Nova's persistent XML is left
alone): vCPUs, the emulator and I/O threads; vhost workers get
``sched_setaffinity``. Threads and CPU counters come from /proc, traffic
counters from libvirt's bulk stats (read by the driver for every guest
at once). The domain is looked up by uuid for every operation, so a
reconnected :class:`~ufo_agent.driver.libvirt.host.Host` serves it too.

The task list of QEMU is listed again on every use: vCPUs are plugged and
unplugged, workers come and go. Every vCPU the definition has is pinned,
present or not: libvirt keeps the pin of an absent vCPU and applies it
when the vCPU is plugged, so a plugged vCPU starts on the planned CPUs.
"""

import errno
import functools
import logging
import os
import time

from ufo_agent.driver import base
from ufo_agent.hypervisor import cgroup
from ufo_agent.hypervisor import procfs

LOG = logging.getLogger(__name__)


def cpumap(cpus, managed_cpus, host_cpus=None):
    """libvirt's CPU map of ``cpus``.

    As wide as the highest of those CPUs, the managed CPUs and the host's
    CPU count (``host_cpus``; None: ``os.cpu_count()``): libvirt leaves
    the CPUs beyond a short map as they were.
    """
    if host_cpus is None:
        host_cpus = os.cpu_count() or 1
    return _cpumap(frozenset(cpus), frozenset(managed_cpus), host_cpus)


@functools.lru_cache(maxsize=1024)
def _cpumap(cpus, managed_cpus, host_cpus):
    # A host pins a few hundred distinct sets over and over.
    width = max(cpus) + 1 if cpus else 1
    width = max(width, max(managed_cpus, default=0) + 1, host_cpus)
    return tuple(cpu in cpus for cpu in range(width))


@functools.lru_cache(maxsize=1024)
def cpu_set(bits):
    # The drift check reads a few pins that rarely change, each as wide
    # as the host.
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
    get = stats.get
    for index in range(count):
        name, rx_pkts, tx_pkts, rx_bytes, tx_bytes = _nic_keys(index)
        name = get(name)
        values = (get(rx_pkts), get(tx_pkts), get(rx_bytes), get(tx_bytes))
        if name is not None and None not in values:
            out[name] = base.NicCounters._make(values)
    return out


@functools.lru_cache(maxsize=64)
def _nic_keys(index):
    # Every guest's record, on every tick: the names made once.
    prefix = 'net.%d.' % index
    return (prefix + 'name',) + tuple(prefix + key for key in _NIC_STATS)


class Guest:
    """A running domain the driver manages.

    ``info`` is the :class:`~ufo_agent.driver.base.Guest` the agent loop
    sees; ``dom_id`` and ``pid`` identify the QEMU process; ``channel``
    is its :class:`~ufo_agent.channel.host_channel.HostChannel` or None.
    """

    def __init__(self, host, info, dom_id, pid, channel,
                 managed_cpus=frozenset(), proc_root='/proc',
                 domain_name=None, start_time=None, vhost_kthreads=None,
                 clock=None, cpu_count=None):
        self.host = host
        self.info = info
        self.dom_id = dom_id
        self.pid = pid
        # libvirt's name of the domain (its pid file), and when its QEMU
        # started: with ``pid``, the identity of the QEMU process.
        self.domain_name = domain_name
        self.start_time = start_time
        # Set when /proc no longer has the process; ``checked`` is the
        # connection generation its identity was last checked in.
        self.process_gone = False
        self.checked = host.generation
        self.channel = channel
        self.managed_cpus = frozenset(managed_cpus)
        self.proc_root = proc_root
        self.paused = False
        # When observations are made (None: time.monotonic).
        self.clock = clock
        self._threads = None
        self._task_dir = os.path.join(proc_root, str(pid), 'task')
        self._task_fd = None        # the task directory, kept open
        self._task_names = None
        self._task_mark = None      # (links, mtime) of the task list read
        self._settle = False        # read the names once more
        # Scans /proc for vhost kernel threads (one scan serves every
        # guest); its last answer is kept until a worker is gone.
        self._scan_kthreads = vhost_kthreads or (
            lambda: procfs.vhost_kernel_threads(proc_root))
        self._kthreads = None
        # The host's CPU count for the width of a CPU map (None:
        # os.cpu_count(), which reads sysfs on every call).
        self._cpu_count = cpu_count or (lambda: None)
        # Its threads' schedstat files, kept open for the thread set
        # last observed.
        self._counters = procfs.ThreadCounters(proc_root)
        self._counted = None
        self._vcpu_keys = self._other_keys = ()
        # The CPUs the vCPUs were last pinned to (None: not yet, or each
        # to its own), and the vCPU threads last observed.
        self._vcpu_cpus = None
        self._seen_vcpus = None
        self._seen_from = None      # the vCPU map _seen_vcpus copies
        self._vhost_denied = False
        self._iothreads_unknown = False

    @property
    def uuid(self):
        return self.info.uuid

    def _dom(self):
        """The domain, while it still runs the QEMU adopted.

        Looked up by uuid, a domain restarted unseen (events lost, the
        listing failing) is another QEMU, maybe of another policy: no
        call made for this one may reach it. The driver adopts it anew.
        """
        return self._same_qemu(self.host.lookup(self.uuid))

    def _same_qemu(self, dom):
        dom_id = dom.ID()
        if dom_id != self.dom_id:
            raise base.DriverError(
                'domain %s runs another QEMU (ID %s, adopted as %s)'
                % (self.uuid, dom_id, self.dom_id))
        return dom

    def _on_dom(self, calls, wait=None):
        """The domain, as :meth:`_dom` finds it, and ``calls`` made on it.

        ``calls`` are ``(what, virDomain method name or a function of the
        domain, args)``. The lookup and the calls are handed to the
        deadline thread at once (:meth:`.Host.call_each`), each with its
        deadline (``wait``: see :meth:`.Host.call_each`). Returns (the
        domain, the calls' values).
        """
        conn = self.host.get_connection()
        found = []

        def lookup():
            found.append(self._same_qemu(conn.lookupByUUIDString(self.uuid)))

        def on_dom(method, args):
            if isinstance(method, str):
                return getattr(found[0], method)(*args)
            return method(found[0], *args)

        values = self.host.call_each(
            [('domain %s' % self.uuid, lookup, ())] +
            [(what, on_dom, (method, args)) for what, method, args in calls],
            key=self.uuid, wait=wait)
        return found[0], values[1:]

    def _call(self, what, func, *args):
        """A libvirt call on this domain, with its deadline."""
        return self.host.call(what, func, *args, key=self.uuid)

    def _cpumap(self, cpus):
        return cpumap(cpus, self.managed_cpus, self._cpu_count())

    def rebooted(self):
        """The guest kernel starts over: find threads, restart history."""
        self._threads = None
        self._kthreads = None
        if self.channel is not None:
            self.channel.guest_restarted()

    def stopped(self):
        """Its QEMU exited: its page's guest area is the past."""
        if self.channel is not None:
            try:
                self.channel.guest_stopped()
            except OSError as exc:
                LOG.warning('Could not clear the page of %s: %s',
                            self.uuid, exc)

    def close(self):
        self._counters.close()
        self._close_task_dir()
        if self.channel is not None:
            self.channel.close()

    # -- observation ---------------------------------------------------------
    def threads(self):
        """QEMU's threads, from /proc.

        The task list is listed again when its directory changed: its
        link count (on procfs, two plus the threads; elsewhere, as in
        the fakes, its subdirectories) or its modification time. A
        thread that exits while another starts leaves the count as it
        was: its schedstat, read on every observation, tells (see
        :meth:`observe`). The threads' names are read again when the
        list changed, and once more on the next call: a new thread
        takes its name just after it starts.

        The directory is watched through a descriptor kept open (an
        fstat(2) costs less than half a stat(2) by path), opened again
        by path whenever the list is listed: the descriptor is always of
        the directory last listed.
        """
        try:
            opened = self._task_fd is None
            stat = self._task_stat()
            mark = (stat.st_nlink, stat.st_mtime_ns)
            if mark == self._task_mark and self._threads is not None and \
                    not self._settle:
                return self._threads
            if not opened:
                self._close_task_dir()
                stat = self._task_stat()
                mark = (stat.st_nlink, stat.st_mtime_ns)
            # Compared as listed: the names of an unchanged task list
            # come in the same order.
            names = os.listdir(self._task_dir)
            changed = self._threads is None or names != self._task_names
            if changed or self._settle:
                tids = frozenset(int(n) for n in names if n.isdigit())
                if self._kthreads is None:
                    self._kthreads = self._scan_kthreads()
                self._threads = procfs.qemu_threads(
                    self.pid, self.proc_root, tids, self._kthreads)
                self._task_names = names
                self._settle = changed
            self._task_mark = mark
        except OSError as exc:
            self._close_task_dir()
            if not os.path.exists(os.path.join(self.proc_root,
                                               str(self.pid))):
                self.process_gone = True
            raise base.DriverError('threads of %s: %s' % (self.uuid, exc))
        return self._threads

    def _task_stat(self):
        """The task directory's stat, through its kept descriptor."""
        fd = self._task_fd
        if fd is None:
            # Within the budget of the descriptors kept on /proc (the
            # threads' schedstat files share it); past it, or out of
            # descriptors, by path, as a kept one would show.
            if not procfs.keep_descriptor():
                return os.stat(self._task_dir)
            try:
                fd = os.open(self._task_dir,
                             os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
            except OSError as exc:
                procfs.release_descriptor()
                if exc.errno not in (errno.EMFILE, errno.ENFILE):
                    raise
                return os.stat(self._task_dir)
            self._task_fd = fd
        return os.fstat(fd)

    def _close_task_dir(self):
        fd, self._task_fd = self._task_fd, None
        if fd is not None:
            os.close(fd)
            procfs.release_descriptor()

    def vcpu_indexes(self):
        """Every vCPU index to pin: the definition's, and any present."""
        try:
            present = set(self.threads().vcpus)
        except base.DriverError:
            present = set()     # libvirt pins by index all the same
        indexes = present | set(self.info.restore_vcpus)
        return sorted(indexes or range(self.info.vcpus))

    def observe(self, read_retries, nics=None):
        """The guest's :class:`~ufo_agent.driver.base.Observation`.

        ``nics`` is its NIC counters, from the driver's bulk stats.
        """
        threads = self.threads()
        self._pin_plugged(threads.vcpus)
        now = time.monotonic() if self.clock is None else self.clock()
        # The page first: a guest sample it shows ended before the vCPU
        # counters below are read, so they cover it (crosscheck).
        report = None
        if self.channel is not None:
            report = self.channel.read_guest(read_retries)
        counters = self._counters
        cpu, wait, slices, gone = self._totals(threads)
        if gone:
            # A vCPU thread is gone though the task list looked the same
            # (one thread exited as another started): listed again.
            self._threads = None
            threads = self.threads()
            self._pin_plugged(threads.vcpus)
            cpu, wait, slices, gone = self._totals(threads)
        if gone:
            self._threads = None
            raise base.DriverError('guest %s: vCPU thread %d of %d is gone'
                                   % (self.uuid, gone[0][1], gone[0][0]))
        # A worker gone is left out: the task list is listed again next.
        emu, emu_wait, _, gone = counters.totals(self._other_keys)
        if gone:
            self._threads = None
            if any(pid != self.pid for pid, _ in gone):
                self._kthreads = None       # a NIC went: scan again
        return base.Observation(
            now, cpu, wait, slices, emu, report, emulator_wait_ns=emu_wait,
            emulator_threads=len(threads.others) + len(threads.vhost),
            nics=nics)

    def _totals(self, threads):
        """(cpu, wait, slices, gone) of the vCPU threads (as totals())."""
        counters = self._counters
        if threads is not self._counted:
            pid = self.pid
            self._counted = threads
            self._vcpu_keys = tuple((pid, tid)
                                    for tid in threads.vcpus.values())
            # The emulator pool's: every other thread and vhost worker.
            self._other_keys = tuple((pid, tid) for tid in threads.others) \
                + tuple(threads.vhost)
            counters.keep(set(self._vcpu_keys) | set(self._other_keys))
        return counters.totals(self._vcpu_keys)

    def _pin_plugged(self, vcpus):
        """Pin a vCPU thread that appeared since the last observation.

        libvirt starts a plugged vCPU on the pin it keeps for it, which
        is the agent's unless someone changed it meanwhile: it is given
        the CPUs the agent last gave the vCPUs, at once, rather than at
        the next drift check.
        """
        if vcpus is self._seen_from:
            return              # the same task list: nothing plugged
        self._seen_from = vcpus
        before, self._seen_vcpus = self._seen_vcpus, dict(vcpus)
        if before is None or self._vcpu_cpus is None:
            return
        plugged = sorted(index for index, tid in vcpus.items()
                         if before.get(index) != tid)
        if not plugged:
            return
        try:
            dom = self._dom()
            bits = self._cpumap(self._vcpu_cpus)
            for index in plugged:
                LOG.info('vCPU %d of %s was plugged: pinning it with the '
                         'others', index, self.uuid)
                self._call('pin vCPU %d of %s' % (index, self.uuid),
                           dom.pinVcpuFlags, index, bits,
                           self.host.libvirt.VIR_DOMAIN_AFFECT_LIVE)
        except base.DriverError as exc:
            # The drift check finds it and has it pinned again.
            LOG.warning('Could not pin a plugged vCPU of %s: %s',
                        self.uuid, exc)

    # -- enforcement ---------------------------------------------------------
    def pin_vcpus(self, cpus, wait=True):
        """Every vCPU of the definition, plugged or not, and any present.

        ``wait``: as :meth:`.Host.call_each`'s; True, the pin wait (a
        restore waits the whole deadline: nothing else waits for it).
        """
        if wait is True:
            wait = self.host.pin_wait
        self._run(self.pin_calls(base.VCPU, cpus), wait)

    def pin_emulator(self, cpus):
        self._run(self.pin_calls(base.EMULATOR, cpus), self.host.pin_wait)
        self.pinned(base.EMULATOR, cpus)

    def pin_calls(self, kind, cpus):
        """The calls of a pin of ``kind``, for :meth:`.Host.call_batch`.

        Once they all returned, :meth:`pinned` finishes the pin.
        """
        conn = self.host.get_connection()
        if kind == base.VCPU:
            bits = self._cpumap(cpus)
            self._vcpu_cpus = frozenset(cpus)
            return self._vcpu_pins(conn, bits, self.vcpu_indexes())
        return self._other_pins(conn, 'pin', cpus, {})

    def pinned(self, kind, cpus):
        """What a pin does beside libvirt once its calls returned."""
        if kind == base.EMULATOR:
            self._pin_vhost('pin', cpus)

    def _run(self, calls, wait):
        outcome, = self.host.call_batch([(self.uuid, calls)], wait)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    def _vcpu_pins(self, conn, bits, indexes):
        live = self.host.libvirt.VIR_DOMAIN_AFFECT_LIVE
        dom = yield ('domain %s' % self.uuid, self._lookup_on, (conn,))
        for index in indexes:
            yield ('pin vCPU %d of %s' % (index, self.uuid),
                   dom.pinVcpuFlags, (index, bits, live))

    def _other_pins(self, conn, verb, cpus, iothread_cpus):
        """The emulator's and every I/O thread's pin calls.

        ``iothread_cpus`` maps I/O thread ids to CPUs of their own.
        """
        lv = self.host.libvirt
        live = lv.VIR_DOMAIN_AFFECT_LIVE

        def iothread_info(dom):
            # Not the pin's failure: the definition's are pinned then.
            try:
                return dom.ioThreadInfo(live)
            except lv.libvirtError as exc:
                return exc

        dom = yield ('domain %s' % self.uuid, self._lookup_on, (conn,))
        yield ('%s emulator of %s' % (verb, self.uuid), dom.pinEmulator,
               (self._cpumap(cpus), live))
        reported = yield ('I/O threads of %s' % self.uuid, iothread_info,
                          (dom,))
        for iothread in self._iothread_ids(reported):
            yield ('%s I/O thread %d of %s' % (verb, iothread, self.uuid),
                   dom.pinIOThread,
                   (iothread, self._cpumap(iothread_cpus.get(iothread, cpus)),
                    live))

    def _pin_other_threads(self, verb, cpus, iothread_cpus=None):
        """The emulator, every I/O thread and vhost thread to ``cpus``."""
        # A restore waits the whole deadline: nothing else waits for it.
        wait = self.host.pin_wait if verb == 'pin' else None
        self._run(self._other_pins(self.host.get_connection(), verb, cpus,
                                   iothread_cpus or {}), wait)
        self._pin_vhost(verb, cpus)

    def _pin_vhost(self, verb, cpus):
        for _, tid in self.threads().vhost:
            try:
                os.sched_setaffinity(tid, cpus)
            except PermissionError as exc:
                # Unprivileged (no CAP_SYS_NICE): the same on every call.
                log = LOG.debug if self._vhost_denied else LOG.warning
                self._vhost_denied = True
                log('Cannot %s vhost thread %d of %s: %s', verb, tid,
                    self.uuid, exc)
            except OSError as exc:
                LOG.warning('Cannot %s vhost thread %d of %s: %s', verb,
                            tid, self.uuid, exc)

    def _iothread_ids(self, reported):
        """The I/O threads libvirt reports, else those the definition has.

        ``reported`` is what ``ioThreadInfo`` returned, or the libvirt
        error it raised. Without libvirt's answer the definition's I/O
        threads (every one of ``<iothreads>`` and each one pinned) are
        pinned by id, so that none keeps a pin the agent wrote; an I/O
        thread added at run time and not reported cannot be known.
        """
        if isinstance(reported, self.host.libvirt.libvirtError):
            known = sorted(self.info.restore_iothreads)
            # The same on every call: said once.
            log = LOG.debug if self._iothreads_unknown else LOG.warning
            self._iothreads_unknown = True
            log('I/O threads of %s not reported (%s): pinning the %d of '
                'its definition', self.uuid, reported, len(known))
            return known
        return [thread[0] for thread in reported]

    def read_pins(self):
        """libvirt's pins, and the CPUs the kernel lets each vCPU run on.

        libvirt reports what it set; a vCPU thread the kernel has on
        other CPUs (plugged with another pin, moved by someone else)
        adds its own set. Read guest after guest (the drift check): a
        read left in flight after the pin wait makes the guest busy.
        """
        outcome, = self.host.call_batch([(self.uuid, self.pin_reads())],
                                        self.host.pin_wait)
        if isinstance(outcome, Exception):
            raise outcome
        return self.live_pins(outcome)

    def pin_reads(self):
        """The calls that read its pins, for :meth:`.Host.call_batch`.

        Their values go to :meth:`live_pins`.
        """
        return self._pin_reads(self.host.get_connection())

    def _pin_reads(self, conn):
        live = self.host.libvirt.VIR_DOMAIN_AFFECT_LIVE
        dom = yield ('domain %s' % self.uuid, self._lookup_on, (conn,))
        yield ('pins of %s' % self.uuid, dom.vcpuPinInfo, (live,))
        yield ('emulator pin of %s' % self.uuid, dom.emulatorPinInfo,
               (live,))

    def _lookup_on(self, conn):
        return self._same_qemu(conn.lookupByUUIDString(self.uuid))

    def live_pins(self, values):
        """:meth:`read_pins`'s answer from the values of :meth:`pin_reads`."""
        _, vcpus, emulator = values
        sets = {cpu_set(m) for m in vcpus}
        try:
            tids = self.threads().vcpus.values()
        except base.DriverError:
            tids = ()
        for tid in tids:
            try:
                allowed = procfs.allowed_cpus(self.pid, tid, self.proc_root)
            except (OSError, ValueError):
                continue            # gone meanwhile, or not readable
            if allowed is not None:
                sets.add(allowed)
        return frozenset(sets), cpu_set(emulator)

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
            self.pin_vcpus(info.restore_vcpu_cpus, wait=None)
            return
        # A vCPU plugged from now on starts on its own restore pin.
        self._vcpu_cpus = None
        live = self.host.libvirt.VIR_DOMAIN_AFFECT_LIVE
        self._on_dom([('restore vCPU %d of %s' % (index, self.uuid),
                       'pinVcpuFlags',
                       (index, self._cpumap(info.restore_vcpus.get(
                           index, info.restore_vcpu_cpus)), live))
                      for index in self.vcpu_indexes()])

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
