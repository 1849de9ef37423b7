"""One host of the simulated cloud: VMs booted and deleted by the cloud,
a CPU manager per policy, and the QoS each VM gets.

A :class:`ClusterHost` is what ``ufo-sim cluster`` places VMs on. It
holds a host model (the discrete-event engine, or the surrogate fitted
from it) and the policy that manages its CPUs:

``default``
    Nova's shared policy: every vCPU and emulator thread of every VM
    floats over all the host's CPUs, all vCPUs online.
``dyniso``
    Per-VM isolated cores resized by the PARTIES-style loop
    (:mod:`ufo_sim.managers.parties`), emulator threads on the VM's own
    cores, all vCPUs online.
``ufo``
    The real ufo-agent (loop, controller, sampler, enforcer and its
    host-signal tracker) over :class:`~ufo_sim.driver.SimDriver`; with
    ``qos_target`` in its QoS-target mode, each LC guest publishing the
    p99 of each second against its profile's target.

Time: :meth:`ClusterHost.step` takes real-world seconds, the cloud's
clock; each lasts :data:`~ufo_sim.engine.TIME_SCALE` simulated seconds
of the engine, after which the policy acts once (one agent tick a
second, as on a real host). On the surrogate
(:mod:`ufo_sim.cluster.surrogate`) a step is quasi-static: once the
policy's layout holds, the rest of the step runs at once (see
:meth:`ClusterHost.step`; the error this makes is in the research
record 2026-12-02-cluster-hosts).

A VM's offered load is the workload's fraction (``load_at``) of its
flavor's max load (:func:`.flavor_load.max_rps`: the profile's
``max_rps``, defined for its own 8 vCPUs, scaled to the flavor, or
less where the flavor meets QoS alone only at less). An LC VM runs one
of the LC profiles chosen by its request's seed; a BE VM runs the BE
profile with as many busy threads as its mean load keeps busy vCPUs
(the engine's batch threads never idle, so a BE VM's load is fixed at
boot; one whose mean rounds to no busy vCPU runs no work at all).
"""

import dataclasses
import math

import numpy as np

from ufo_agent.controller import config as controller_config
from ufo_agent.controller import plan as plan_mod
from ufo_agent.hostsignal import tracker as signal_tracker
from ufo_agent.service import loop
from ufo_agent.service import settings as settings_mod
from ufo_sim.cluster import flavor_load
from ufo_sim.cluster import surrogate
from ufo_sim import driver as sim_driver
from ufo_sim import engine
from ufo_sim.managers import parties
from ufo_sim import profiles

POLICIES = ('default', 'dyniso', 'ufo')
FIDELITIES = ('engine', 'surrogate')
# Quasi-static stepping on the surrogate (see ClusterHost.step).
STABLE_TICKS = 3
MIN_TICKS = 5


@dataclasses.dataclass(frozen=True)
class VmStep:
    """One VM over one :meth:`ClusterHost.step`.

    ``seconds``: real seconds it was on the host during the step.
    ``violation_s``: of those, the seconds whose p99 exceeded its
    profile's target or in which it served clearly less than was offered
    (LC only; always 0 for BE). ``p99_us``: the p99 of each second (nan
    when it completed nothing), simulated microseconds as the profiles'
    targets. ``vcpu_changes``: vCPUs taken on- or offline in the guest.
    ``be_work_s`` and ``be_asked_s`` (BE only; 0 for LC): the batch work
    it did, in seconds of a lone thread's pace (its chunks done times a
    chunk's CPU time), and what its busy threads would have done each
    on a CPU of its own over the step.
    """

    vm_id: str
    lc: bool
    profile: str
    seconds: int
    violation_s: int
    p99_us: tuple
    vcpu_changes: int
    be_work_s: float = 0.0
    be_asked_s: float = 0.0


