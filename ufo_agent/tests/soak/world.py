"""A simulated compute host that the real agent runs on, and its checker.

The host has 12 CPUs (6 cores of 2 threads); core 0 (CPUs 0 and 6) is
not managed and holds a dedicated guest. Guests are domains of a fake
libvirt (:mod:`ufo_agent.tests.unit.driver.fakelibvirt`, extended here
with scripted failures, hung calls and QEMU restarts), QEMU processes in
a fake /proc, and guest kernel modules that answer on the real page
files the driver creates, following the C module's rules (heartbeat
watchdog, re-applying the host's target when the heartbeat returns).
The agent is the real one: :class:`~ufo_agent.service.loop.Agent` over
:class:`~ufo_agent.driver.libvirt.driver.LibvirtDriver` with its call
deadlines.

The :class:`Checker` judges what the fake libvirt holds, never the
agent's ledger. Every thread of a managed guest (each vCPU, the
emulator, each I/O thread) carries a pool label that follows what
happened to its affinity: a thread that gains CPUs joins the pool of
the plan whose CPUs it now lies in (the plan the agent was applying when
the pin call was made); one that narrows keeps its label; one that sits
inside its pool's CPUs with no other guest's thread of another pool
there joins it, as the agent's ledger lets it. A thread libvirt made
(a boot, a hot-plugged vCPU, a migration) or put back on its
definition is *fresh*: the agent gets :data:`GRACE_TICKS` ticks without
injected faults to place it. Then:

* no managed CPU may run threads of two guests in different pools;
* every placed thread stays on managed CPUs;
* dedicated, foreign and opted-out guests get no call and keep their
  pins;
* after a stop or ``--restore`` each released guest has exactly its
  definition's pins and a target of every vCPU on its page.

Further checks: no tick abandoned for everyone, no process but QEMU's
given an affinity, the agent not killed by a signal (pages are mmapped),
``--restore`` not crashing, an idle guest not holding cores, and no
guest shrinking on a target that the running agent did not send.
"""

import collections
import contextlib
import dataclasses
import json
import logging
import os
import shutil
import signal
import tempfile
import threading
import time
import types
from unittest import mock

from ufo_agent.channel import host_channel
from ufo_agent.channel import layout
from ufo_agent.controller import ControllerConfig
from ufo_agent.driver import base
from ufo_agent.driver.libvirt import config as libvirt_config
from ufo_agent.driver.libvirt import deadline as deadline_mod
from ufo_agent.driver.libvirt import driver as libvirt_driver
from ufo_agent.driver.libvirt import guest as libvirt_guest
from ufo_agent.driver.libvirt import host as libvirt_host
from ufo_agent.service import loop
from ufo_agent.service import restore as restore_mod
from ufo_agent.service import settings as settings_mod
from ufo_agent import state as state_mod
from ufo_tools.fakes import fakehost
from ufo_tools.fakes import fakelibvirt as lv

LOG = logging.getLogger(__name__)

CPUS = 12
# Cores are (c, c + 6); core 0 is Nova's dedicated/reserved core.
UNMANAGED = frozenset({0, 6})
MANAGED = frozenset(range(CPUS)) - UNMANAGED
MANAGED_TEXT = '1-5,7-11'
ALL_CPUS = frozenset(range(CPUS))
# Ticks without an injected fault on a guest that the agent gets to
# place a thread libvirt made or put back.
GRACE_TICKS = 4
# Fault-free ticks in a row after which an idle guest holds no cores.
IDLE_TICKS = 30
WATCHDOG_S = 5.0
DEFAULT_CALL_TIMEOUT = 0.25

SHARED, DEDICATED, FOREIGN, OPTOUT = 'shared', 'dedicated', 'foreign', \
    'opt-out'
HANDS_OFF = (DEDICATED, FOREIGN, OPTOUT)
MODULE_MODES = ('honest', 'absent', 'deaf', 'frozen', 'rewrite',
                'long-interval')
# libvirt calls that run as the domain's job (and so wait for a stuck
# QEMU, and for each other).
JOB_METHODS = frozenset(lv.JOB_METHODS)
FAULT_METHODS = ('pinVcpuFlags', 'pinEmulator', 'pinIOThread',
                 'ioThreadInfo', 'vcpuPinInfo', 'emulatorPinInfo',
                 'XMLDesc', 'isPersistent', 'state', 'attachDeviceFlags',
                 'domainListGetStats')


# -- what the soak reports ----------------------------------------------------
class SoakViolation(AssertionError):
    """A promise of the agent broken; subclasses name which."""

    kind = 'violation'


class PoolConflict(SoakViolation):
    kind = 'no CPU in two pools'


class UnplacedThread(SoakViolation):
    kind = 'thread left unplaced past its grace'


class OutsideManaged(SoakViolation):
    kind = 'pin outside the managed CPUs'


class HandsOffTouched(SoakViolation):
    kind = 'dedicated or unknown guest touched'


class RestoreInexact(SoakViolation):
    kind = 'restore not exact'


class AgentKilled(SoakViolation):
    kind = 'agent killed by a signal'


class RestorePathFailed(SoakViolation):
    kind = '--restore failed'


class TickAbandoned(SoakViolation):
    kind = 'tick abandoned for every guest'


class ForeignProcessTouched(SoakViolation):
    kind = 'process not of QEMU given an affinity'


class IdleGuestHoldsCores(SoakViolation):
    kind = 'idle guest holds cores'


class ShrinkWithoutDecision(SoakViolation):
    kind = 'guest shrunk on a target the running agent did not send'


VIOLATIONS = (PoolConflict, UnplacedThread, OutsideManaged,
              HandsOffTouched, RestoreInexact, AgentKilled,
              RestorePathFailed, TickAbandoned, ForeignProcessTouched,
              IdleGuestHoldsCores, ShrinkWithoutDecision)

# Counted over every run in this process (the runner's summary).
STATS = collections.Counter()
# Violation classes counted but not raised (the runner's --ignore).
IGNORED = set()
# What World.guarded returns when the agent would have died.
KILLED = object()


def bits(cpus, width=CPUS):
    return tuple(cpu in cpus for cpu in range(width))


def as_set(cpumap):
    return frozenset(i for i, on in enumerate(cpumap or ()) if on)


def fmt(cpus):
    from ufo_agent import cpuset
    return cpuset.format_cpuset(cpus) or '-'


class SimClock:
    """The host's monotonic clock, seconds; the agent's and the guests'."""

    def __init__(self, now=1000.0):
        self.now = now

    def __call__(self):
        return self.now


