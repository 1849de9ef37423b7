"""A fake compute host full of loaded Nova guests, for the agent at scale.

:class:`FakeHypervisor` builds, under one directory, what ufo-agent's
libvirt driver reads on a compute node: ``sys`` (a two-socket host, SMT
pairs ``c`` and ``c + cores``, two NUMA nodes), ``proc`` (one QEMU
process per guest: vCPU threads, the main loop and two workers, each with
its ``schedstat`` and ``cgroup``; ``self/mountinfo``), ``run`` (libvirt's
pid files), ``cgroup`` (a cgroup v2 hierarchy as systemd and libvirt lay
it out) and ``shm`` (the channel pages). Its :attr:`libvirt` is a
:class:`~ufo_tools.fakes.fakelibvirt.FakeLibvirt` whose domains are Nova
shared-policy instances on the host's shared CPUs (its managed CPUs: all
but the first core of each node).

Each guest has a load: a demand, in vCPUs, that drifts around its own
level (idle, moderate or busy), a function of the seed and of the host's
own clock (:meth:`FakeHypervisor.clock`), which moves only when
:meth:`FakeHypervisor.advance` and :meth:`FakeHypervisor.sleep` move it:
an agent given that clock sees the same loads, counters and answers on
every run of one seed, however busy the machine. :meth:`advance` turns
the time since its last call into CPU time on the guest's vCPU threads,
bounded by its online vCPUs and by the CPUs its vCPUs are pinned to,
which the guests pinned alike share; what a guest could not run is run
delay. Guests that run the ufo_guest module publish on their page a
sample that says what their vCPUs did, and apply and acknowledge the
targets the host writes there :data:`ACK_SECONDS_PER_VCPU` per vCPU (the
paper's KVM figure) after they see them, :data:`POLL_SECONDS` after they
were written: :meth:`FakeHypervisor.sleep` lets them do so while the
agent waits for them, and :meth:`FakeHypervisor.advance` for the targets
written since (a target the agent does not wait for is answered by the
next tick, as a real guest's is).

The guests have no vhost threads: the driver pins those with
``sched_setaffinity``, a real system call, and fake pids may be real
processes of this host.
"""

import collections
import math
import mmap
import os
import pathlib
import random
import struct
import time

from ufo_agent.channel import host_channel
from ufo_agent.channel import layout
from ufo_agent import cpuset
from ufo_tools.fakes import fakehost
from ufo_tools.fakes import fakelibvirt

ACK_SECONDS_PER_VCPU = 0.025
# How soon a guest's module sees a target written on its page (it polls
# the page; the fake sees it at the next step of the enforcer's waits).
POLL_SECONDS = 0.005
# Guest kinds: (share of guests, demand as a share of its vCPUs).
KINDS = (('idle', 0.55, (0.002, 0.01)),
         ('moderate', 0.30, (0.15, 0.5)),
         ('busy', 0.15, (0.5, 0.95)))
# Nova flavors' vCPU counts, as often as they come.
FLAVOR_VCPUS = (1, 2, 2, 2, 4, 4, 8)
MODULE_SHARE = 0.6          # guests that run the ufo_guest module
# Loaded guests that run batch jobs (the others serve requests), and the
# batch guests whose flavor says so (ufo:class=be).
BATCH_SHARE = 0.25
BE_HINT_SHARE = 0.5
# Guest context switches per second per busy vCPU: request serving
# switches orders of magnitude more often than batch work (paper Fig. 6).
SERVICE_SWITCHES = (5000, 30000)
BATCH_SWITCHES = (50, 300)
PID_BASE = 100000
_U32 = struct.Struct('<I')
_HOST_TARGET = layout.offset('host', 'target_vcpus')
_HOST_SEQ = layout.offset('host', 'target_seq')


