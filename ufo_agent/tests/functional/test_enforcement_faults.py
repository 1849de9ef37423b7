"""SIGKILL and libvirt errors at every pin call of an enforcement pass.

Three Nova guests (two vCPUs, the ufo_guest module) on the two-CPU test
host; ufo-agent manages both CPUs in the small-host mode. The agent runs
as a real process (``fault_runner``: the real ``ufo_agent.cmd.agent`` with
libvirt's pin calls wrapped) and every check reads libvirt's live pins.

The pass. A first run gives the agent's first plan: two guests get a core
each (the third, left without one, and the emulator threads share every
managed CPU). Before each run the two are pinned to each other's core, as
an agent that crashed after another plan leaves them, so the first pass
must swap them: cores move between guests in every run.

"No CPU in two pools", as far as a two-CPU host can show it
(:func:`pool_problems`), two ways:

* From libvirt's live pins alone. A thread pinned to every managed CPU
  floats: Nova starts shared guests so, and the small-host plan puts the
  guests without a core and an empty emulator pool there on purpose. A
  thread confined to fewer CPUs must be where some plan of the run (or the
  crash-left arrangement) puts it: within its guest's cores, or within the
  shared CPUs when its guest has none there (a thread whose guest has cores
  passes through the shared pool only on all of it, the enforcer's way out
  of a swap); and one such pool per confined thread must leave no CPU in
  two pools, the shared pool counting as none while it is every managed
  CPU (it floats beside the others, by design).
* Against the enforcer's own ledger, written to the runner's journal at
  every pin call and stop: every live thread must be within the CPUs the
  ledger records for it (the in-flight pin counts both ways), and no CPU
  the ledger gives a vCPU or emulator pool may run a thread of another
  pool, except the shared pool while it floats (or floated under the
  previous plan: narrowing it back into the idle pool takes the pass).

After each fault the agent is started again (SIGKILL) or carries on (an
error): it must converge (live pins equal its /status for several ticks,
no pinning left waiting). Then it is SIGKILLed and ``ufo-agent --restore``
must give every guest back exactly: every vCPU and the emulator on every
host CPU (the definition has no pins) and every vCPU online in the guest.
"""

import contextlib
import dataclasses
import itertools
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from ufo_tools.e2e import AgentFailed
from ufo_tools.e2e import AgentProcess
from ufo_tools.e2e import host_online_cpus
from ufo_tools.e2e import nova_guest
from ufo_tools.e2e import set_load
from ufo_tools.e2e import vm_status
from ufo_tools.e2e import wait_guest_online

VCPUS = 2
# Long enough that a guest never falls back by itself during a run: what
# brings its vCPUs back is the agent or --restore.
WATCHDOG_MS = 30000
LOW = 60                    # requests/s: 3% of a vCPU, active
HIGH = 4000
AGENT = {'controller__emulator_min_cores': '0',
         'controller__idle_pool_min_cores': '0',
         'controller__idle_after': '3'}
LIVE = 1                    # VIR_DOMAIN_AFFECT_LIVE
WAITING = 'pins wait for CPUs held by'


@dataclasses.dataclass(frozen=True)
class Pins:
    vcpus: tuple            # one frozenset per vCPU
    emulator: frozenset