# -- the fake libvirt, with faults --------------------------------------------
class SoakDomain(lv.FakeDomain):
    """One QEMU run of a domain, whose calls can fail, hang or land late.

    ``script[method]`` holds the outcome of the next calls: ``ok``,
    ``fail`` (libvirtError, nothing done), ``apply-fail`` (done, then
    libvirtError) or ``hang`` (QEMU's job is stuck: the call holds the
    domain's job until :meth:`unstick`, every later job call waits for
    it, as libvirt's job lock has it, and then they land one by one or
    fail, as ``late`` says).
    A domain whose QEMU went away (``dead``) fails every call.
    """

    def __init__(self, hv, world, inc, xml, live_xml):
        super().__init__(hv, inc.uuid, xml, live_xml=live_xml,
                         dom_id=inc.dom_id,
                         iothreads=range(1, inc.iothreads + 1))
        self.world = world
        self.inc = inc
        self.script = collections.defaultdict(collections.deque)
        self.stuck = None           # threading.Event while the job hangs
        self.late = 'apply'         # or 'fail': what stuck calls do
        self.dead = False
        self.iothread_pins = {}
        self.waiters = []           # one Event per call that waited, set
        #                             when that call returns

    def faulty(self):
        return self.stuck is not None or bool(self.fail) or any(
            self.script.values())

    def unstick(self, late=None):
        """QEMU answers again: the waiting calls go on."""
        if late is not None:
            self.late = late
        gate, self.stuck = self.stuck, None
        if gate is not None:
            gate.set()
        waiters, self.waiters = self.waiters, []
        return waiters

    @contextlib.contextmanager
    def _call(self, method, key=None, cpumap=None, call=None):
        """One call: its scripted outcome, inside its job if it has one.

        Yields what the call does (``ok`` or ``apply-fail``); a pin's
        CPUs (``cpumap`` of thread ``key``) and what it carries out
        (``call``, :meth:`World.pin_call`) are noted while it is out.
        """
        pending = self.world.pending
        token = None
        if key is not None:
            token = (key, object())
            pending[token] = (as_set(cpumap), call)
        try:
            queue = self.script.get(method)
            action = queue.popleft() if queue else 'ok'
            if method not in JOB_METHODS:
                yield self._outcome(action, method, waited=False)
                return
            gate = None
            if action == 'hang' and self.stuck is None:
                gate = self.stuck = threading.Event()
                STATS['calls hung'] += 1
            waits = gate is not None or self.stuck is not None
            returned = threading.Event()
            if waits:
                self.waiters.append(returned)
                self.hv.blocked.append((self.uuid, method))
            try:
                with self.job(method):
                    if gate is not None:
                        gate.wait()
                    yield self._outcome(action, method, waited=waits)
            finally:
                returned.set()
        finally:
            if token is not None:
                del pending[token]

    def _outcome(self, action, method, waited):
        if waited:
            if self.dead or self.late == 'fail':
                raise lv.libvirtError(
                    'Timed out during operation: cannot acquire state '
                    'change lock (held by monitor=remoteDispatch%s)'
                    % lv.JOB_METHODS[method], lv.VIR_ERR_OPERATION_TIMEOUT)
            action = 'ok' if action == 'hang' else action
        if self.dead:
            raise lv.libvirtError('Domain not found: no domain with '
                                  'matching uuid %r' % self.uuid,
                                  lv.VIR_ERR_NO_DOMAIN)
        if action == 'fail':
            STATS['calls failed'] += 1
            raise lv.libvirtError('internal error: injected failure of %s'
                                  % method)
        lv.FakeDomain._maybe_fail(self, method)
        return action

    def _maybe_fail(self, method):
        # The query methods of FakeDomain call this.
        with self._call(method) as action:
            if action == 'apply-fail':
                raise lv.libvirtError('internal error: injected failure of '
                                      '%s' % method)

    def _landed(self, key, call, action, method):
        """The pin call ``call`` (:meth:`World.pin_call`) put ``key``."""
        self.world.checker.evaluate('after %s' % method,
                                    landing=(key,) + call)
        if action == 'apply-fail':
            STATS['calls failed after applying'] += 1
            raise lv.libvirtError('internal error: %s failed after '
                                  'applying' % method)

    def pinVcpuFlags(self, vcpu, cpumap, flags):
        key = self.inc.vcpu_key(vcpu)
        call = self.world.pin_call(key)
        with self._call('pinVcpuFlags', key, cpumap, call) as action:
            self._record('pinVcpuFlags', vcpu, tuple(cpumap), flags)
            self.vcpu_pins[vcpu] = tuple(cpumap)
            self._landed(key, call, action, 'pin of vCPU %d of %s'
                         % (vcpu, self.inc.label))

    def pinEmulator(self, cpumap, flags):
        key = self.inc.emulator_key()
        call = self.world.pin_call(key)
        with self._call('pinEmulator', key, cpumap, call) as action:
            self._record('pinEmulator', tuple(cpumap), flags)
            self.emulator_pin = tuple(cpumap)
            self._landed(key, call, action, 'emulator pin of %s'
                         % self.inc.label)

    def pinIOThread(self, iothread, cpumap, flags):
        key = self.inc.iothread_key(iothread)
        call = self.world.pin_call(key)
        with self._call('pinIOThread', key, cpumap, call) as action:
            self._record('pinIOThread', iothread, tuple(cpumap), flags)
            self.iothread_pins[iothread] = tuple(cpumap)
            self._landed(key, call, action, 'pin of I/O thread %d of %s'
                         % (iothread, self.inc.label))

    def attachDeviceFlags(self, xml, flags):
        with self._call('attachDeviceFlags') as action:
            self._record('attachDeviceFlags', xml, flags)
            self.live_xml = self.live_xml.replace('</devices>',
                                                  xml + '</devices>')
            if action == 'apply-fail':
                raise lv.libvirtError('internal error: device_add answered '
                                      'late')

    def ioThreadInfo(self, flags):
        self._maybe_fail('ioThreadInfo')
        return [(i, (True,)) for i in self.iothreads]


class SoakConnection(lv.FakeConnection):
    """Its domain listing can fail or hang as the world's script says."""

    def listAllDomains(self, flags=0):
        world = self.hv.world
        action = world.list_script.popleft() if world.list_script else 'ok'
        if action == 'fail':
            STATS['listings failed'] += 1
            raise lv.libvirtError('internal error: client socket is closed',
                                  lv.VIR_ERR_INTERNAL_ERROR)
        if world.libvirtd_stuck is not None:
            returned = threading.Event()
            world.libvirtd_waiters.append(returned)
            try:
                world.libvirtd_stuck.wait()
                return super().listAllDomains(flags)
            finally:
                returned.set()
        return super().listAllDomains(flags)


class SoakLibvirt(lv.FakeLibvirt):
    def __init__(self, world):
        super().__init__()
        self.world = world

    def open(self, uri):
        self.wait_gate(self.open_block, ('open', uri))
        if self.open_error is not None:
            raise self.open_error
        conn = SoakConnection(self, uri)
        self.connections.append(conn)
        return conn

    def fire(self, dom, event, detail=0):
        """A lifecycle event, to every connection that listens."""
        for conn in self.connections:
            if not conn.closed and \
                    lv.VIR_DOMAIN_EVENT_ID_LIFECYCLE in conn.callbacks:
                conn.fire_lifecycle(dom, event, detail)

    def fire_reboot(self, dom):
        for conn in self.connections:
            if not conn.closed and \
                    lv.VIR_DOMAIN_EVENT_ID_REBOOT in conn.callbacks:
                conn.fire_reboot(dom)


# -- guests -------------------------------------------------------------------
@dataclasses.dataclass
class DomainSpec:
    """What a domain is defined as (it keeps its uuid across restarts)."""

    uuid: str
    name: str
    kind: str
    vcpus: int
    iothreads: int = 0
    module: str = 'honest'
    carried_pins: frozenset = None      # a live migration's source pins

    def xml(self):
        specs = {}
        if self.kind == DEDICATED:
            specs['hw:cpu_policy'] = 'dedicated'
        elif self.kind == OPTOUT:
            specs['ufo:managed'] = 'false'
        if self.kind == FOREIGN:
            return fakehost.plain_xml(self.uuid, self.name, self.vcpus)
        if self.kind == DEDICATED:
            cpus = sorted(UNMANAGED)
            xml = fakehost.nova_xml(
                self.uuid, name=self.name, vcpus=self.vcpus,
                cpuset=fmt(UNMANAGED), specs=specs,
                vcpupins={i: str(cpus[i % 2]) for i in range(self.vcpus)},
                emulatorpin=fmt(UNMANAGED))
        elif self.carried_pins is not None:
            pins = fmt(self.carried_pins)
            xml = fakehost.nova_xml(
                self.uuid, name=self.name, vcpus=self.vcpus,
                cpuset=MANAGED_TEXT, specs=specs,
                vcpupins={i: pins for i in range(self.vcpus)},
                emulatorpin=pins)
            xml = xml.replace('</devices>', libvirt_config.shmem_xml(
                host_channel.shm_name(self.uuid), 1, role='master') +
                '</devices>')
        else:
            xml = fakehost.nova_xml(self.uuid, name=self.name,
                                    vcpus=self.vcpus, cpuset=MANAGED_TEXT,
                                    specs=specs)
        if self.iothreads:
            xml = xml.replace('<cputune>', '<iothreads>%d</iothreads>\n'
                              '  <cputune>' % self.iothreads)
        return xml

    def definition(self):
        """(vCPU index -> CPUs, emulator CPUs, I/O thread -> CPUs)."""
        if self.kind == DEDICATED:
            cpus = sorted(UNMANAGED)
            return ({i: frozenset([cpus[i % 2]]) for i in range(self.vcpus)},
                    UNMANAGED, {})
        every = ALL_CPUS if self.kind == FOREIGN else MANAGED
        return ({i: every for i in range(self.vcpus)}, every,
                {i: every for i in range(1, self.iothreads + 1)})


