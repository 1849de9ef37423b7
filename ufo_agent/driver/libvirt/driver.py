"""The hypervisor driver for libvirt/QEMU hosts (the real one).

* Inventory: running domains, parsed from their XML (Nova metadata,
  restore pins), filtered by :mod:`ufo_agent.hypervisor.policy`.
* Events: libvirt lifecycle and reboot events (:mod:`.host`), plus a
  comparison of the active domains on every tick, so nothing is missed
  across a libvirtd restart (a new QEMU is told by its pid and start
  time, not by the domain ID, which libvirt reuses after it restarts).
  A guest is let go only when libvirt says its domain is not active: a
  paused guest, or one whose calls hang, stays managed (its QEMU and
  the live pins of its threads stay); a domain paused by an incoming
  migration or still starting is adopted once it runs.
* Guests: threads, counters, pins and release of one domain
  (:mod:`.guest`); NIC counters of every guest at once (:mod:`.nicstats`).
* Channel: one ``<shmem>`` ivshmem-plain device per guest, named after
  its uuid, whose page is initialized before the device is hot-attached
  (as migration master).
"""

import logging
import os

from ufo_agent.channel import host_channel
from ufo_agent import cpuset
from ufo_agent.driver import base
from ufo_agent.driver.libvirt import config
from ufo_agent.driver.libvirt import deadline
from ufo_agent.driver.libvirt import guest as libvirt_guest
from ufo_agent.driver.libvirt import host as libvirt_host
from ufo_agent.driver.libvirt import nicstats
from ufo_agent.hypervisor import domain as domain_xml
from ufo_agent.hypervisor import policy
from ufo_agent.hypervisor import procfs
from ufo_agent.hypervisor import sysfs

LOG = logging.getLogger(__name__)