class FaultAgent(AgentProcess):
    """The agent run by ``fault_runner`` with ``UFO_FAULT``."""

    def __init__(self, workdir, **options):
        workdir.mkdir()
        super().__init__(workdir, **dict(AGENT, **options))
        self.journal = workdir / 'journal.jsonl'

    def start(self, fault='', *args):
        env = dict(os.environ, UFO_FAULT=fault,
                   UFO_FAULT_JOURNAL=str(self.journal))
        self.proc = subprocess.Popen(
            [sys.executable, '-m', 'ufo_agent.tests.functional.fault_runner',
             '--config-file', str(self.conf), '--log-file', str(self.log)]
            + list(args), env=env)
        return self

    def lines(self):
        if not self.journal.exists():
            return []
        with open(self.journal) as handle:
            return [json.loads(line) for line in handle if
                    line.endswith('\n')]

    def plans(self):
        return [line['plan'] for line in self.lines() if 'plan' in line]

    def calls(self, number=None):
        return [line for line in self.lines() if 'call' in line and
                'what' in line and (number is None or
                                    line['pass'] == number)]

    def stops(self):
        return [line for line in self.lines() if 'stopped' in line]

    def kill(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(30)

    def restore(self):
        """``ufo-agent --restore`` with this configuration."""
        proc = subprocess.run(
            [sys.executable, '-m', 'ufo_agent.cmd.agent', '--config-file',
             str(self.conf), '--restore'], capture_output=True, text=True,
            timeout=120)
        assert proc.returncode == 0, proc.stderr


def process_state(proc):
    """'exited', 'stopped' (SIGSTOP) or 'running'."""
    if proc.poll() is not None:
        return 'exited'
    try:
        with open('/proc/%d/stat' % proc.pid) as handle:
            state = handle.read().rsplit(')', 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return 'exited' if proc.poll() is not None else 'running'
    return 'stopped' if state == 'T' else 'running'


def next_stop(agent, seen, timeout):
    """'stopped' at a new stop (past ``seen`` stops), 'exited' or 'running'.

    A stop counts once the runner journaled it and the kernel shows the
    process stopped (a SIGCONT just sent may not have been taken yet).
    """
    deadline = time.monotonic() + timeout
    while True:
        state = process_state(agent.proc)
        if state == 'exited':
            return state
        if state == 'stopped' and len(agent.stops()) > seen:
            return state
        if time.monotonic() > deadline:
            return 'running'
        time.sleep(0.02)


def cpumap(cpus):
    return tuple(cpu in cpus for cpu in range(os.cpu_count()))


def _set(bits):
    return frozenset(i for i, on in enumerate(bits) if on)


def live(guests):
    return {g.dom.UUIDString(): Pins(
        tuple(_set(m) for m in g.dom.vcpuPinInfo(LIVE)),
        _set(g.dom.emulatorPinInfo(LIVE))) for g in guests}


def pin_live(guest, vcpus, emulator):
    for index in range(guest.vcpus):
        guest.dom.pinVcpuFlags(index, cpumap(vcpus), LIVE)
    guest.dom.pinEmulator(cpumap(emulator), LIVE)


# -- the checks ---------------------------------------------------------------

def _candidates(uuid, kind, cpus, plans, every):
    """The pools (label, floats) a thread confined to ``cpus`` may be in."""
    out = set()
    if cpus == every:
        out.add(('every', True))
    for plan in plans:
        shared = frozenset(plan['shared_cpus'])
        floating = not plan['idle_cpus']
        if kind == 'vcpu':
            vm = plan['vms'].get(uuid)
            own = bool(vm and vm['cores'])
            if own and cpus <= frozenset(vm['cpus']):
                out.add(('vm:' + uuid, False))
        else:
            own = bool(plan['emulator_cores'])
            if own and cpus <= frozenset(plan['emulator_cpus']):
                out.add(('emulator', False))
        # A pinning with a pool of its own passes through the shared pool
        # only on all of it (the enforcer's way out of a swap).
        if cpus <= shared and (not own or cpus == shared):
            out.add(('shared', floating))
    return sorted(out)


def outside_problems(pins, plans, every):
    """The live pins alone against the plans; see the module docstring."""
    threads = []
    for uuid, p in sorted(pins.items()):
        for index, cpus in enumerate(p.vcpus):
            threads.append(('%s vCPU %d' % (uuid[:8], index), cpus,
                            _candidates(uuid, 'vcpu', cpus, plans, every)))
        threads.append(('%s emulator' % uuid[:8], p.emulator,
                        _candidates(uuid, 'emulator', p.emulator, plans,
                                    every)))
    lost = ['%s on CPUs %s, where no plan puts it' % (name, sorted(cpus))
            for name, cpus, cands in threads if not cands]
    if lost:
        return lost
    for choice in itertools.product(*[cands for _, _, cands in threads]):
        if all(len({label for (_, cpus, _), (label, floats) in
                    zip(threads, choice) if cpu in cpus and not floats}) <= 1
               for cpu in every):
            return []
    return ['no CPU-to-one-pool assignment fits: %s' % '; '.join(
        '%s on %s (%s)' % (name, sorted(cpus), cands)
        for name, cpus, cands in threads)]


def floating(plan):
    """Whether the enforcer lets the shared pool float over the others."""
    return not plan['idle_cpus'] and (
        not plan['emulator_cores'] or
        any(not vm['cores'] for vm in plan['vms'].values()))


def ledger_problems(pins, point, plans):
    """The enforcer's ledger at ``point`` (a journal line) against libvirt.

    ``plans`` are the plan being enforced and the one before: when the
    shared pool floated under the one before, its threads may still be on
    every CPU until this pass narrowed them.
    """
    entries = {key: [(pool, frozenset(cpus)) for pool, cpus in v['parts']]
               for key, v in point['ledger'].items()}
    writing = point.get('writing')
    if writing and writing['pool'] is not None:
        # Being pinned: its threads may be in the old or the new set.
        entries.setdefault(writing['key'], []).append(
            (writing['pool'], frozenset(writing['cpus'])))
    actual = {}
    for uuid, p in pins.items():
        actual['%s/vcpu' % uuid] = p.vcpus
        actual['%s/emulator' % uuid] = (p.emulator,)
    problems = []
    for key, threads in actual.items():
        recorded = frozenset().union(*[c for _, c in entries.get(key, [])])
        for cpus in threads:
            if not cpus <= recorded:
                problems.append('%s runs on %s, the ledger says %s'
                                % (key, sorted(cpus), sorted(recorded)))
    floats = any(floating(plan) for plan in plans)
    for key, parts in entries.items():
        labels = {pool for pool, _ in parts}
        if len(labels) != 1:
            continue
        label = labels.pop()
        if not (label.startswith('vm:') or label == 'emulator'):
            continue
        owned = frozenset().union(*[c for _, c in parts])
        for other, threads in actual.items():
            if other == key:
                continue
            others = entries.get(other, [])
            for cpus in threads:
                # A thread is in one of the parts that hold all its CPUs.
                if not cpus & owned or any(
                        cpus <= part and (pool == label or (
                            floats and pool == 'shared'))
                        for pool, part in others):
                    continue
                problems.append('%s runs on %s (ledger %s), CPUs %s are '
                                'in %s' % (other, sorted(cpus), others,
                                           sorted(cpus & owned), label))
    return problems


def pool_problems(agent, guests, before):
    """Both checks, at the agent's last journal point."""
    pins = live(guests)
    lines = agent.lines()
    plans = [before] + [line['plan'] for line in lines if 'plan' in line]
    every = frozenset(host_online_cpus())
    problems = outside_problems(pins, plans, every)
    points = [line for line in lines if 'ledger' in line]
    if points:
        problems += ledger_problems(pins, points[-1], plans[-2:])
    return problems, pins


# -- runs ---------------------------------------------------------------------

def converge(agent, guests, timeout=90.0):
    """Wait until /status, the live pins and the guests agree, for good.

    Three polls in a row spanning two ticks or more, then no pinning may
    be left waiting in the ticks that follow.
    """
    uuids = [g.dom.UUIDString() for g in guests]
    streak = []
    deadline = time.monotonic() + timeout
    last = None
    while True:
        status = agent.status()
        pins = live(guests)
        ok = True
        for uuid in uuids:
            vm = vm_status(status, uuid)
            if vm is None or not vm['cpus']:
                ok = False
                continue
            want = frozenset(int(c) for c in vm['cpus'].split(','))
            if any(cpus != want for cpus in pins[uuid].vcpus) or \
                    pins[uuid].emulator != frozenset(
                        status['pools']['emulator_cpus']):
                ok = False
            if vm['signal'] == 'guest' and \
                    vm['online_vcpus'] != vm['target_vcpus']:
                ok = False
        last = (status, pins)
        streak = streak + [status['ticks']] if ok else []
        if len(streak) >= 3 and streak[-1] - streak[0] >= 2:
            break
        if time.monotonic() > deadline:
            raise AgentFailed('no convergence: %s\n%s'
                              % (last, agent.log_text()[-3000:]))
        time.sleep(0.3)
    mark = len(agent.log_text())
    ticks = status['ticks']
    agent.wait(lambda s: s['ticks'] >= ticks + 2, what='two more ticks')
    assert WAITING not in agent.log_text()[mark:], agent.log_text()[mark:]
    return status


def assert_given_back(guests):
    """Exactly the definition: every thread on every CPU, all online."""
    every = frozenset(host_online_cpus())
    for uuid, p in live(guests).items():
        assert p.vcpus == (every,) * VCPUS, (uuid, p)
        assert p.emulator == every, (uuid, p)
    for g in guests:
        assert wait_guest_online(g, set(range(VCPUS))) == set(range(VCPUS))


@pytest.fixture(scope='module')
def trio(guest_artifacts):
    with contextlib.ExitStack() as stack:
        guests = [stack.enter_context(nova_guest(
            vcpus=VCPUS, name='fault-%d' % i, watchdog_ms=WATCHDOG_MS))
            for i in range(3)]
        yield sorted(guests, key=lambda g: g.dom.UUIDString())


@dataclasses.dataclass
class Swap:
    """The first plan, the crash-left arrangement and the pass between."""

    guests: list
    first: dict             # the agent's first plan
    before: dict            # the arrangement, as a plan
    owners: list            # the two guests the first plan gives a core
    calls: int = 0          # pin calls of the swap pass
    rates: dict = dataclasses.field(default_factory=dict)

    def arrange(self):
        every = frozenset(host_online_cpus())
        cpus = {u: frozenset(vm['cpus']) for u, vm in
                self.before['vms'].items()}
        for g in self.guests:
            pin_live(g, cpus[g.dom.UUIDString()], every)

    def loads(self, rates):
        """Set each guest's request rate (0 for those not named).

        Only changed rates touch a guest's console: a command run in a
        parked guest could wake it.
        """
        for g in self.guests:
            uuid = g.dom.UUIDString()
            rate = rates.get(uuid, 0)
            if self.rates.get(uuid) != rate:
                set_load(g, rate)
                self.rates[uuid] = rate


def _first_passes(agent, passes=1, timeout=60.0):
    """Wait until the agent has made ``passes`` passes; its journal."""
    deadline = time.monotonic() + timeout
    while len(agent.plans()) < passes + 1:
        assert agent.proc.poll() is None, agent.log_text()[-3000:]
        assert time.monotonic() < deadline, agent.log_text()[-3000:]
        time.sleep(0.1)


@pytest.fixture(scope='module')
def swap(trio, tmp_path_factory):
    import libvirt
    mine = {g.dom.UUIDString() for g in trio}
    conn = libvirt.open('qemu:///system')
    try:
        others = [d.name() for d in conn.listAllDomains(
            libvirt.VIR_CONNECT_LIST_DOMAINS_RUNNING)
            if d.UUIDString() not in mine]
    finally:
        conn.close()
    # An agent managing every CPU would manage (and give back) them too.
    assert not others, 'the test needs the host to itself: %s' % others
    work = tmp_path_factory.mktemp('swap')
    every = sorted(host_online_cpus())
    # The agent's first plan, from Nova's pins.
    agent = FaultAgent(work / 'first').start('')
    try:
        _first_passes(agent)
    finally:
        agent.kill()
    first = agent.plans()[0]
    owners = sorted(u for u, vm in first['vms'].items() if vm['cores'])
    assert set(first['vms']) == mine, first
    assert len(owners) == 2 and not first['idle_cpus'], first
    x, y = owners
    assert first['vms'][x]['cpus'] != first['vms'][y]['cpus']
    before = {'vms': {u: dict(vm) for u, vm in first['vms'].items()},
              'emulator_cores': [], 'emulator_cpus': every,
              'idle_cpus': [], 'shared_cpus': every}
    before['vms'][x] = dict(first['vms'][y])
    before['vms'][y] = dict(first['vms'][x])
    result = Swap(trio, first, before, owners)
    # The swap pass without faults: how many pin calls it makes.
    result.arrange()
    result.loads({x: LOW, y: LOW})
    agent = FaultAgent(work / 'count').start('')
    try:
        _first_passes(agent)
        assert agent.plans()[0]['vms'] == first['vms']
        calls = agent.calls(1)
        pins = live(trio)
        for uuid in owners:
            assert set(pins[uuid].vcpus) == {
                frozenset(first['vms'][uuid]['cpus'])}, (pins, calls)
        # The pass moved the cores: each owner was pinned to the other's.
        moved = {(c['uuid'], tuple(c['cpus'])) for c in calls
                 if c['kind'] == 'vcpu'}
        for uuid in owners:
            assert (uuid, tuple(first['vms'][uuid]['cpus'])) in moved
        result.calls = len(calls)
    finally:
        agent.kill()
        agent.restore()
    assert_given_back(trio)
    return result


def test_every_step_of_a_swap_and_of_load_moves_keeps_cpus_in_one_pool(
        swap, tmp_path):
    x, y = swap.owners
    c = next(u for u in swap.first['vms'] if u not in swap.owners)
    swap.arrange()
    swap.loads({x: LOW, y: LOW})
    agent = FaultAgent(tmp_path / 'step').start('step')
    checked = []

    def step_until(done, what, timeout=120.0):
        deadline = time.monotonic() + timeout
        while True:
            state = next_stop(agent, len(checked), 0.5)
            if state == 'exited':
                raise AgentFailed('exited: %s' % agent.log_text()[-3000:])
            if state == 'stopped':
                problems, pins = pool_problems(agent, swap.guests,
                                               swap.before)
                assert not problems, (problems, pins)
                checked.append(pins)
                agent.proc.send_signal(signal.SIGCONT)
                continue
            plans = agent.plans()
            if plans and done(plans[-1], live(swap.guests)):
                return plans[-1]
            assert time.monotonic() < deadline, (what, plans[-1:],
                                                 agent.log_text()[-3000:])

    def follows(plan, pins):
        return all(set(pins[u].vcpus) == {frozenset(vm['cpus'])}
                   for u, vm in plan['vms'].items() if u in pins) and all(
            p.emulator == frozenset(plan['emulator_cpus'])
            for p in pins.values())

    try:
        # 1. The swap: the first pass.
        step_until(lambda plan, pins: len(agent.plans()) >= 2 and
                   follows(swap.first, pins), 'the swap')
        assert len(checked) == swap.calls
        # 2. y idles: it is parked, its core becomes the idle pool, where
        # c and the emulator threads go.
        swap.loads({x: LOW})
        plan = step_until(lambda plan, pins: plan['idle_cpus'] and
                          not plan['vms'][y]['cores'] and
                          follows(plan, pins), 'y parked')
        assert plan['idle_cpus'] == swap.first['vms'][y]['cpus']
        # 3. y wakes and x idles: y gets a core (the idle one, or x's when
        # x parks first), x's core goes to y or to the idle pool.
        swap.loads({y: LOW})
        plan = step_until(lambda plan, pins: plan['idle_cpus'] and
                          plan['vms'][y]['cores'] and
                          not plan['vms'][x]['cores'] and
                          follows(plan, pins), 'x parked, y woken')
        assert plan['vms'][c]['cpus'] == plan['idle_cpus'] or \
            plan['vms'][c]['cores']
        assert len(checked) >= swap.calls + 8
        agent.proc.send_signal(signal.SIGTERM)
        while next_stop(agent, len(checked), 30) == 'stopped':
            checked.append(None)
            agent.proc.send_signal(signal.SIGCONT)
        assert agent.proc.wait(60) == 0, agent.log_text()[-3000:]
    finally:
        if agent.proc.poll() is None:
            agent.proc.send_signal(signal.SIGCONT)
            agent.kill()
            agent.restore()
        swap.loads({})
    assert 'Released 3 guests (0 failed)' in agent.log_text()
    assert_given_back(swap.guests)


def _faults(calls, kinds):
    """Every call of the pass for each kind, alternating before/after."""
    if kinds == 'kill':
        # Killed before call n+1 is killed after call n: one run each.
        return ['kill-before:1'] + ['kill-after:%d' % n
                                    for n in range(1, calls + 1)]
    return ['error-%s:%d' % ('before' if n % 2 else 'after', n)
            for n in range(1, calls + 1)]


@pytest.mark.parametrize('kinds', ['kill', 'error'])
def test_fault_at_each_pin_call_of_the_swap_then_agent_and_restore_converge(
        swap, tmp_path, kinds):
    x, y = swap.owners
    assert swap.calls >= 4
    swap.loads({x: LOW, y: LOW})
    failures = []
    try:
        for fault in _faults(swap.calls, kinds):
            work = tmp_path / fault.replace(':', '-')
            work.mkdir()
            swap.arrange()
            agent = FaultAgent(work / 'faulty').start(fault)
            again = None
            try:
                if kinds == 'kill':
                    assert agent.proc.wait(60) == -signal.SIGKILL, \
                        agent.log_text()[-3000:]
                    problems, pins = pool_problems(agent, swap.guests,
                                                   swap.before)
                    if problems:
                        failures.append((fault, 'killed', problems, pins))
                    again = FaultAgent(work / 'again').start()
                    converge(again, swap.guests)
                    again.kill()
                    again.restore()
                else:
                    for seen, where in enumerate(('fault', 'pass-end')):
                        assert next_stop(agent, seen, 60) == 'stopped', \
                            agent.log_text()[-3000:]
                        assert agent.stops()[-1]['stopped'] == where
                        problems, pins = pool_problems(agent, swap.guests,
                                                       swap.before)
                        if problems:
                            failures.append((fault, where, problems, pins))
                        agent.proc.send_signal(signal.SIGCONT)
                    converge(agent, swap.guests)
                    assert 'injected error' in agent.log_text()
                    agent.kill()
                    agent.restore()
            finally:
                for proc in (agent, again):
                    if proc is not None and proc.proc.poll() is None:
                        proc.proc.send_signal(signal.SIGCONT)
                        proc.kill()
            assert_given_back(swap.guests)
    finally:
        swap.loads({})
    assert not failures, failures