class Incarnation:
    """One QEMU process of a domain: threads, counters, pins, module."""

    def __init__(self, world, spec, number, pid, dom_id):
        self.world = world
        self.spec = spec
        self.uuid = spec.uuid
        self.number = number
        self.pid = pid
        self.dom_id = dom_id
        self.iothreads = spec.iothreads
        self.label = '%s#%d' % (spec.uuid[:8], number)
        self.def_vcpus, self.def_emulator, self.def_iothreads = \
            spec.definition()
        self.vcpu_tids = {}             # plugged vCPU index -> tid
        self.other_tids = []
        self.cpu_ns = collections.Counter()     # tid -> counters
        self.wait_ns = collections.Counter()
        self.slices = collections.Counter()
        self.demand = 0                 # vCPUs the guest wants busy
        self.switches = 300             # per busy vCPU-second
        self.running = True
        self.ready = True               # False while migrating in
        self.dom = None
        self.module = None
        self.boot_pins = None           # hands-off guests: what they had
        self.calls_from = 0             # hv.calls index at its start
        self.idle_ticks = 0
        # NIC traffic per second: (packets each way, bytes in per packet,
        # bytes out per packet).
        self.nic = (0, 0, 0)

    @property
    def kind(self):
        return self.spec.kind

    @property
    def managed(self):
        return self.spec.kind == SHARED

    def vcpu_key(self, index):
        return (self.number, 'vcpu', index, self.vcpu_tids.get(index))

    def emulator_key(self):
        return (self.number, 'emulator')

    def iothread_key(self, iothread):
        return (self.number, 'iothread', iothread)

    def threads(self):
        """[(key, kind, affinity, definition)] of the threads that exist."""
        dom = self.dom
        out = []
        for index in sorted(self.vcpu_tids):
            out.append((self.vcpu_key(index), 'vcpu',
                        as_set(dom.vcpu_pins.get(index)),
                        self.def_vcpus[index]))
        out.append((self.emulator_key(), 'emulator',
                    as_set(dom.emulator_pin), self.def_emulator))
        for iothread in range(1, self.iothreads + 1):
            out.append((self.iothread_key(iothread), 'emulator',
                        as_set(dom.iothread_pins.get(iothread)),
                        self.def_iothreads[iothread]))
        return out

    def online(self):
        """vCPUs online in the guest."""
        if self.module is not None and self.module.bound:
            return min(self.module.online, len(self.vcpu_tids))
        return len(self.vcpu_tids)

    def busy(self):
        return min(self.demand, self.online())


class GuestModule:
    """The guest's ufo_guest module, as guest_image/ufo-guest does it.

    ``mode``: ``honest``; ``absent`` (no module); ``deaf`` (samples, never
    applies a target); ``frozen`` (bound, publishes nothing new);
    ``rewrite`` (an honest sample on every other tick, in between the
    same sample count with 100 % per vCPU and 5e6 switches/s);
    ``long-interval`` (claims 40 % per vCPU over hour-long intervals).
    """

    def __init__(self, world, inc, mode):
        self.world = world
        self.inc = inc
        self.mode = mode
        self.path = os.path.join(world.shm, host_channel.shm_name(inc.uuid))
        self.bound = False
        self.online = len(inc.vcpu_tids)
        self.reset(world.clock())

    def reset(self, now):
        self.ack = self.applied = self.count = self.heartbeat = 0
        # The heartbeat was read, and then seen to change: a live host.
        self.heartbeat_read = self.host_alive = False
        self.host_errors = self.fires = 0
        self.hb_seen = now
        self.watchdog = self.reapply = self.host_valid = False
        self.last_sample = now
        self.gseq = 0
        self.phase = 0
        self.util = self.ctxsw = self.sched_in = 0
        self.interval_ns = 0
        self.timestamp_ns = 0

    def present(self):
        return len(self.inc.vcpu_tids)

    def _page(self):
        """The page as the guest's device shows it, or None."""
        dom = self.inc.dom
        if dom is None or ("<shmem name='%s'" % os.path.basename(
                self.path)) not in dom.live_xml:
            return None
        try:
            with open(self.path, 'rb') as handle:
                data = handle.read(layout.PAGE_SIZE)
        except OSError:
            return None
        return data if len(data) == layout.PAGE_SIZE else None

    def rebooted(self):
        self.online = self.present()
        self.bound = False

    def poll(self, now):
        """One pass of the module's thread (ufo_poll_host)."""
        if self.mode == 'absent':
            return
        page = self._page()
        if page is None:
            if self.bound:
                self.bound = False
                self.online = self.present()    # device gone
            return
        if not self.bound:
            self.bound = True
            self.reset(now)
        present = self.present()
        self.online = max(1, min(self.online, present))
        host = layout.unpack(layout.HOST_FIELDS, layout.HOST_STRUCT,
                             page[layout.HOST_OFFSET:layout.HOST_OFFSET +
                                  layout.HOST_SIZE])
        valid = (not host['seq'] & 1 and host['magic'] == layout.HOST_MAGIC
                 and host['abi_version'] == layout.ABI_VERSION)
        if self.host_valid and not valid:
            self.host_errors += 1
        self.host_valid = valid
        if valid and host['heartbeat'] != self.heartbeat:
            self.host_alive = self.heartbeat_read
            self.heartbeat_read = True
            self.heartbeat = host['heartbeat']
            self.hb_seen = now
            if self.watchdog:
                self.watchdog = False
                self.reapply = True
        if not self.watchdog and now - self.hb_seen > WATCHDOG_S:
            self.watchdog = True
            self.fires += 1
            self.online = present
        seq = host['target_seq']
        if valid and not self.watchdog and self.host_alive and seq and \
                self.mode != 'deaf' and \
                (seq != self.ack or self.reapply):
            if ((seq - self.ack) & 0xFFFFFFFF) >= 0x80000000:
                self.host_errors += 1
            target = host['target_vcpus']
            if not 1 <= target <= present:
                self.host_errors += 1
            target = max(1, min(target, present))
            if target < self.online:
                self.world.shrunk(self.inc, seq, self.online, target)
            self.online = target
            self.ack = seq
            self.applied = target
            self.reapply = False
        self.publish()

    def sample(self, now):
        """A new sample at the end of a second of guest time."""
        if not self.bound or self.mode in ('absent', 'frozen'):
            return
        busy = self.inc.busy()
        dt = max(now - self.last_sample, 1e-3)
        self.last_sample = now
        self.timestamp_ns = int(now * 1e9)
        self.phase += 1
        if self.mode == 'rewrite' and self.phase % 2 == 0:
            # The same sample count, bigger numbers.
            self.util = 10000 * self.online
            self.ctxsw = 5000000
            self.sched_in = 5000000
            self.publish()
            return
        self.count += 1
        self.interval_ns = int(dt * 1e9)
        self.util = 10000 * busy
        self.ctxsw = self.inc.switches * busy + 40
        self.sched_in = self.inc.switches // 2 * busy + 20
        if self.mode == 'long-interval':
            self.interval_ns = 3600 * 10 ** 9
            self.util = 4000 * self.online
        self.publish()

    def publish(self):
        present = sorted(self.inc.vcpu_tids)
        mask = 0
        for index in present[:self.online]:
            mask |= 1 << index
        flags = layout.GUEST_FLAG_SCHED_IN
        if self.host_valid:
            flags |= layout.GUEST_FLAG_HOST_VALID
        if self.watchdog:
            flags |= layout.GUEST_FLAG_WATCHDOG
        self.gseq += 2
        values = dict(
            magic=layout.GUEST_MAGIC, abi_version=layout.ABI_VERSION,
            seq=self.gseq, flags=flags, ack_target_seq=self.ack,
            applied_target=self.applied if self.ack else 0,
            online_vcpus=self.online, present_vcpus=len(present),
            sample_count=self.count, timestamp_ns=self.timestamp_ns,
            interval_ns=self.interval_ns if self.count else 0,
            util=self.util, steal=0, ctxsw_per_sec=self.ctxsw,
            own_ctxsw_per_sec=10, host_errors=self.host_errors,
            watchdog_fires=self.fires, sched_in_per_sec=self.sched_in,
            online_mask=tuple((mask >> (64 * i)) & (2 ** 64 - 1)
                              for i in range(layout.MASK_WORDS)))
        data = layout.pack(layout.GUEST_FIELDS, layout.GUEST_STRUCT, values)
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_NOFOLLOW)
        except OSError:
            return
        try:
            os.pwrite(fd, data, layout.GUEST_OFFSET)
        finally:
            os.close(fd)


# -- the checker --------------------------------------------------------------
@dataclasses.dataclass
class Mark:
    """The checker's view of one thread."""

    label: tuple                # ('fresh',), ('shared',), ('vm', uuid)...
    cpus: frozenset             # the affinity it last saw
    fresh_ticks: int = 0
    # The mark as it was before the thread last gained CPUs.
    before: 'Mark' = None

    def came_back(self, cpus, called_on):
        """The earlier mark, if a narrow brings the thread back to it.

        ``called_on``: the CPUs the thread was on when the pin call
        that put it on ``cpus`` was made. libvirt runs a guest's calls
        in turn: a narrow made then, landing after another call (of a
        dead agent, say) moved the thread away, puts it back within
        where it was, in the pool it was in.
        """
        before = self.before
        if (called_on is not None and before is not None and
                before.cpus == called_on and cpus <= called_on):
            return Mark(before.label, cpus, before.fresh_ticks,
                        before.before)
        return None