@dataclasses.dataclass(frozen=True)
class HostStep:
    """What a host reports for one :meth:`ClusterHost.step`.

    ``vms``: :class:`VmStep` by VM id. ``held_cpus``: the logical CPUs
    the policy held in each second (Default: the whole host; DynIso:
    the VMs' cores; UFO: the VM pools and the emulator pool).
    """

    host: str
    start_s: float
    seconds: int
    vms: dict
    held_cpus: tuple

    @property
    def violation_s(self):
        """LC VM-seconds in violation over the step."""
        return sum(v.violation_s for v in self.vms.values())

    @property
    def lc_seconds(self):
        """LC VM-seconds over the step."""
        return sum(v.seconds for v in self.vms.values() if v.lc)

    @property
    def be_work_s(self):
        """BE work done over the step, lone-thread seconds."""
        return sum(v.be_work_s for v in self.vms.values())

    @property
    def be_asked_s(self):
        """BE work the busy threads asked for over the step."""
        return sum(v.be_asked_s for v in self.vms.values())

    @property
    def held_cpus_mean(self):
        return float(np.mean(self.held_cpus)) if self.held_cpus else 0.0


def profile_of(request):
    """The application profile VM ``request`` runs."""
    if request.lc:
        return profiles.LC_PROFILES[request.seed % len(profiles.LC_PROFILES)]
    return profiles.BE(threads=be_threads(request))


def be_threads(request):
    """Busy threads of a BE VM: its mean load in whole vCPUs (0: none)."""
    return int(round(request.mean_load * request.vcpus))


def offered_rps(profile, vcpus, load):
    """Requests per simulated second of an LC VM at ``load`` of its max."""
    return max(0.0, float(load)) * flavor_load.max_rps(profile, vcpus)


def violated(profile, latencies, offered):
    """Did this second of an LC VM miss QoS? See :func:`missed`."""
    p99 = float(np.percentile(latencies, 99)) if len(latencies) else None
    return missed(profile, p99, len(latencies), offered)


def missed(profile, p99, done, offered):
    """Did an LC VM miss QoS, serving ``done`` of ``offered`` requests?

    Its p99 (None: nothing completed) is over the target, or it
    completed clearly fewer requests than were offered (a growing queue
    whose finished requests hide it: Poisson arrivals, 4 standard
    deviations plus 3 % allowed, as the grids judge).
    """
    if offered <= 0 and done == 0:
        return False
    enough = done >= offered - 4 * math.sqrt(max(offered, 0.0)) - \
        0.03 * offered
    if p99 is None:
        return not enough
    return bool(not enough or p99 > profile.qos_p99_us)


@dataclasses.dataclass
class _Vm:
    request: object
    profile: object
    rps: float = 0.0
    online: int = 0
    owed: float = 0.0       # violation seconds short of a whole one
    late: float = 0.0       # the same, for the p99 the guest publishes