class HungDomain(fakelibvirt.FakeDomain):
    """A domain whose every call can be made to sleep (:attr:`hang`).

    As a QEMU whose monitor does not answer: each libvirt call on it
    returns only after ``hang`` seconds, but for bulk stats asked for
    without waiting (``VIR_CONNECT_GET_ALL_DOMAINS_STATS_NOWAIT``).
    Pins are noted in ``pin_log``: (when, uuid, (method, args...)).
    """

    def __init__(self, *args, pin_log=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.hang = 0.0
        self.pin_log = pin_log
        self.pinned_at = None       # when libvirt last applied a pin

    def _maybe_fail(self, method):
        if self.hang:
            time.sleep(self.hang)
        super()._maybe_fail(method)

    def stats_gate(self, nowait):
        # Interface counters need no job: a NOWAIT call does not wait
        # for a hung monitor.
        if nowait:
            fakelibvirt.FakeDomain._maybe_fail(self, 'domainListGetStats')
        else:
            super().stats_gate(nowait)

    def _record(self, *call):
        # Not into FakeLibvirt.calls: it would grow with every tick.
        self.pinned_at = time.monotonic()
        if self.pin_log is not None:
            self.pin_log.append((self.pinned_at, self.uuid, call))


class _Page:
    """The guest module's end of one channel page."""

    def __init__(self, path):
        with open(path, 'r+b') as handle:
            self.mm = mmap.mmap(handle.fileno(), layout.PAGE_SIZE)
        self.seq = 0

    def host_target(self):
        """(target vCPUs, target seq) as the host last wrote them."""
        return (_U32.unpack_from(self.mm, _HOST_TARGET)[0],
                _U32.unpack_from(self.mm, _HOST_SEQ)[0])

    def write(self, values):
        """The guest area, under its seqlock."""
        base = layout.GUEST_OFFSET
        self.seq += 1
        _U32.pack_into(self.mm, base + 8, self.seq)
        data = layout.pack(layout.GUEST_FIELDS, layout.GUEST_STRUCT,
                           dict(values, seq=self.seq))
        self.mm[base:base + len(data)] = data
        self.seq += 1
        _U32.pack_into(self.mm, base + 8, self.seq)

    def close(self):
        self.mm.close()


class LoadedGuest:
    """One guest: its QEMU threads' counters, its load, its module."""

    def __init__(self, host, index, rnd):
        self.host = host
        self.index = index
        self.uuid = '%08x-5ca1-4e00-8000-%012x' % (index + 1, index + 1)
        self.name = 'instance-%08x' % (index + 1)
        self.vcpus = rnd.choice(FLAVOR_VCPUS)
        self.kind, low_high = _pick_kind(rnd)
        self.level = rnd.uniform(*low_high) * self.vcpus
        self.period = rnd.uniform(20.0, 120.0)
        self.phase = rnd.uniform(0, 2 * math.pi)
        self.module = rnd.random() < MODULE_SHARE
        batch = self.kind != 'idle' and rnd.random() < BATCH_SHARE
        self.switches = rnd.uniform(*(BATCH_SWITCHES if batch
                                      else SERVICE_SWITCHES))
        self.vm_class = 'be' if batch and rnd.random() < BE_HINT_SHARE \
            else None
        self.pid = PID_BASE + 100 * index
        self.nic = 'tap%s' % self.uuid[:11]
        self.online = self.vcpus
        # Cumulative counters: vCPU threads (cpu, wait, slices), others.
        self.vcpu_ns = [[0, 0, 0] for _ in range(self.vcpus)]
        self.other_ns = [[0, 0, 0] for _ in range(3)]
        self.packets = [0, 0, 0, 0]
        self.page = None
        self.samples = 0
        self.pending = None         # (seq, target, when it is applied)
        self.acked = (0, 0)         # (ack seq, applied target)
        self.last_stats = {}
        self.domain = None

    # -- the load ----------------------------------------------------------
    def demand(self, now):
        """vCPUs' worth of work the guest has at ``now``."""
        wave = 1.0 + self.host.wave * math.sin(
            2 * math.pi * now / self.period + self.phase)
        return min(float(self.vcpus), self.level * wave)

    def run(self, dt, want, got):
        """``got`` of ``want`` vCPUs ran for ``dt`` seconds."""
        online = max(1, self.online)
        switches = self.switches * got + 20 * online
        for index in range(online):
            counters = self.vcpu_ns[index]
            counters[0] += int(got / online * dt * 1e9)
            # A little run delay even on an idle host, as on a real one.
            counters[1] += int(((want - got) / online + 0.01 * got) *
                               dt * 1e9)
            # A vCPU thread is woken for a share of the guest's switches
            # (from idle), and by the guest's timer.
            counters[2] += int((switches / 4 + 20) / online * dt)
        emulator = 0.005 + 0.03 * got
        for counters in self.other_ns:
            counters[0] += int(emulator / 3 * dt * 1e9)
            counters[2] += int(50 * dt)
        rate = 2000 * got
        for i, per in enumerate((rate, rate, rate * 600, rate * 900)):
            self.packets[i] += int(per * dt)
        if self.domain is not None:
            self.domain.nic_counters[self.nic] = dict(zip(
                ('rx.pkts', 'tx.pkts', 'rx.bytes', 'tx.bytes'),
                self.packets))
        self._write_counters()
        self.last_stats = {
            'util': int(got * 10000),
            'steal': min(int((want - got) * 10000), 10000 * online),
            'ctxsw_per_sec': int(switches),
            'own_ctxsw_per_sec': 40,
            'sched_in_per_sec': int(switches / 2),
            'interval_ns': max(1, int(dt * 1e9)),
        }

    def _write_counters(self):
        for tid, counters in zip(self.vcpu_tids(), self.vcpu_ns):
            self.host.write_schedstat(self.pid, tid, counters)
        for tid, counters in zip(self.other_tids(), self.other_ns):
            self.host.write_schedstat(self.pid, tid, counters)

    def vcpu_tids(self):
        return [self.pid + 1 + i for i in range(self.vcpus)]

    def other_tids(self):
        return [self.pid] + [self.pid + 1 + self.vcpus + i for i in (0, 1)]

    # -- the ufo_guest module ------------------------------------------------
    def module_step(self, now, publish, seen_at=None):
        """Apply a target that is due; publish a sample if ``publish``.

        A new target was seen at ``seen_at`` (default ``now``) and is
        due :data:`ACK_SECONDS_PER_VCPU` a vCPU later.
        """
        if not self.module:
            return
        if self.page is None:
            path = os.path.join(self.host.shm, host_channel.shm_name(
                self.uuid))
            if not os.path.exists(path):
                return
            self.page = _Page(path)
        target, seq = self.page.host_target()
        changed = publish
        if seq and seq != self.acked[0] and (
                self.pending is None or self.pending[0] != seq):
            steps = max(1, abs(min(max(target, 1), self.vcpus) -
                               self.online))
            seen = now if seen_at is None else seen_at
            self.pending = (seq, target,
                            seen + ACK_SECONDS_PER_VCPU * steps)
        if self.pending is not None and now >= self.pending[2]:
            seq, target = self.pending[:2]
            self.online = min(max(target, 1), self.vcpus)
            self.acked = (seq, self.online)
            self.pending = None
            changed = True
        if publish:
            self.samples += 1
        if changed:
            self._write_page()

    def _write_page(self):
        stats = self.last_stats or {'interval_ns': 10 ** 9}
        self.page.write(dict(
            stats, magic=layout.GUEST_MAGIC, abi_version=layout.ABI_VERSION,
            flags=layout.GUEST_FLAG_HOST_VALID | layout.GUEST_FLAG_SCHED_IN,
            ack_target_seq=self.acked[0], applied_target=self.acked[1],
            online_vcpus=self.online, present_vcpus=self.vcpus,
            sample_count=self.samples,
            timestamp_ns=int(self.host.now * 1e9),
            online_mask=_mask(self.online)))

    # -- what libvirt shows ------------------------------------------------
    def vcpu_cpus(self):
        """The CPUs its vCPU 0 may run on now."""
        return self.host.cpus_of(self.domain.vcpu_pins[0])

    def close(self):
        if self.page is not None:
            self.page.close()
            self.page = None


def _pick_kind(rnd):
    roll, total = rnd.random(), 0.0
    for kind, share, low_high in KINDS:
        total += share
        if roll < total:
            return kind, low_high
    return KINDS[-1][0], KINDS[-1][2]


def _mask(online):
    bits = (1 << online) - 1
    return tuple((bits >> (64 * i)) & (2 ** 64 - 1)
                 for i in range(layout.MASK_WORDS))


class FakeHypervisor:
    """``guests`` Nova guests on a host of ``cores`` cores (SMT 2).

    ``load`` scales the guests' demands so that on average they ask for
    that share of the managed CPUs; ``wave`` is how far each guest's
    demand swings around its level, as a share of it (0: steady).
    """

    def __init__(self, root, guests, cores=64, seed=1, load=0.6, wave=0.5):
        self.root = str(root)
        self.proc = os.path.join(self.root, 'proc')
        self.run_dir = os.path.join(self.root, 'run')
        self.shm = os.path.join(self.root, 'shm')
        self.sysfs = os.path.join(self.root, 'sys', 'devices', 'system',
                                  'cpu')
        self.cgroup = os.path.join(self.root, 'cgroup')
        for path in (self.proc, self.run_dir, self.shm, self.cgroup):
            os.makedirs(path)
        self.cores = cores
        self.wave = wave
        half = cores // 2
        self.numa = {cpu: (cpu % cores) // half for cpu in range(2 * cores)}
        # The first core of each node is the host's (Nova's reserved).
        reserved = {0, half, cores, cores + half}
        self.managed = frozenset(range(2 * cores)) - reserved
        self._write_sysfs()
        self._write_cgroup_root()
        self.libvirt = fakelibvirt.FakeLibvirt()
        self.pin_log = []
        self._bits = {}                 # cpumap tuple -> frozenset
        rnd = random.Random(seed)
        self.guests = [LoadedGuest(self, i, rnd) for i in range(guests)]
        mean = sum(g.level for g in self.guests) or 1.0
        scale = load * len(self.managed) / mean
        for guest in self.guests:
            guest.level = min(guest.level * scale, 0.95 * guest.vcpus)
            self._boot(guest)
        self.guest_seconds = 0.0        # CPU time the fakes took
        # The host's clock, s: the guests' loads and answers follow it,
        # not the machine's (see the module).
        self.now = self._last = 1000.0

    # -- building the trees ----------------------------------------------
    def _write_sysfs(self):
        siblings = {cpu: '%d,%d' % (cpu % self.cores,
                                    cpu % self.cores + self.cores)
                    for cpu in range(2 * self.cores)}
        fakehost.write_sysfs(pathlib.Path(self.sysfs),
                             '0-%d' % (2 * self.cores - 1), siblings,
                             self.numa)

    def _write_cgroup_root(self):
        os.makedirs(os.path.join(self.proc, 'self'))
        with open(os.path.join(self.proc, 'self', 'mountinfo'), 'w') as f:
            f.write('30 23 0:27 / %s rw,nosuid,nodev,noexec - cgroup2 '
                    'cgroup2 rw,nsdelegate\n' % self.cgroup)
        with open(os.path.join(self.cgroup, 'cgroup.controllers'), 'w') as f:
            f.write('cpuset cpu io memory pids\n')

    def _scope(self, guest):
        return 'machine.slice/machine-qemu\\x2d%d\\x2d%s.scope' % (
            guest.index + 1, guest.name)

    def _boot(self, guest):
        with open(os.path.join(self.run_dir, guest.name + '.pid'), 'w') as f:
            f.write('%d\n' % guest.pid)
        fakehost.write_qemu(pathlib.Path(self.proc), guest.pid, guest.vcpus,
                            others=('IO mon_iothread', 'worker'),
                            stat=(0, 0, 0))
        scope = self._scope(guest)
        for tid, group in ([(t, 'libvirt/vcpu%d' % i)
                            for i, t in enumerate(guest.vcpu_tids())] +
                           [(t, 'libvirt/emulator')
                            for t in guest.other_tids()]):
            with open(os.path.join(self.proc, str(guest.pid), 'task',
                                   str(tid), 'cgroup'), 'w') as f:
                f.write('0::/%s/%s\n' % (scope, group))
        for group, pids in ([('', ()), ('libvirt', ()),
                             ('libvirt/emulator', (guest.pid,))] +
                            [('libvirt/vcpu%d' % i, ())
                             for i in range(guest.vcpus)]):
            path = os.path.join(self.cgroup, scope, group)
            os.makedirs(path, exist_ok=True)
            with open(os.path.join(path, 'cpu.idle'), 'w') as f:
                f.write('0\n')
            with open(os.path.join(path, 'cgroup.procs'), 'w') as f:
                f.write(''.join('%d\n' % p for p in pids))
        specs = {'hw:cpu_policy': 'shared'}
        if guest.vm_class:
            specs['ufo:class'] = guest.vm_class
        xml = fakehost.nova_xml(
            guest.uuid, name=guest.name, server='server-%d' % guest.index,
            vcpus=guest.vcpus, cpuset=cpuset.format_cpuset(self.managed),
            specs=specs, flavor='shared.%d' % guest.vcpus)
        xml = xml.replace('tap7c1f2e3d-4b', guest.nic)
        dom = HungDomain(self.libvirt, guest.uuid, xml,
                         dom_id=guest.index + 1, pin_log=self.pin_log)
        # What libvirt starts its threads with: the <vcpu cpuset>.
        every = tuple(cpu in self.managed for cpu in range(2 * self.cores))
        dom.vcpu_pins = dict.fromkeys(range(guest.vcpus), every)
        dom.emulator_pin = every
        self.libvirt.domains[guest.uuid] = dom
        guest.domain = dom

    # -- the host at work ----------------------------------------------------
    def write_schedstat(self, pid, tid, counters):
        path = os.path.join(self.proc, str(pid), 'task', str(tid),
                            'schedstat')
        with open(path, 'w') as f:
            f.write('%d %d %d\n' % tuple(counters))

    def cpus_of(self, bits):
        cpus = self._bits.get(bits)
        if cpus is None:
            cpus = self._bits[bits] = frozenset(
                i for i, on in enumerate(bits) if on)
        return cpus

    def clock(self):
        """The host's time, s (a monotonic clock for the agent)."""
        return self.now

    def advance(self, until):
        """Move the clock to ``until`` and run the guests up to it.

        The guests run from the last call on (see the module); the clock
        does not go back.
        """
        started = time.thread_time()
        before = self.now
        now = self.now = max(self.now, until)
        dt = now - self._last
        if dt > 0:
            self._last = now
            # The modules polled their pages meanwhile: a target the
            # agent wrote since the last step was seen then, and one due
            # by now applied before this sample, as a real guest does
            # between two ticks.
            seen = min(now, before + POLL_SECONDS)
            for guest in self.guests:
                guest.module_step(now, publish=False, seen_at=seen)
            groups = collections.defaultdict(list)
            for guest in self.guests:
                cpus = guest.vcpu_cpus()
                want = min(guest.demand(now), guest.online, len(cpus))
                groups[cpus].append((guest, want))
            for cpus, members in groups.items():
                total = sum(want for _, want in members)
                share = min(1.0, len(cpus) / total) if total else 1.0
                for guest, want in members:
                    guest.run(dt, want, want * share)
            for guest in self.guests:
                guest.module_step(now, publish=True)
        self.guest_seconds += time.thread_time() - started

    def sleep(self, seconds):
        """Sleep as the agent does while its guests answer targets.

        The host's clock moves by ``seconds``, and so does the machine's.
        """
        started = time.thread_time()
        until = time.monotonic() + seconds
        now = self.now = self.now + seconds
        for guest in self.guests:
            guest.module_step(now, publish=False)
        self.guest_seconds += time.thread_time() - started
        left = until - time.monotonic()
        if left > 0:
            time.sleep(left)

    def hang(self, guest, seconds):
        """Every libvirt call on ``guest`` sleeps ``seconds`` (0: none)."""
        guest.domain.hang = seconds

    def affinities(self):
        """{uuid: (CPUs of its vCPUs, of its other threads)} as pinned."""
        out = {}
        for guest in self.guests:
            dom = guest.domain
            out[guest.uuid] = (
                frozenset().union(*map(self.cpus_of,
                                       dom.vcpu_pins.values())),
                self.cpus_of(dom.emulator_pin))
        return out

    def close(self):
        for guest in self.guests:
            guest.close()