class Checker:
    """The agent's promises, judged on the fake libvirt's affinities."""

    def __init__(self, world):
        self.world = world
        self.marks = {}
        self.calls_seen = 0
        self.affinities_seen = 0
        self.lock = threading.RLock()

    @staticmethod
    def _pools(plan, inc, kind):
        """[(label, CPUs)] a thread may be placed in under ``plan``.

        Its own pool first, then the shared pool. Without an idle core
        the shared pool is every managed CPU and floats over the others
        by design (``floating``: no check).
        """
        if plan is None:
            return []
        vm = plan.vms.get(inc.uuid)
        shared = ('shared',) if plan.idle_cpus else ('floating',)
        if kind == 'vcpu':
            pools = []
            if vm is not None and vm.cores:
                pools.append((('vm', inc.uuid), vm.cpus))
            pools.append((shared, plan.shared_cpus))
            return pools
        # The enforcer may park an emulator pinning that waits on the
        # shared CPUs (it joins that pool), as it does vCPUs.
        if plan.emulator_cores:
            return [(('emulator',), plan.emulator_cpus),
                    (shared, plan.shared_cpus)]
        return [(shared, plan.emulator_cpus)]

    def cpus_of(self, key):
        """The CPUs the checker last saw thread ``key`` on, or None."""
        with self.lock:
            mark = self.marks.get(key)
            return None if mark is None else mark.cpus

    def evaluate(self, where, landing=None):
        with self.lock:
            self._evaluate(where, landing)

    def _managed_threads(self):
        """Threads of the managed guests that run or may run.

        Not those of a guest still migrating in: paused, they run
        nowhere; once it runs its threads are fresh.
        """
        out = []
        for inc in self.world.incarnations():
            if inc.managed and inc.ready:
                for key, kind, cpus, definition in inc.threads():
                    out.append((inc, key, kind, cpus, definition))
        return out

    def _evaluate(self, where, landing):
        world = self.world
        self._check_hands_off(where)
        self._check_affinity_calls(where)
        plan = world.plan_in_force()
        releasing = world.releasing
        threads = self._managed_threads()
        live = set()
        for inc, key, kind, cpus, definition in threads:
            live.add(key)
            mark = self.marks.get(key)
            if mark is None:
                self.marks[key] = Mark(('fresh',), cpus)
                continue
            if cpus == mark.cpus:
                continue
            if cpus <= mark.cpus:
                # Narrowed: the same pool (a fresh thread stays fresh
                # until it is alone in its pool, see _join_pools).
                mark.cpus = cpus
                continue
            call = (plan, releasing, None)
            if landing is not None and landing[0] == key:
                call = landing[1:]
            came_back = mark.came_back(cpus, call[2])
            if came_back is not None:
                # A narrow queued behind a call that moved the thread
                # away: it ends where it was, in the pool it was in.
                self.marks[key] = came_back
                continue
            # It gained CPUs: the pool of the pin that put it there.
            mark.before = Mark(mark.label, mark.cpus, mark.fresh_ticks)
            mark.cpus = cpus
            mark.fresh_ticks = 0
            mark.label = self._landed_label(inc, kind, cpus, definition,
                                            call)
        for key in [k for k in self.marks if k not in live]:
            del self.marks[key]
        if plan is not None and not releasing:
            self._join_pools(plan, threads)
        self._check_conflicts(where, threads)

    def _landed_label(self, inc, kind, cpus, definition, call):
        """The label of a thread a pin call ``call`` put on ``cpus``.

        The pool of the plan the call carried out that holds them. A
        release puts a thread back on its definition, even one that
        lands after the next agent started: libvirt made it so, and
        the agent that runs then has to place it (fresh).
        """
        plan, releases, _ = call
        if releases:
            return ('fresh',) if cpus == definition else ('stray', inc.uuid)
        for label, pool in self._pools(plan, inc, kind):
            if cpus <= pool:
                return label
        return ('stray', inc.uuid)

    def _effective(self, inc, key):
        """The label that counts, or None for a thread still in grace."""
        mark = self.marks[key]
        if mark.label[0] == 'fresh':
            if mark.fresh_ticks < GRACE_TICKS:
                return None
            return ('unplaced', inc.uuid)
        if mark.label[0] == 'floating':
            return None
        return mark.label

    def _join_pools(self, plan, threads):
        """Threads inside a pool's CPUs, alone there, are in that pool.

        Their own outstanding (hung) pin calls' CPUs count as theirs:
        they too must lie in the pool. Alone of the threads of other
        guests in other pools, and of the CPUs other guests' outstanding
        calls may still move a thread onto, under the label their
        landing gives it (a hung call into the same pool keeps no one
        out). Threads that would join the same pool together do so
        together, as the enforcer's ledger lets pinnings on their way
        into a pool join it: the largest such set whose threads clash
        with no thread outside it.
        """
        may = collections.defaultdict(frozenset)
        landings = collections.defaultdict(list)   # key -> [(CPUs, label)]
        kinds = {key: (inc, kind, definition)
                 for inc, key, kind, _, definition in threads}
        for (key, _), (cpus, call) in list(self.world.pending.items()):
            may[key] |= cpus
            if key in kinds and call is not None:
                inc, kind, definition = kinds[key]
                label = self._landed_label(inc, kind, cpus, definition, call)
                # Landed fresh, it is in its grace (no label that counts).
                landings[key].append(
                    (cpus, None if label[0] == 'fresh' else label))
        reach = {key: cpus | may[key] for _, key, _, cpus, _ in threads}
        incs = {key: inc for inc, key, _, _, _ in threads}
        joining = {}                # key -> the pool label it would join
        for inc, key, kind, _, _ in threads:
            for label, pool in self._pools(plan, inc, kind):
                if reach[key] and reach[key] <= pool:
                    if label != self.marks[key].label:
                        joining[key] = label
                    break

        def clashes(inc, key):
            label, cpus = joining[key], reach[key]
            for other, okey, _, ocpus, _ in threads:
                if other.uuid == inc.uuid:
                    continue
                olabel = joining.get(okey, self._effective(other, okey))
                if ocpus & cpus and olabel not in (None, label):
                    return True
                if any(lcpus & cpus and llabel not in (None, label)
                       for lcpus, llabel in landings[okey]):
                    return True
            return False

        dropped = True
        while dropped:
            dropped = False
            for key in sorted(joining, key=str):
                if clashes(incs[key], key):
                    del joining[key]
                    dropped = True
        for key, label in joining.items():
            self.marks[key].label = label

    def _check_conflicts(self, where, threads):
        world = self.world
        users = collections.defaultdict(list)
        for inc, key, kind, cpus, _ in threads:
            label = self._effective(inc, key)
            if label is None:
                continue
            outside = cpus - MANAGED
            if outside:
                world.violation(OutsideManaged, '%s: %s %s of %s may run '
                                'on unmanaged CPUs %s (label %s)'
                                % (where, kind, key[2:], inc.label,
                                   fmt(outside), label[0]))
            for cpu in cpus & MANAGED:
                users[cpu].append((label, inc, key))
        for cpu in sorted(users):
            entries = users[cpu]
            for i, (label, inc, key) in enumerate(entries):
                clash = [(olabel, oinc, okey)
                         for olabel, oinc, okey in entries[i + 1:]
                         if oinc.uuid != inc.uuid and olabel != label]
                if not clash:
                    continue
                olabel, oinc, okey = clash[0]
                cls = UnplacedThread if 'unplaced' in (
                    label[0], olabel[0]) else PoolConflict
                world.violation(cls, '%s: CPU %d runs %s (%s) and %s (%s)'
                                % (where, cpu, _describe(inc, key),
                                   _label(label), _describe(oinc, okey),
                                   _label(olabel)))
                break

    def _check_hands_off(self, where):
        world = self.world
        calls = world.hv.calls
        for call in calls[self.calls_seen:]:
            inc = world.current(call[0])
            if inc is not None and not inc.managed:
                world.violation(HandsOffTouched, '%s: %s guest %s got %s%r'
                                % (where, inc.kind, inc.label, call[1],
                                   call[2:]))
        self.calls_seen = len(calls)
        if self.calls_seen > 10000:
            del calls[:]
            self.calls_seen = 0
        for inc in world.incarnations():
            if inc.managed or inc.boot_pins is None:
                continue
            now = _pins_of(inc.dom)
            if now != inc.boot_pins:
                world.violation(HandsOffTouched, '%s: pins of %s guest %s '
                                'changed from %s to %s'
                                % (where, inc.kind, inc.label,
                                   inc.boot_pins, now))

    def _check_affinity_calls(self, where):
        world = self.world
        for pid, cpus in world.affinity_calls[self.affinities_seen:]:
            world.violation(ForeignProcessTouched, '%s: sched_setaffinity(%d,'
                            ' %s) on %s' % (where, pid, fmt(cpus),
                                            world.processes.get(
                                                pid, 'an unknown process')))
        self.affinities_seen = len(world.affinity_calls)

    def ticked(self, faulty):
        """An agent tick ended: fresh threads age if nothing was injected.

        Not while any guest has a fault: the agent rightly keeps a
        guest off CPUs that a failed or hung guest may still hold.
        """
        if faulty:
            return
        with self.lock:
            for inc in self.world.incarnations():
                if not inc.managed or not inc.ready:
                    continue
                for key, _, _, _ in inc.threads():
                    mark = self.marks.get(key)
                    if mark is not None and mark.label[0] == 'fresh':
                        mark.fresh_ticks += 1

    def released(self, incs, where, page_target=True):
        """Each guest of ``incs`` is back on its definition, all vCPUs."""
        world = self.world
        for inc in incs:
            if not inc.running:
                continue
            dom = inc.dom
            wrong = []
            for index in range(inc.spec.vcpus):
                have = as_set(dom.vcpu_pins.get(index))
                if have != inc.def_vcpus[index]:
                    wrong.append('vCPU %d%s on %s' % (
                        index, '' if index in inc.vcpu_tids else
                        ' (unplugged)', fmt(have)))
            have = as_set(dom.emulator_pin)
            if have != inc.def_emulator:
                wrong.append('emulator on %s' % fmt(have))
            for iothread, cpus in sorted(inc.def_iothreads.items()):
                have = as_set(dom.iothread_pins.get(iothread))
                if have != cpus:
                    wrong.append('I/O thread %d on %s' % (iothread,
                                                          fmt(have)))
            if page_target:
                target = world.page_target(inc)
                if target is not None and target != inc.spec.vcpus:
                    wrong.append('page target %d of %d vCPUs' % (
                        target, inc.spec.vcpus))
            if wrong:
                world.violation(RestoreInexact, '%s: %s (definition: every '
                                'thread on %s) has %s'
                                % (where, inc.label, fmt(inc.def_emulator),
                                   '; '.join(wrong)))
            with self.lock:
                for key, _, cpus, definition in inc.threads():
                    if cpus == definition and key in self.marks:
                        self.marks[key] = Mark(('fresh',), cpus)