class ClusterHost:
    """A host of the cloud under one policy; see the module docstring."""

    def __init__(self, name, cores, smt, policy, seed, fidelity='engine',
                 config=None, quasi_static=True, qos_target=False):
        if policy not in POLICIES:
            raise ValueError('policy %r: expected one of %s'
                             % (policy, ', '.join(POLICIES)))
        if fidelity not in FIDELITIES:
            raise ValueError('fidelity %r: expected one of %s'
                             % (fidelity, ', '.join(FIDELITIES)))
        self.name = name
        self.policy = policy
        self.fidelity = fidelity
        # UFO's QoS-target mode: an LC VM's flavor carries its profile's
        # target, and software in the guest publishes its p99 each second.
        self.qos_target = bool(qos_target) and policy == 'ufo'
        self.smt = int(smt)
        self.tick = engine.TIME_SCALE
        spec = engine.HostSpec(cores=cores, smt=smt)
        if fidelity == 'surrogate':
            self.host = surrogate.SurrogateHost(spec, seed=seed)
        else:
            self.host = engine.SimHost(spec, seed=seed)
        self.quasi_static = bool(quasi_static) and fidelity == 'surrogate'
        self._stable = 0            # seconds the layout has held
        self._since_change = 0      # seconds since a boot, delete, load
        self.cores = tuple(tuple(g) for g in self.host.siblings)
        self.all_cpus = sorted(c for g in self.cores for c in g)
        self.vms = {}
        self.now = 0.0          # real seconds stepped so far
        self.driver = self.agent = self.parties = None
        if policy == 'ufo':
            self.driver = sim_driver.SimDriver(self.host, self.tick)
            self.agent = loop.Agent(
                self.driver, self.driver.all_cpus,
                config or controller_config.ControllerConfig(),
                settings_mod.AgentSettings(), clock=self.driver.now,
                signal_tracker=signal_tracker.HostSignalTracker(
                    signal_tracker.Windows()),
                wallclock=self.driver.now, sleep=self.driver.sleep)
            self.agent.start()
        elif policy == 'dyniso':
            self.parties = parties.PartiesLoop(len(self.cores), {})

    # -- the cloud's calls ---------------------------------------------------
    def boot(self, request):
        """Start VM ``request`` (a :class:`~.workload.VmRequest`)."""
        if request.vm_id in self.vms:
            raise ValueError('VM %s is already on host %s'
                             % (request.vm_id, self.name))
        profile = profile_of(request)
        if not request.lc and profile.threads == 0:
            profile = dataclasses.replace(profile, threads=1)
            self.host.add_vm(request.vm_id, request.vcpus, profile)
            self.host.stop_vm(request.vm_id)
        else:
            self.host.add_vm(request.vm_id, request.vcpus, profile)
        self.vms[request.vm_id] = _Vm(request, profile,
                                      online=request.vcpus)
        self._since_change = self._stable = 0
        self.host.pin_vcpus(request.vm_id, self.all_cpus)
        self.host.pin_emulator(request.vm_id, self.all_cpus)
        if self.policy == 'ufo':
            target = None
            if self.qos_target and request.lc:
                target = self.driver.real_us(profile.qos_p99_us)
            self.driver.add(request.vm_id, request.vcpus,
                            vm_class='lc' if request.lc else 'be',
                            latency_target_us=target)
        elif self.policy == 'dyniso':
            limit = math.ceil(request.vcpus / self.smt)
            self.parties.add(request.vm_id,
                             max(1, min(self.parties.free(), limit)),
                             limit, profile.qos_p99_us if request.lc
                             else 1.0, self.now)
            self._dyniso_apply()

    def delete(self, vm_id):
        """Shut VM ``vm_id`` down; its CPUs are free once it drained."""
        if vm_id not in self.vms:
            raise KeyError('no VM %s on host %s' % (vm_id, self.name))
        del self.vms[vm_id]
        self._since_change = self._stable = 0
        if self.policy == 'ufo':
            self.driver.remove(vm_id)
        else:
            self.host.stop_vm(vm_id)
        if self.policy == 'dyniso':
            self.parties.remove(vm_id)
            self._dyniso_apply()

    def step(self, seconds, loads):
        """Run ``seconds`` real seconds with these offered loads.

        ``loads`` maps a VM id to its offered load, a fraction of its
        max (VMs not named offer none). Returns a :class:`HostStep`.

        On the engine every second is simulated and judged. On the
        surrogate with ``quasi_static`` the policy acts each second
        until the host's layout has held for ``STABLE_TICKS`` seconds
        (at least ``MIN_TICKS`` after a boot, delete or load change);
        the rest of the step then runs at once with that layout, each of
        its seconds judged as the layout's, up to the second the agent's
        idle detector would park or wake a VM (:meth:`_quiet_span`). A
        UFO agent also ticks at the end of each jump.
        """
        seconds = int(seconds)
        for vm_id, vm in self.vms.items():
            if vm.request.lc:
                rps = offered_rps(vm.profile, vm.request.vcpus,
                                  loads.get(vm_id, 0.0))
                if rps != vm.rps:
                    self.host.set_rps(vm_id, rps)
                    vm.rps = rps
                    self._since_change = 0
        start = self.now
        per_vm = {vm_id: ([], 0, 0) for vm_id in self.vms}
        chunks = {vm_id: self.host.counters(vm_id).requests_done
                  for vm_id, vm in self.vms.items() if not vm.request.lc}
        held = []
        done = 0
        while done < seconds:
            span = 1
            if self.quasi_static and self._stable >= STABLE_TICKS and \
                    self._since_change >= MIN_TICKS:
                span = self._quiet_span(seconds - done)
            self.host.advance_to(self.tick * (self.now + span))
            self.now += span
            done += span
            p99s, misses = {}, {}
            for vm_id, vm in self.vms.items():
                series, bad, changes = per_vm[vm_id]
                online = self.host.online(vm_id)
                changes += abs(online - vm.online)
                vm.online = online
                p99, miss = self._judge(vm_id, vm, span)
                series.extend([p99] * span)
                bad += float(miss) * span
                misses[vm_id] = float(miss)
                p99s[vm_id] = p99 if not math.isnan(p99) else \
                    (math.inf if vm.rps > 0 else 0.0)
                if not vm.request.lc:
                    p99s[vm_id] = 0.0
                per_vm[vm_id] = (series, bad, changes)
            held.extend([self.held_cpus()] * span)
            # The agent ticks at a jump's end too: its next sample then
            # spans one second, as where it ticks every second, and a
            # load change at the next step's start is not read diluted.
            if span == 1 or self.agent is not None:
                before = self._layout()
                self._control(p99s, misses)
                same = self._layout() == before
                self._stable = self._stable + 1 if same else 0
                self._since_change += 1
        vms = {}
        for vm_id, (series, bad, changes) in per_vm.items():
            vm = self.vms[vm_id]
            # The surrogate judges a VM of few requests a second by the
            # share of its seconds in violation: whole seconds are
            # booked, the rest carried to its next step.
            bad += vm.owed
            whole = math.floor(bad + 1e-9)
            vm.owed = bad - whole
            be_work = be_asked = 0.0
            if vm_id in chunks:
                be_work, be_asked = self._be_work(vm_id, vm, chunks[vm_id],
                                                  seconds)
            vms[vm_id] = VmStep(vm_id, vm.request.lc, vm.profile.name,
                                seconds, int(whole), tuple(series),
                                int(changes), be_work, be_asked)
        return HostStep(self.name, start, seconds, vms, tuple(held))

    def _be_work(self, vm_id, vm, chunks_before, seconds):
        """(done, asked) of a BE VM over ``seconds``; see :class:`VmStep`.

        A VM with no busy thread (stopped at its boot) asks nothing.
        """
        if be_threads(vm.request) == 0:
            return 0.0, 0.0
        chunks = self.host.counters(vm_id).requests_done - chunks_before
        done = chunks * vm.profile.be_chunk / self.tick
        busy = min(vm.profile.workers(vm.request.vcpus), vm.request.vcpus)
        return done, float(busy * seconds)

    def _quiet_span(self, left):
        """Seconds the layout holds with the inputs held, at most ``left``.

        The agent's idle detector parks a VM quiet for its wait
        (``idle_after``, longer for one that woke soon after a park) and
        wakes a parked one after ``confirm_samples`` busy samples. A jump
        ends the second before a quiet VM's timer runs out, so that the
        agent's own tick parks it; while a parked VM counts busy samples
        there is no jump (1). Nor while the controller counts samples
        confirming a move of a VM's cores: a sample more than 1.5 ticks
        after the last breaks the streak, so a jump would leave the move
        unconfirmed for good. A timer that ran out without a park changes
        nothing with the inputs held.
        """
        if self.agent is None:
            return left
        now = self.driver.now()
        for state in self.agent.controller.vms.values():
            waking = state.mode == plan_mod.VmMode.IDLE and \
                state.idle.busy_streak > 0
            if waking or state.confirm.pending:
                return 1
            parks_at = state.idle.parks_at()
            if state.mode == plan_mod.VmMode.ACTIVE and parks_at is not None:
                fires = parks_at - now
                if fires > 0:
                    left = min(left, max(1, math.ceil(fires) - 1))
        return left

    def _judge(self, vm_id, vm, span):
        """(p99, in violation) of ``vm`` over the last ``span`` seconds.

        The surrogate's "in violation" is the share of those seconds,
        from 0 to 1 (see :func:`~ufo_sim.cluster.surrogate.predict`).
        """
        if self.fidelity == 'surrogate':
            p99, miss = self.host.take_p99(vm_id)
            return (p99, miss) if vm.request.lc else (math.nan, False)
        lat = self.host.take_latencies(vm_id)
        if not vm.request.lc:
            return math.nan, False
        p99 = float(np.percentile(lat, 99)) if len(lat) else math.nan
        return p99, violated(vm.profile, lat, vm.rps * self.tick * span)

    def _layout(self):
        """What the policy set: pins, online vCPUs, idle class, per VM."""
        if self.policy == 'ufo':
            plan = self.agent.last_plan
            if plan is None:
                return None
            return (plan.emulator_cpus, tuple(sorted(
                (uuid, vm.cpus, vm.online_vcpus)
                for uuid, vm in plan.vms.items())))
        if self.policy == 'dyniso':
            return tuple(sorted(self.parties.cores().items()))
        return None

    def signal(self):
        """The agent's latest host signal (a ``HostSignal``), or None.

        What :meth:`~.nova_scheduler.NovaScheduler.receive_signal`
        takes; None for policies without an agent and before its first
        tick.
        """
        return self.agent.signal if self.agent is not None else None

    def held_cpus(self):
        """Logical CPUs the policy holds now."""
        if self.policy == 'default':
            return len(self.all_cpus)
        if self.policy == 'dyniso':
            return min(len(self.cores),
                       sum(self.parties.cores().values())) * self.smt
        plan = self.agent.last_plan
        if plan is None:
            return len(self.all_cpus)
        cpus = set(plan.emulator_cpus)
        for vm in plan.vms.values():
            if vm.cores:
                cpus |= vm.cpus
        return len(cpus)

    # -- policies ------------------------------------------------------------
    def _control(self, p99s, misses):
        if self.policy == 'ufo':
            if self.qos_target:
                self._publish_latencies(p99s, misses)
            self.agent.tick()
        elif self.policy == 'dyniso':
            before = self.parties.cores()
            self.parties.step(self.now, p99s)
            if self.parties.cores() != before:
                self._dyniso_apply()

    def _publish_latencies(self, p99s, misses):
        """Each LC guest's p99 of the last second, in real microseconds.

        A guest that completed no request publishes nothing (its p99 is
        unknown), as the grid's guests. The surrogate's p99 is of the
        engine's cells that served their load, but a second it judges in
        violation had its p99 over the target: in such seconds at least
        the target's next microsecond is published (the mode acts on
        which side of its target a p99 is, not by how much). A share of
        a second (a VM of few requests) is carried, as its booking is,
        so that a VM judged in violation a third of the time publishes
        a p99 over its target every third second.
        """
        for vm_id, vm in self.vms.items():
            p99 = p99s.get(vm_id)
            if not (vm.request.lc and p99 is not None and
                    math.isfinite(p99) and p99 > 0):
                continue
            latency_us = self.driver.real_us(p99)
            if self.fidelity == 'surrogate':
                vm.late += misses.get(vm_id, 0.0)
                if vm.late >= 1.0 - 1e-9:
                    vm.late -= 1.0
                    latency_us = max(latency_us, self.driver.real_us(
                        vm.profile.qos_p99_us) + 1)
            self.driver.publish_latency(vm_id, latency_us)

    def _dyniso_apply(self):
        """Each VM on its own next cores, in name order, emulator too.

        VMs beyond the host's cores (more VMs than cores) share what is
        left, or float over the whole host when nothing is.
        """
        start = 0
        spill = []
        for vm_id, count in sorted(self.parties.cores().items()):
            mine = self.cores[start:start + count]
            if start + count > len(self.cores) or not mine:
                spill.append(vm_id)
                continue
            start += count
            cpus = sorted(c for core in mine for c in core)
            self.host.pin_vcpus(vm_id, cpus)
            self.host.pin_emulator(vm_id, cpus)
        rest = sorted(c for core in self.cores[start:] for c in core) or \
            self.all_cpus
        for vm_id in spill:
            self.host.pin_vcpus(vm_id, rest)
            self.host.pin_emulator(vm_id, rest)