class LibvirtDriver(base.HypervisorDriver):
    """:class:`HypervisorDriver` over libvirt-python."""

    def __init__(self, uri='qemu:///system', managed_cpus=frozenset(),
                 manage_non_nova=False, shm_dir='/dev/shm',
                 name_prefix='ufo-', shm_size_mib=1, read_retries=100,
                 attach_channels=True, run_dir='/run/libvirt/qemu',
                 proc_root='/proc', sysfs_root=sysfs.CPU_ROOT,
                 call_timeout=5.0, use_attached_channels=False,
                 qemu_user=host_channel.DEFAULT_QEMU_USER,
                 qemu_group=host_channel.DEFAULT_QEMU_GROUP,
                 clock=None, pin_wait=libvirt_host.PIN_WAIT):
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
        # Without attach_channels: still use the page of a channel that is
        # attached already, never create a page or attach a device
        # (--restore asks such guests to bring every vCPU online).
        self.use_attached_channels = use_attached_channels
        # QEMU's user and group (libvirt's qemu.conf): who gets new pages,
        # and whose pages are trusted.
        self.qemu_user = qemu_user
        self.qemu_group = qemu_group
        self.run_dir = run_dir
        self.proc_root = proc_root
        self.sysfs_root = sysfs_root
        # When an observation was made: the agent's clock (None:
        # time.monotonic).
        self.clock = clock
        self._guests = {}             # uuid -> libvirt_guest.Guest
        self._polls = 0               # guests() calls so far
        self._vhost_scan = None       # (poll, vhost kernel threads)
        self._cpus_read = None        # (poll, HostCpus)
        self._count_read = None       # (poll, os.cpu_count())
        self._skipped = {}            # uuid -> reason (logged once)
        # Running domains not adopted for want of an answer (not by
        # policy): uuid -> virDomain. Their threads' pins stand.
        self._unadopted = {}
        self._host = libvirt_host.Host(libvirt, uri, call_timeout,
                                       pin_wait)
        self._nics = nicstats.NicStats(self._host, lambda: self._guests)
        # Paused domains not to adopt yet: not running any guest code.
        self._not_ready = frozenset([
            libvirt.VIR_DOMAIN_PAUSED_MIGRATION,
            libvirt.VIR_DOMAIN_PAUSED_STARTING_UP])
        self._host.get_connection()

    # -- inventory ---------------------------------------------------------
    def host_cpus(self):
        return sysfs.host_cpus(self.sysfs_root)

    def _pid(self, name):
        try:
            with open(os.path.join(self.run_dir, name + '.pid')) as handle:
                return int(handle.read().strip())
        except (OSError, ValueError):
            return None

    def guests(self):
        """The managed guests whose QEMU runs (see the interface).

        A guest is dropped (STOPPED) only when libvirt lists it no longer
        active; one whose calls hang or fail stays, with its pins.
        """
        domains = self._host.active_domains()
        generation = self._host.generation
        self._polls += 1
        self._nics.listed(generation, {dom.UUIDString(): dom
                                       for dom, _ in domains})
        seen = set()
        unadopted = {}
        for dom, paused_reason in domains:
            uuid = dom.UUIDString()
            known = self._guests.get(uuid)
            if paused_reason == libvirt_host.UNKNOWN:
                if known is not None:
                    seen.add(uuid)      # as it was: its state is unknown
                else:
                    unadopted[uuid] = dom
                continue
            # Paused by its own live migration (the source's switchover)
            # is not paused: it leaves, or runs on if the migration fails.
            paused = paused_reason not in (
                None, self.libvirt.VIR_DOMAIN_PAUSED_MIGRATION)
            if known is not None and known.dom_id == dom.ID() and \
                    self._same_process(known, generation):
                seen.add(uuid)
                if known.paused != paused:
                    # A pause or resume whose event was missed.
                    known.paused = paused
                    self._host.queue_event(uuid, base.GuestEvent.PAUSED
                                           if paused else
                                           base.GuestEvent.RESUMED)
                continue
            if paused_reason in self._not_ready:
                # An incoming migration, or a QEMU still starting: it is
                # adopted once it runs.
                continue
            seen.add(uuid)
            if not self._host.current(generation):
                # A call hung and its connection was retired: these
                # domain objects belong to it. Adopted on the next tick.
                if uuid not in self._guests:
                    unadopted[uuid] = dom
                continue
            try:
                self._adopt(dom, uuid, known)
            except (base.DriverError, domain_xml.DomainXMLError,
                    OSError, ValueError) as exc:
                if self._skipped.get(uuid) != str(exc):
                    LOG.warning('Not managing domain %s: %s', uuid, exc)
                self._skipped[uuid] = str(exc)
                if uuid not in self._guests:
                    unadopted[uuid] = dom
                continue
            if paused and uuid in self._guests:
                # Found paused: the loop parks it like one paused now.
                self._guests[uuid].paused = True
                self._host.queue_event(uuid, base.GuestEvent.PAUSED)
        for uuid in list(self._guests):
            if uuid not in seen:
                self._drop(uuid, base.GuestEvent.STOPPED)
        self._unadopted = unadopted
        return [g.info for g in self._guests.values()]

    def unadopted_pins(self):
        """The live pins of the domains the last listing could not adopt.

        See the interface. Read with the pin wait, as the drift check
        reads a guest's: a read that does not answer holds its domain
        on unknown CPUs (None).
        """
        live = self.libvirt.VIR_DOMAIN_AFFECT_LIVE
        out = {}
        for uuid, dom in sorted(self._unadopted.items()):
            try:
                vcpus, emulator = self._host.call_each(
                    [('pins of %s' % uuid, dom.vcpuPinInfo, (live,)),
                     ('emulator pin of %s' % uuid, dom.emulatorPinInfo,
                      (live,))], key=uuid, wait=self._host.pin_wait)
            except base.DriverError as exc:
                LOG.debug('Pins of unadopted domain %s unknown: %s',
                          uuid, exc)
                out[uuid] = None
                continue
            out[uuid] = (frozenset(libvirt_guest.cpu_set(m) for m in vcpus),
                         libvirt_guest.cpu_set(emulator))
        return out

    def _same_process(self, known, generation):
        """False once the domain runs another QEMU than the one adopted.

        libvirt numbers domains again after it restarts (from the highest
        running one), so a domain destroyed and started while libvirtd
        was down (a resize to the same host) can show its old ID, and its
        events are lost. Its pid file and the process's start time tell:
        they are checked after every new connection and whenever /proc
        lost the process adopted.
        """
        if known.checked == generation and not known.process_gone:
            return True
        pid = self._pid(known.domain_name) if known.domain_name else None
        if pid is None:
            return True             # cannot tell yet: asked again later
        if pid != known.pid or procfs.start_time(
                pid, self.proc_root) != known.start_time:
            LOG.info('Domain %s runs a new QEMU (pid %d, was %d)',
                     known.uuid, pid, known.pid)
            return False
        known.checked = generation
        known.process_gone = False
        return True

    def _vhost_kthreads(self):
        """The host's vhost kernel threads: one /proc scan a poll at most."""
        if self._vhost_scan is None or self._vhost_scan[0] != self._polls:
            self._vhost_scan = (self._polls, procfs.vhost_kernel_threads(
                self.proc_root))
        return self._vhost_scan[1]

    def _poll_host_cpus(self):
        """The host's CPUs, read from sysfs once a poll at most.

        Adopting hundreds of guests at a start read them for each.
        """
        if self._cpus_read is None or self._cpus_read[0] != self._polls:
            self._cpus_read = (self._polls, self.host_cpus())
        return self._cpus_read[1]

    def _poll_cpu_count(self):
        """The host's CPU count, once a poll at most: every pin needs it.

        ``os.cpu_count()`` reads sysfs (about 10 us), and a tick makes
        dozens of pins.
        """
        if self._count_read is None or self._count_read[0] != self._polls:
            self._count_read = (self._polls, os.cpu_count() or 1)
        return self._count_read[1]

    def _adopt(self, dom, uuid, known):
        def call(what, func, *args):
            return self._host.call(what, func, *args, key=uuid)

        xml = call('XML of %s' % uuid, dom.XMLDesc, 0)
        # The persistent definition holds Nova's pins, never ufo-agent's
        # live ones: it decides the policy and what to restore.
        persistent = bool(call('persistence of %s' % uuid, dom.isPersistent))
        if persistent:
            parsed = domain_xml.parse_domain(call(
                'XML of %s' % uuid, dom.XMLDesc,
                self.libvirt.VIR_DOMAIN_XML_INACTIVE))
        else:
            parsed = domain_xml.parse_domain(xml)
        host = self._poll_host_cpus()
        verdict = policy.decide(
            parsed, self.managed_cpus, self.manage_non_nova, persistent,
            online_cpus=host.online, numa_of_cpu=host.numa_of_cpu,
            channel_name=host_channel.shm_name(uuid, self.name_prefix))
        if verdict.managed and verdict.allowed_cpus != self.managed_cpus:
            # The controller does not place guests by NUMA node yet.
            verdict = policy.Verdict(
                False, 'memory bound to the NUMA node(s) of CPUs %s: '
                'ufo-agent does not place guests by NUMA node yet'
                % cpuset.format_cpuset(verdict.allowed_cpus))
        if not verdict.managed:
            if self._skipped.get(uuid) != verdict.reason:
                LOG.info('Not managing domain %s (%s): %s', uuid,
                         parsed.name, verdict.reason)
                self._skipped[uuid] = verdict.reason
            if known is not None:
                # Its new definition is hands-off (a resize to dedicated).
                self._drop(uuid, base.GuestEvent.STOPPED)
            return
        if known is not None:
            # Same uuid, new QEMU process (hard reboot, migration back).
            self._drop(uuid, base.GuestEvent.STARTED)
        pid = self._pid(parsed.name)
        if pid is None:
            raise base.DriverError('no pid file for %s' % parsed.name)
        restore_vcpu = frozenset().union(*verdict.restore_vcpus.values())
        restore_emu = verdict.restore_emulator
        channel = None
        if self.attach_channels or self.use_attached_channels:
            channel = self._ensure_channel(dom, uuid, parsed, xml)
            if channel is not None and known is not None:
                channel.guest_restarted()
        info = base.Guest(uuid, parsed.nova.name if parsed.nova else
                          parsed.name, verdict.vcpus,
                          verdict.vm_class.value, restore_vcpu, restore_emu,
                          channel is not None,
                          dict(verdict.restore_vcpus),
                          dict(verdict.restore_iothreads),
                          verdict.latency_target_us,
                          verdict.latency_percentile)
        self._guests[uuid] = libvirt_guest.Guest(
            self._host, info, dom.ID(), pid, channel, self.managed_cpus,
            self.proc_root, domain_name=parsed.name,
            start_time=procfs.start_time(pid, self.proc_root),
            vhost_kthreads=self._vhost_kthreads, clock=self.clock,
            cpu_count=self._poll_cpu_count)
        self._skipped.pop(uuid, None)

    def _ensure_channel(self, dom, uuid, parsed, xml):
        name = host_channel.shm_name(uuid, self.name_prefix)
        path = os.path.join(self.shm_dir, name)
        attached = ("<shmem name='%s'" % name) in xml or \
            ('<shmem name="%s"' % name) in xml
        if not attached and not self.attach_channels:
            return None
        # Without attach_channels (--restore) a page is used as it is,
        # never given to anybody.
        owner = (host_channel.page_owner(self.qemu_user, self.qemu_group)
                 if self.attach_channels else None)
        try:
            # Created for QEMU, or opened as it is (QEMU's by now): never
            # a link, a foreign file or anything but a regular file.
            channel = host_channel.HostChannel(
                path, parsed.vcpus, size=self.shm_size_mib * 1024 * 1024,
                owner=owner, trusted=self._trusted_uids(),
                create=self.attach_channels)
            # Keeps a live guest's state: a restarted agent picks up.
            channel.initialize()
        except (host_channel.ChannelError, OSError, ValueError) as exc:
            LOG.warning('No channel for %s: %s', uuid, exc)
            return None
        if not attached:
            device = config.shmem_xml(name, self.shm_size_mib, role='master')
            try:
                self._host.call('attach channel to %s' % uuid,
                                dom.attachDeviceFlags, device,
                                self.libvirt.VIR_DOMAIN_AFFECT_LIVE,
                                key=uuid)
                LOG.info('Attached UFO channel %s to %s', name, uuid)
            except base.DriverError as exc:
                LOG.warning('%s', exc)
                channel.close()
                return None
        return channel

    def _drop(self, uuid, event):
        known = self._guests.pop(uuid, None)
        if known is not None:
            known.close()
        self._host.queue_event(uuid, event)

    def events(self):
        out = self._host.take_events()
        for uuid, event in out:
            known = self._guests.get(uuid)
            if event == base.GuestEvent.REBOOTED and known is not None:
                known.rebooted()
            elif event in (base.GuestEvent.PAUSED,
                           base.GuestEvent.RESUMED) and known is not None:
                known.paused = event == base.GuestEvent.PAUSED
            elif event in (base.GuestEvent.STOPPED,
                           base.GuestEvent.UNDEFINED) and known:
                self._guests.pop(uuid)
                known.stopped()
                known.close()
        # A stopped domain that no longer exists (transient, or undefined
        # meanwhile) is gone for good. The same event twice in a row for
        # a guest (callback and poll) is one; the order is kept, so the
        # last of PAUSED and RESUMED is the guest's state.
        unique, last = [], {}
        for uuid, event in out:
            if event == base.GuestEvent.STOPPED and \
                    not self._host.exists(uuid):
                event = base.GuestEvent.UNDEFINED
            if last.get(uuid) != event:
                unique.append((uuid, event))
                last[uuid] = event
        return unique

    # -- one guest -----------------------------------------------------------
    def _get(self, uuid):
        known = self._guests.get(uuid)
        if known is None:
            raise base.DriverError('guest %s is not managed' % uuid)
        return known

    def observe(self, uuid):
        known = self._get(uuid)
        return known.observe(self.read_retries, self._nics.counters(uuid))

    def pin_vcpus(self, uuid, cpus):
        self._check_free(uuid)
        self._get(uuid).pin_vcpus(cpus)

    def pin_emulator(self, uuid, cpus):
        self._check_free(uuid)
        self._get(uuid).pin_emulator(cpus)

    def pin_many(self, pins):
        """See the interface: the pins of many guests in one hand-off.

        Each pin's calls keep their deadlines and the pin wait
        (:meth:`.Host.call_batch`); after one that fails or is left in
        flight the pins after it go in a batch of their own, so a hung
        guest delays the others by the pin wait, as one by one. What
        else a pin raises is its outcome (the guard reports it).
        """
        outcomes = [None] * len(pins)
        left = list(range(len(pins)))
        while left:
            items, made = [], []
            for i in left:
                uuid, kind, cpus = pins[i]
                try:
                    self._check_free(uuid)
                    calls = self._get(uuid).pin_calls(kind, cpus)
                    items.append((uuid, calls))
                except Exception as exc:
                    outcomes[i] = exc
                    continue
                made.append(i)
            results = self._host.call_batch(items, self._host.pin_wait)
            for i, result in zip(made, results):
                if isinstance(result, Exception):
                    outcomes[i] = result
                    continue
                uuid, kind, cpus = pins[i]
                try:
                    self._get(uuid).pinned(kind, cpus)
                except Exception as exc:
                    outcomes[i] = exc
            left = made[len(results):]
        return outcomes

    def _check_free(self, uuid):
        """Raise GuestBusy, before any call, while its calls hang."""
        held = self._host.deadlines.busy(uuid)
        if held is not None:
            raise deadline.OperationSkipped(
                '%s: not pinned while an earlier call has not returned '
                '(%s)' % (uuid, held))

    def busy_guests(self):
        outstanding = self._host.deadlines.outstanding()
        if deadline.CONNECTION in outstanding:
            return frozenset(self._guests)
        return frozenset(outstanding) & frozenset(self._guests)

    def read_pins(self, uuid):
        return self._get(uuid).read_pins()

    def read_pins_many(self, uuids):
        """See the interface: one hand-off to the call thread for all.

        Each guest's reads keep their deadlines and the pin wait
        (:meth:`.Host.call_batch`); after one that fails or is left in
        flight the guests after it go in a batch of their own.
        """
        out = {}
        left = list(uuids)
        while left:
            items = []
            for uuid in left:
                try:
                    items.append((uuid, self._get(uuid).pin_reads()))
                except base.DriverError as exc:
                    out[uuid] = exc
            outcomes = self._host.call_batch(items, self._host.pin_wait)
            for (uuid, _), outcome in zip(items, outcomes):
                known = self._guests.get(uuid)
                if isinstance(outcome, Exception):
                    out[uuid] = outcome
                elif known is None:
                    out[uuid] = base.DriverError(
                        'guest %s is not managed' % uuid)
                else:
                    out[uuid] = known.live_pins(outcome)
            left = [uuid for uuid, _ in items[len(outcomes):]]
        return out

    def guest_exists(self, uuid):
        return self._host.exists(uuid)

    def set_vcpus_idle(self, uuid, idle):
        self._get(uuid).set_vcpus_idle(idle)

    def set_vcpu_target(self, uuid, vcpus):
        return self._get(uuid).set_vcpu_target(vcpus)

    def acknowledged(self, uuid, seq):
        return self._get(uuid).acknowledged(seq, self.read_retries)

    def heartbeat(self):
        """Beat every channel; safe from a thread other than the loop's.

        The loop may add or drop guests meanwhile: this goes over a
        snapshot, and a channel closed on the way is skipped by its lock.
        """
        failed = []
        for known in tuple(self._guests.values()):
            try:
                known.heartbeat()
            except (OSError, ValueError) as exc:
                failed.append('%s: %s' % (known.uuid, exc))
        if failed:
            raise base.DriverError('heartbeat failed for %s'
                                   % '; '.join(failed))

    def release(self, uuid):
        self._get(uuid).release()

    def forget(self, uuid):
        known = self._guests.pop(uuid, None)
        if known is not None:
            known.close()
        self._remove_page(host_channel.shm_name(uuid, self.name_prefix))

    def _trusted_uids(self):
        """Who a page may belong to: root, this process, QEMU's user."""
        return host_channel.trusted_uids(
            host_channel.qemu_owner(self.qemu_user, self.qemu_group))

    def _remove_page(self, name):
        """Unlink a page: only a regular file of root or QEMU (lstat)."""
        try:
            return host_channel.remove_page(os.path.join(self.shm_dir, name),
                                            self._trusted_uids())
        except (host_channel.ChannelError, OSError) as exc:
            LOG.warning('Not removing %s: %s', name, exc)
            return False

    def remove_stale_pages(self):
        """Delete the pages of domains that no longer exist."""
        known = self._host.all_domain_uuids()
        removed = []
        for name in os.listdir(self.shm_dir):
            if not name.startswith(self.name_prefix):
                continue
            uuid = name[len(self.name_prefix):]
            if uuid not in known and len(uuid) == 36 and \
                    self._remove_page(name):
                removed.append(uuid)
        return removed

    def hostname(self):
        """libvirt's name of this host, as Nova's libvirt driver reads it.

        Nova names the compute node (its hypervisor hostname, the name of
        its Placement resource provider) with the connection's
        getHostname(), which can differ from the short hostname.
        """
        return self._host.call('host name',
                               self._host.get_connection().getHostname)

    def close(self):
        for known in self._guests.values():
            known.close()
        self._guests.clear()
        self._host.close()