def _pins_of(dom):
    return ({i: as_set(c) for i, c in dom.vcpu_pins.items()},
            as_set(dom.emulator_pin),
            {i: as_set(c) for i, c in dom.iothread_pins.items()})


def _describe(inc, key):
    what = key[1]
    if what == 'vcpu':
        return 'vCPU %d of %s' % (key[2], inc.label)
    if what == 'iothread':
        return 'I/O thread %d of %s' % (key[2], inc.label)
    return 'emulator of %s' % inc.label


def _label(label):
    if len(label) > 1:
        return '%s:%s' % (label[0], label[1][:8])
    return label[0]


# -- the agent ----------------------------------------------------------------
@contextlib.contextmanager
def _log_handlers_held():
    """Every log handler's lock, while the process forks.

    A driver thread that writes a record (to ``--log``'s file) as the
    process forks leaves the stream's buffer locked in the copy, whose
    first record then waits forever. Held, no record is half-written;
    the copy gets the handlers' locks anew (logging's fork hook).
    """
    loggers = [logging.getLogger()] + [
        logger for logger in logging.Logger.manager.loggerDict.values()
        if isinstance(logger, logging.Logger)]
    handlers = sorted({h for logger in loggers for h in logger.handlers},
                      key=id)
    for handler in handlers:
        handler.acquire()
    pid = os.getpid()
    try:
        yield
    finally:
        if os.getpid() == pid:
            for handler in reversed(handlers):
                handler.release()


def _wait_for_copy(pid, what, timeout=60.0):
    """The exit status of the forked copy; it must end in ``timeout``.

    A copy that hangs (on a lock some other thread held as the process
    forked) would hang the soak: it is killed and the soak fails.
    """
    give_up = time.monotonic() + timeout
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return status
        if time.monotonic() > give_up:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            raise RuntimeError('the forked copy of the agent did not end '
                               'within %.0f s during %s' % (timeout, what))
        time.sleep(0.001)


class _AbandonedTicks(logging.Handler):
    """Hears the loop say that it abandoned a tick or a plan."""

    def __init__(self, world):
        super().__init__(logging.ERROR)
        self.world = world

    def emit(self, record):
        text = record.getMessage()
        if 'abandoned' in text or 'Could not finish tick' in text or \
                'Not applying the controller' in text:
            detail = ''
            if record.exc_info and record.exc_info[1] is not None:
                exc = record.exc_info[1]
                detail = ': %s: %s' % (type(exc).__name__, exc)
            self.world.violation(TickAbandoned, '%s%s' % (text, detail))


class AgentRun:
    """One ufo-agent process: its driver, its loop, the plan it applies."""

    def __init__(self, world, number):
        self.world = world
        self.number = number
        self.plan = None
        self.driver = libvirt_driver.LibvirtDriver(
            'qemu:///system', managed_cpus=MANAGED, shm_dir=world.shm,
            run_dir=world.run, proc_root=world.proc,
            sysfs_root=world.sysfs, attach_channels=True,
            call_timeout=world.call_timeout,
            # Shorter than the deadline, as on a host: pins and reads of
            # pins are left in flight before it.
            pin_wait=world.call_timeout / 2)
        settings = settings_mod.AgentSettings(
            drift_check_interval=2.0, state_save_interval=5.0,
            libvirt_call_timeout=world.call_timeout)
        self.agent = loop.Agent(
            self.driver, MANAGED, ControllerConfig(), settings,
            store=state_mod.StateStore(world.state_dir), clock=world.clock)
        enforcer = self.agent.enforcer
        real_apply = enforcer.apply

        def apply(plan, guest_online=None):
            self.plan = plan
            return real_apply(plan, guest_online)
        enforcer.apply = apply
        enforcer.sleep = world.sleep
        # uuid -> target seqs this agent wrote.
        self.sent = collections.defaultdict(set)
        real_target = self.driver.set_vcpu_target

        def set_vcpu_target(uuid, vcpus):
            seq = real_target(uuid, vcpus)
            if seq is not None:
                self.sent[uuid].add(seq)
            return seq
        self.driver.set_vcpu_target = set_vcpu_target

    def close(self):
        try:
            self.driver.close()
        except Exception:               # a crashed process just goes
            LOG.debug('closing the driver', exc_info=True)


# -- the world ----------------------------------------------------------------
class World:
    """The host, its guests, the agent, and what went wrong."""

    def __init__(self, call_timeout=DEFAULT_CALL_TIMEOUT):
        self.call_timeout = call_timeout
        # tmpfs where there is one: the fake /proc is rewritten every tick.
        shm = '/dev/shm' if os.access('/dev/shm', os.W_OK) else None
        self.root = tempfile.mkdtemp(prefix='ufo-soak-', dir=shm)
        self.proc = os.path.join(self.root, 'proc')
        self.run = os.path.join(self.root, 'run')
        self.shm = os.path.join(self.root, 'shm')
        self.state_dir = os.path.join(self.root, 'state')
        self.sysfs = os.path.join(self.root, 'sys', 'cpu')
        for path in (self.proc, self.run, self.shm, self.state_dir):
            os.makedirs(path)
        import pathlib
        fakehost.write_sysfs(pathlib.Path(self.sysfs), '0-%d' % (CPUS - 1),
                             siblings={c: '%d,%d' % (c % 6, c % 6 + 6)
                                       for c in range(CPUS)})
        self.clock = SimClock()
        self.hv = SoakLibvirt(self)
        self.specs = {}                 # uuid -> DomainSpec (defined)
        self.incs = {}                  # uuid -> running Incarnation
        self.numbers = 0
        self.next_pid = 2000
        self.next_dom_id = 1
        self.run_ = None                # the AgentRun, or None
        self.agents = 0
        self.releasing = False
        self.broken = False             # a violation was raised
        self.violations = []
        self.affinity_calls = []
        # Outstanding pin calls -> (CPUs, (plan, release)).
        self.pending = {}
        self.processes = {}             # pid -> what it is
        self.impostors = set()
        self.list_script = collections.deque()
        self.libvirtd_stuck = None
        self.libvirtd_waiters = []
        self.libvirtd_hold = 0
        self.conn_fault_until = 0
        self.truncated = {}             # page path -> tick it grows back
        self.ticks = 0
        self.agent_ticks = 0
        self.checker = Checker(self)
        self._last_poll = self.clock()
        self._stack = contextlib.ExitStack()
        self._patch()

    # -- process-wide seams ---------------------------------------------------
    def _patch(self):
        stack = self._stack
        stack.enter_context(mock.patch.dict('sys.modules',
                                            {'libvirt': self.hv}))
        # libvirt's event loop thread: not needed, events are fired here.
        stack.enter_context(mock.patch.object(
            libvirt_host, '_event_loop_started', True))
        # "QEMU" is this process's own user.
        stack.enter_context(mock.patch.object(
            host_channel, 'qemu_owner',
            lambda *a: (os.getuid(), os.getgid())))
        stack.enter_context(mock.patch.object(
            libvirt_guest, 'time', types.SimpleNamespace(
                monotonic=self.clock)))
        # Never the real syscall: the pids are this world's.
        stack.enter_context(mock.patch.object(
            os, 'sched_setaffinity', self._record_affinity))
        handler = _AbandonedTicks(self)
        logger = logging.getLogger(loop.__name__)
        logger.addHandler(handler)
        stack.callback(logger.removeHandler, handler)

    def _record_affinity(self, pid, cpus):
        self.affinity_calls.append((pid, frozenset(cpus)))

    def close(self):
        """Everything back: gates opened, agents closed, files gone."""
        try:
            self.unstick_all('fail')
            if self.run_ is not None:
                self.run_.close()
                self.run_ = None
        finally:
            self._stack.close()
            shutil.rmtree(self.root, ignore_errors=True)

    # -- bookkeeping ----------------------------------------------------------
    def violation(self, cls, message):
        STATS['violations: %s' % cls.kind] += 1
        if cls.__name__ not in IGNORED:
            self.violations.append((cls, message))

    def raise_violations(self):
        if not self.violations:
            return
        found, self.violations = self.violations, []
        self.broken = True
        first = found[0][0]
        lines = ['%s: %s' % (cls.kind, text) for cls, text in found[:12]]
        if len(found) > 12:
            lines.append('... and %d more' % (len(found) - 12))
        raise first('\n'.join(lines))

    def incarnations(self):
        return [self.incs[u] for u in sorted(self.incs)]

    def current(self, uuid):
        return self.incs.get(uuid)

    def pin_call(self, key):
        """(plan, release, CPUs) of a pin call of thread ``key`` made now.

        The plan it carries out (None without one), whether it gives
        the guest back (a stop's or ``--restore``'s), and the CPUs the
        checker saw the thread on then (None: not seen yet): the
        checker labels the thread when the call lands, whenever that
        is.
        """
        return (self.plan_in_force(), self.releasing,
                self.checker.cpus_of(key))

    def plan_in_force(self):
        if self.releasing or self.run_ is None:
            return None
        return self.run_.plan

    def page_path(self, uuid):
        return os.path.join(self.shm, host_channel.shm_name(uuid))

    def page_target(self, inc):
        """The host area's target on a guest's page, None without one."""
        if inc.dom is None or ("<shmem name='%s'" % host_channel.shm_name(
                inc.uuid)) not in inc.dom.live_xml:
            return None
        try:
            with open(self.page_path(inc.uuid), 'rb') as handle:
                data = handle.read(layout.HOST_SIZE)
        except OSError:
            return None
        if len(data) < layout.HOST_SIZE:
            return None
        host = layout.unpack(layout.HOST_FIELDS, layout.HOST_STRUCT, data)
        if host['magic'] != layout.HOST_MAGIC:
            return None
        return host['target_vcpus']

    def shrunk(self, inc, seq, before, after):
        """A guest module took vCPUs offline on target ``seq``.

        Only a target that the running agent wrote may do that: one left
        on the page by an earlier agent (or the source host's) is not
        its decision.
        """
        run = self.run_
        if run is None or seq in run.sent.get(inc.uuid, ()):
            return
        self.violation(ShrinkWithoutDecision, (
            '%s went from %d to %d vCPUs on target seq %d, which the '
            'running agent (number %d) did not send (it sent %s)'
            % (inc.label, before, after, seq, run.number,
               sorted(run.sent.get(inc.uuid, ())) or 'none')))

    # -- the fake /proc -------------------------------------------------------
    def _task(self, inc, tid, comm):
        path = os.path.join(self.proc, str(inc.pid), 'task', str(tid))
        os.makedirs(path, exist_ok=True)
        with open(os.path.join(path, 'comm'), 'w') as handle:
            handle.write(comm + '\n')
        self._schedstat(inc, tid)

    def _schedstat(self, inc, tid):
        path = os.path.join(self.proc, str(inc.pid), 'task', str(tid),
                            'schedstat')
        with open(path, 'w') as handle:
            handle.write('%d %d %d\n' % (inc.cpu_ns[tid], inc.wait_ns[tid],
                                         inc.slices[tid]))

    def _pid(self):
        self.next_pid += 1
        return self.next_pid

    def _spawn(self, inc):
        os.makedirs(os.path.join(self.proc, str(inc.pid), 'task'))
        self.processes[inc.pid] = 'QEMU of %s' % inc.label
        self._task(inc, inc.pid, 'qemu-system-x86')
        inc.other_tids.append(inc.pid)
        for index in range(inc.spec.vcpus):
            self._plug(inc, index)
        for iothread in range(1, inc.iothreads + 1):
            tid = self._pid()
            inc.other_tids.append(tid)
            self._task(inc, tid, 'IO iothread%d' % iothread)
        self._write_process_schedstat(inc)
        with open(os.path.join(self.run, inc.spec.name + '.pid'),
                  'w') as handle:
            handle.write('%d\n' % inc.pid)

    def _plug(self, inc, index):
        tid = self._pid()
        inc.vcpu_tids[index] = tid
        self._task(inc, tid, 'CPU %d/KVM' % index)

    def _write_process_schedstat(self, inc):
        with open(os.path.join(self.proc, str(inc.pid), 'schedstat'),
                  'w') as handle:
            handle.write('%d %d %d\n' % (inc.cpu_ns[inc.pid],
                                         inc.wait_ns[inc.pid],
                                         inc.slices[inc.pid]))

    def _reap(self, inc):
        shutil.rmtree(os.path.join(self.proc, str(inc.pid)),
                      ignore_errors=True)
        try:
            os.unlink(os.path.join(self.run, inc.spec.name + '.pid'))
        except FileNotFoundError:
            pass
        for pid, owner in list(self.processes.items()):
            if owner.endswith(inc.label):
                del self.processes[pid]

    def _account(self, inc):
        """One second of the guest's threads, as the host sees it."""
        busy = inc.busy()
        online = inc.online()
        plugged = sorted(inc.vcpu_tids)
        busy_idx = plugged[:busy]
        room = frozenset().union(*[as_set(inc.dom.vcpu_pins.get(i))
                                   for i in busy_idx]) if busy_idx \
            else frozenset()
        ran = min(busy, len(room)) / busy if busy else 0.0
        for n, index in enumerate(plugged):
            tid = inc.vcpu_tids[index]
            if n < busy:
                inc.cpu_ns[tid] += int(1e9 * ran)
                inc.wait_ns[tid] += int(1e9 * (1.0 - ran))
                inc.slices[tid] += inc.switches // 2 + 50
            elif n < online:
                inc.cpu_ns[tid] += 200000
                inc.slices[tid] += 20
            else:
                inc.slices[tid] += 1
            self._schedstat(inc, tid)
        packets, bytes_in, bytes_out = inc.nic
        if packets:
            counters = inc.dom.nic_counters.setdefault(
                'tap7c1f2e3d-4b', dict.fromkeys(
                    ('rx.pkts', 'tx.pkts', 'rx.bytes', 'tx.bytes'), 0))
            counters['rx.pkts'] += packets
            counters['tx.pkts'] += packets
            counters['rx.bytes'] += packets * bytes_in
            counters['tx.bytes'] += packets * bytes_out
        for tid in inc.other_tids:
            inc.cpu_ns[tid] += 20000000
            inc.slices[tid] += 50
            self._schedstat(inc, tid)
        self._write_process_schedstat(inc)

    # -- guests ---------------------------------------------------------------
    def new_uuid(self):
        self.numbers += 1
        return '%08x-50ac-4000-8000-%012x' % (self.numbers, self.numbers)

    def define(self, kind, vcpus, iothreads=0, module='honest',
               carried_pins=None):
        uuid = self.new_uuid()
        spec = DomainSpec(uuid, 'instance-%08x' % self.numbers, kind,
                          vcpus, iothreads, module, carried_pins)
        self.specs[uuid] = spec
        return spec

    def boot(self, spec, deliver=True, migrating_pins=None,
             migrating_page=None):
        """Start a QEMU for ``spec``: a new incarnation on its definition.

        ``migrating_pins``: an incoming live migration, paused until
        :meth:`migration_done`, its threads on the source's pins, its
        page carrying ``migrating_page`` = (target, target seq).
        """
        self.numbers += 1
        inc = Incarnation(self, spec, self.numbers, self._pid(),
                          self.next_dom_id)
        self.next_dom_id += 1
        self._spawn(inc)
        xml = spec.xml()
        live = xml.replace("<domain type='kvm'>",
                           "<domain type='kvm' id='%d'>" % inc.dom_id)
        dom = SoakDomain(self.hv, self, inc, xml, live)
        inc.dom = dom
        if migrating_pins is not None:
            pins = migrating_pins
            dom.vcpu_pins = {i: bits(pins) for i in range(spec.vcpus)}
            dom.emulator_pin = bits(pins)
            dom.iothread_pins = {i: bits(pins)
                                 for i in range(1, spec.iothreads + 1)}
            dom.paused = lv.VIR_DOMAIN_PAUSED_MIGRATION
            inc.ready = False
        else:
            vcpus, emulator, iothreads = inc.def_vcpus, inc.def_emulator, \
                inc.def_iothreads
            dom.vcpu_pins = {i: bits(c) for i, c in vcpus.items()}
            dom.emulator_pin = bits(emulator)
            dom.iothread_pins = {i: bits(c) for i, c in iothreads.items()}
        if not inc.managed:
            inc.boot_pins = _pins_of(dom)
        old = self.hv.domains.get(spec.uuid)
        if old is not None:
            old.dead = True
            old.unstick('fail')
        self.hv.domains[spec.uuid] = dom
        self.incs[spec.uuid] = inc
        if migrating_page is not None:
            self._carry_page(inc, *migrating_page)
        if inc.managed:
            inc.module = GuestModule(self, inc, spec.module)
            if migrating_page is not None and spec.module != 'absent':
                # The guest kernel kept its vCPUs offline on the way.
                inc.module.online = max(1, min(migrating_page[0],
                                               spec.vcpus))
        if deliver:
            self.hv.fire(dom, lv.VIR_DOMAIN_EVENT_STARTED,
                         lv.VIR_DOMAIN_EVENT_STARTED_MIGRATED
                         if migrating_pins is not None else 0)
        STATS['guests started'] += 1
        return inc

    def _carry_page(self, inc, target, seq):
        """The page a live migration brings: the source agent's last."""
        path = self.page_path(inc.uuid)
        channel = host_channel.HostChannel(path, inc.spec.vcpus)
        try:
            channel.initialize()
            for _ in range(seq):
                channel.set_target(max(1, min(target, inc.spec.vcpus)))
        finally:
            channel.close()

    def migration_done(self, inc, deliver=True):
        inc.dom.paused = None
        inc.ready = True
        self.hv.fire(inc.dom, lv.VIR_DOMAIN_EVENT_RESUMED,
                     lv.VIR_DOMAIN_EVENT_RESUMED_MIGRATED if deliver else 0)

    def stop(self, inc, undefine=False, deliver=True, migrated=False):
        """The QEMU ends (shutdown, destroy, migration out)."""
        dom = inc.dom
        dom.running = False
        dom.paused = None
        dom.dead = True
        self._join(dom.unstick('fail'), dom.uuid)
        inc.running = False
        self._reap(inc)
        del self.incs[inc.uuid]
        if deliver:
            self.hv.fire(dom, lv.VIR_DOMAIN_EVENT_STOPPED,
                         lv.VIR_DOMAIN_EVENT_STOPPED_MIGRATED if migrated
                         else 0)
        if undefine:
            del self.hv.domains[inc.uuid]
            self.specs.pop(inc.uuid, None)
            if deliver:
                self.hv.fire(dom, lv.VIR_DOMAIN_EVENT_UNDEFINED)
        STATS['guests stopped'] += 1

    def pause(self, inc, deliver=True):
        inc.dom.paused = lv.VIR_DOMAIN_PAUSED_USER
        if deliver:
            self.hv.fire(inc.dom, lv.VIR_DOMAIN_EVENT_SUSPENDED,
                         lv.VIR_DOMAIN_EVENT_SUSPENDED_PAUSED)

    def resume(self, inc, deliver=True):
        inc.dom.paused = None
        if deliver:
            self.hv.fire(inc.dom, lv.VIR_DOMAIN_EVENT_RESUMED)

    def reboot(self, inc, deliver=True):
        if inc.module is not None:
            inc.module.rebooted()
        if deliver:
            self.hv.fire_reboot(inc.dom)

    def unplug(self, inc):
        """virsh setvcpus --live: the highest vCPU leaves (not vCPU 0)."""
        plugged = sorted(inc.vcpu_tids)
        if len(plugged) < 2:
            return False
        index = plugged[-1]
        tid = inc.vcpu_tids.pop(index)
        shutil.rmtree(os.path.join(self.proc, str(inc.pid), 'task',
                                   str(tid)), ignore_errors=True)
        if inc.module is not None:
            inc.module.online = max(1, min(inc.module.online,
                                           len(inc.vcpu_tids)))
        STATS['vCPUs unplugged'] += 1
        return True

    def plug(self, inc):
        """A vCPU comes back: a new thread, on libvirt's pin for it."""
        missing = [i for i in range(inc.spec.vcpus)
                   if i not in inc.vcpu_tids]
        if not missing:
            return False
        self._plug(inc, missing[0])
        if inc.module is not None:
            inc.module.online += 1       # udev onlines hot-added CPUs
        STATS['vCPUs plugged'] += 1
        return True

    def add_impostor(self, inc):
        """A process of another user named like a vhost thread of QEMU."""
        pid = self._pid()
        path = os.path.join(self.proc, str(pid))
        os.makedirs(path)
        for name, text in (
                ('comm', 'vhost-%d\n' % inc.pid),
                ('schedstat', '1000 0 1\n'),
                ('status', 'Name:\tvhost-%d\nState:\tS (sleeping)\n'
                 'Tgid:\t%d\nPid:\t%d\nPPid:\t1\nUid:\t1000\t1000\t1000\t'
                 '1000\nGid:\t1000\t1000\t1000\t1000\n'
                 % (inc.pid, pid, pid)),
                ('stat', '%d (vhost-%d) S 1 %d %d 0 -1 4194304 0 0 0 0 0 0 '
                 '0 0 20 0 1 0 100 0 0\n' % (pid, inc.pid, pid, pid)),
                ('cgroup', '0::/user.slice/user-1000.slice\n')):
            with open(os.path.join(path, name), 'w') as handle:
                handle.write(text)
        self.processes[pid] = 'a process of uid 1000 named vhost-%d' % \
            inc.pid
        self.impostors.add(pid)
        STATS['vhost impostors'] += 1

    def write_page(self, inc, offset, data):
        """Bytes a hostile guest (or QEMU's user) writes into its page."""
        path = self.page_path(inc.uuid)
        if not os.path.exists(path):
            return False
        fd = os.open(path, os.O_WRONLY | os.O_NOFOLLOW)
        try:
            os.pwrite(fd, data, offset)
        finally:
            os.close(fd)
        STATS['page writes'] += 1
        return True

    def truncate_page(self, inc, size, hold):
        path = self.page_path(inc.uuid)
        if not os.path.exists(path):
            return False
        os.truncate(path, size)
        self.truncated[path] = self.ticks + hold
        STATS['pages truncated'] += 1
        return True

    def corrupt_state(self, inc, kind):
        path = os.path.join(self.state_dir, '%s.json' % inc.uuid)
        if kind == 'nested':
            learned = '[' * 100000 + ']' * 100000
        elif kind == 'infinity':
            learned = json.dumps({
                'vcpus': inc.spec.vcpus, 'threads_per_core': 2,
                'flat_sf': False, 'sf_counts_idle': False,
                'model': {'threshold': 0.3, 'samples': {},
                          'models': {'1': [0.0, 0.0, 1.0, 1.0, 1e400]}}})
        else:
            learned = '{"model": "%s"' % ('\x00' * 8)
        with open(path, 'w') as handle:
            handle.write('{"version": 1, "uuid": "%s", "learned": %s}'
                         % (inc.uuid, learned))
        STATS['state files corrupted'] += 1

    # -- faults ---------------------------------------------------------------
    def faulty(self):
        """uuids with an injected fault; every guest's while libvirtd has."""
        if self.list_script or self.libvirtd_stuck is not None or \
                self.hv.lookup_error is not None or \
                self.hv.open_error is not None:
            return set(self.incs)
        out = {u for u, inc in self.incs.items() if inc.dom.faulty()}
        out |= {os.path.basename(p)[4:] for p in self.truncated}
        return out

    def _join(self, returned, key=None):
        # The driver's worker threads outlive their calls: wait for the
        # calls, then for the driver to take the abandoned one back.
        for event in returned:
            if not event.wait(5.0):
                raise RuntimeError('a released libvirt call is still '
                                   'running')
        if not returned or self.run_ is None:
            return
        deadlines = self.run_.driver._host.deadlines
        # A call on the connection that waits for a stuck libvirtd is not
        # one of these: it returns when libvirtd answers, and
        # unstick_libvirtd waits for it then.
        keys = {key}
        if not any(not event.is_set() for event in self.libvirtd_waiters):
            keys.add(deadline_mod.CONNECTION)
        give_up = time.monotonic() + 5.0
        while keys & set(deadlines.outstanding()):
            if time.monotonic() > give_up:
                raise RuntimeError('a released libvirt call on %s is still '
                                   'outstanding' % key)
            time.sleep(0.001)

    def unstick(self, dom, late):
        self._join(dom.unstick(late), dom.uuid)

    def unstick_all(self, late='fail'):
        for dom in list(self.hv.domains.values()):
            self.unstick(dom, late)
        for inc in self.incs.values():
            self.unstick(inc.dom, late)
        self.unstick_libvirtd()

    def unstick_libvirtd(self):
        gate, self.libvirtd_stuck = self.libvirtd_stuck, None
        if gate is not None:
            gate.set()
        waiters, self.libvirtd_waiters = self.libvirtd_waiters, []
        self._join(waiters)

    def clear_faults(self):
        for inc in self.incs.values():
            inc.dom.script.clear()
            inc.dom.fail.clear()
        self.list_script.clear()
        self.hv.lookup_error = None
        self.hv.open_error = None

    def _expire_faults(self):
        for inc in list(self.incs.values()):
            dom = inc.dom
            until = getattr(dom, 'fault_until', None)
            if until is not None and self.ticks >= until:
                dom.script.clear()
                dom.fail.clear()
                dom.fault_until = None
            hold = getattr(dom, 'stuck_until', None)
            if hold is not None and self.ticks >= hold:
                dom.stuck_until = None
                self.unstick(dom, dom.late)
        if self.conn_fault_until and self.ticks >= self.conn_fault_until:
            self.conn_fault_until = 0
            self.list_script.clear()
            self.hv.lookup_error = None
            self.hv.open_error = None
        if self.libvirtd_stuck is not None and \
                self.ticks >= self.libvirtd_hold:
            self.unstick_libvirtd()
        for path, until in list(self.truncated.items()):
            if self.ticks >= until:
                del self.truncated[path]
                if os.path.exists(path):
                    size = os.path.getsize(path)
                    if size < layout.PAGE_SIZE:
                        os.truncate(path, 1024 * 1024)

    # -- time -----------------------------------------------------------------
    def sleep(self, seconds):
        """The enforcer waits for answers: the guests run meanwhile."""
        self.clock.now += max(seconds, 0.001)
        if self.clock.now - self._last_poll >= 0.01:
            self._poll_modules()

    def _poll_modules(self):
        now = self.clock.now
        self._last_poll = now
        for inc in self.incarnations():
            if inc.module is not None and inc.dom.paused is None:
                inc.module.poll(now)

    def tick(self):
        """One second of the host; the agent's tick if it runs."""
        self._expire_faults()
        faulty = self.faulty()
        self.clock.now += 1.0
        for inc in self.incarnations():
            if inc.dom.paused is None:
                self._account(inc)
        self._poll_modules()
        for inc in self.incarnations():
            if inc.module is not None and inc.dom.paused is None:
                inc.module.sample(self.clock.now)
        self.ticks += 1
        STATS['ticks'] += 1
        run = self.run_
        if run is None:
            return
        agent = run.agent

        def one_tick():
            try:
                agent.driver.heartbeat()
            except base.DriverError:
                pass
            agent.tick()
        before = len(self.violations)
        if self.guarded(one_tick, 'a tick') is KILLED:
            self.crash_agent()
            return
        self.agent_ticks += 1
        STATS['agent ticks'] += 1
        self.checker.evaluate('after tick %d' % self.ticks)
        self.checker.ticked(faulty | self.faulty())
        if len(self.violations) == before:
            self._check_idle(run, faulty)

    def _check_idle(self, run, faulty):
        plan = run.plan
        for inc in self.incarnations():
            if not inc.managed:
                continue
            idle = (inc.demand == 0 and inc.uuid not in faulty and
                    inc.ready and inc.dom.paused is None and
                    plan is not None and inc.uuid in plan.vms)
            inc.idle_ticks = inc.idle_ticks + 1 if idle else 0
            if inc.idle_ticks >= IDLE_TICKS and plan.vms[inc.uuid].cores:
                self.violation(IdleGuestHoldsCores, (
                    '%s (module %s) has been idle on the host for %d ticks '
                    'and holds cores %s (CPUs %s), mode %s'
                    % (inc.label, inc.spec.module, inc.idle_ticks,
                       sorted(plan.vms[inc.uuid].cores),
                       fmt(plan.vms[inc.uuid].cpus),
                       plan.vms[inc.uuid].mode.value)))
                inc.idle_ticks = 0

    # -- the fail-safe of a crashing agent: a forked copy goes first ----------
    def guarded(self, func, what):
        """``func()``, first in a forked copy while a page is truncated.

        Reading or writing a truncated mmapped page kills a process with
        SIGBUS; the copy dying says the agent would have.
        """
        short = [p for p in self.truncated
                 if os.path.exists(p) and
                 os.path.getsize(p) < layout.PAGE_SIZE]
        if short:
            with _log_handlers_held():
                pid = os.fork()
            if pid == 0:
                try:
                    func()
                finally:
                    os._exit(0)
            status = _wait_for_copy(pid, what)
            if os.WIFSIGNALED(status):
                sig = os.WTERMSIG(status)
                self.violation(AgentKilled, 'the agent died of %s during %s '
                               'with truncated page(s) %s'
                               % (signal.Signals(sig).name, what,
                                  ', '.join(os.path.basename(p)
                                            for p in short)))
                self.raise_violations()
                return KILLED       # ignored: the agent is dead all the same
        return func()

    # -- the agent's life -----------------------------------------------------
    def start_agent(self):
        for inc in self.incs.values():
            inc.idle_ticks = 0
        self.agents += 1
        try:
            run = AgentRun(self, self.agents)
        except base.DriverError as exc:
            STATS['agent starts failed'] += 1
            LOG.info('The agent cannot start: %s', exc)
            return False
        self.run_ = run
        if self.guarded(run.agent.start, 'the agent\'s start') is KILLED:
            self.crash_agent()
            return False
        STATS['agent starts'] += 1
        return True

    def stop_agent(self):
        """SIGTERM: the agent gives every guest back."""
        run = self.run_
        managed = dict(run.agent.guests)
        self.releasing = True
        try:
            failed = self.guarded(run.agent.stop, 'the agent\'s stop')
        finally:
            self.releasing = False
        if failed is KILLED:
            self.crash_agent()
            return []
        self.checker.evaluate('after the agent\'s stop')
        released = [self.incs[u] for u in sorted(managed)
                    if u not in failed and u in self.incs]
        self.checker.released(
            [inc for inc in released if inc.managed],
            'after the agent\'s stop')
        run.close()
        self.run_ = None
        STATS['agent stops'] += 1
        STATS['guests the stop could not release'] += len(failed)
        return failed

    def crash_agent(self):
        """SIGKILL: nothing is given back; its connections close."""
        self.run_.close()
        self.run_ = None
        STATS['agent crashes'] += 1

    def restore_host(self, list_failures=0):
        """``ufo-agent --restore``: libvirt fails its first listings."""
        self.unstick_all('fail')
        self.clear_faults()
        self.list_script.extend(['fail'] * list_failures)
        self.releasing = True
        outcome = None
        now = [0.0]         # the rounds' clock: no real pause

        def connect():
            return libvirt_driver.LibvirtDriver(
                'qemu:///system', managed_cpus=MANAGED, shm_dir=self.shm,
                run_dir=self.run, proc_root=self.proc,
                sysfs_root=self.sysfs, attach_channels=False,
                use_attached_channels=True, call_timeout=self.call_timeout)
        try:
            # The command's own rounds, without their pauses.
            outcome = self.guarded(lambda: restore_mod.restore_guests(
                connect, budget=list_failures + 5.0, pause=1.0,
                clock=lambda: now[0],
                sleep=lambda pause: now.__setitem__(0, now[0] + pause),
                in_flight_record=state_mod.InFlightRecord(self.state_dir)),
                '--restore')
            failed = None if outcome is KILLED else (
                len(outcome.failed) + (outcome.unlisted is not None))
        except Exception as exc:
            self.violation(RestorePathFailed, (
                '--restore raised %s: %s (libvirt failed the first %d domain '
                'listings)' % (type(exc).__name__, exc, list_failures)))
            failed = None
        finally:
            self.releasing = False
            self.list_script.clear()
            if outcome not in (None, KILLED) and outcome.driver is not None:
                outcome.driver.close()
        STATS['restores'] += 1
        self.checker.evaluate('after --restore')
        if failed is not None:
            if failed:
                self.violation(RestorePathFailed, '--restore could not '
                               'restore %d guest(s) with libvirt answering'
                               % failed)
            self.checker.released(
                [inc for inc in self.incarnations()
                 if inc.managed and inc.ready], 'after --restore')
        return failed
