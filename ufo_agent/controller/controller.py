"""The UFO controller: a state machine driven by one :meth:`tick` a second.

One tick is Algorithm 1 of the paper without its sleeps:

1. size the emulator pool; if it grows, nothing else changes this tick;
2. for each VM (in uuid order): classify it (LC, best-effort, idle),
   record its settled sample in its SF model (Algorithm 2) and ask the
   predictor (Algorithm 3) how many cores it wants;
3. turn all demands into disjoint core sets (:mod:`allocator`);
4. return a :class:`~ufo_agent.controller.plan.HostPlan` for the agent.

A VM whose cores changed waits ``settle_time`` before its samples are used
again; the other VMs go on meanwhile (the paper's loop sleeps for all).
"""

import dataclasses
import math
import operator
import typing

from ufo_agent.controller import allocator
from ufo_agent.controller import backlog
from ufo_agent.controller import classifier
from ufo_agent.controller import config as controller_config
from ufo_agent.controller import confirm
from ufo_agent.controller import emulator as emulator_pool
from ufo_agent.controller import hostonly
from ufo_agent.controller import idle_pool
from ufo_agent.controller import latency
from ufo_agent.controller import memory
from ufo_agent.controller import plan as plans
from ufo_agent.controller import predictor as core_predictor
from ufo_agent.controller import reason
from ufo_agent.controller import sfmodel
from ufo_agent import frozen

Action = plans.Action
ControllerConfig = controller_config.ControllerConfig
Decision = plans.Decision
HostPlan = plans.HostPlan
VmClass = plans.VmClass
VmMode = plans.VmMode
VmPlan = plans.VmPlan

_EPS = 1e-6
# Predictor and lifecycle actions that move cores, and those worth a log
# line even when the core count stays.
_MOVES = frozenset([Action.START, Action.GROW, Action.SHRINK, Action.PROBE,
                    Action.REVERT, Action.WAKE, Action.LATENCY_CRITICAL])
_NOTED = frozenset([Action.ACCEPT, Action.REVERT, Action.WAKE,
                    Action.LATENCY_CRITICAL])

# The controller's own rules: a VM's lifecycle, the guards that hold a
# move back, confirmation, drain cores and the allocator's outcome.
START = reason.rule('start', 'new VM starts at its flavor size')
RESET = reason.rule('reset', 'its update failed (%(error)s); it starts '
                    'afresh at its flavor size')
BE_CLASS = reason.rule('be-class',
                       'SF per util%% %(sf_per_util).1f < %(limit).1f')
LC_CLASS = reason.rule('lc-class', 'SF per util% back above threshold')
IDLE = reason.rule('idle', 'util below %(util).1f%% for %(seconds).0f s')
PAUSED = reason.rule('paused', 'paused')
WAKE = reason.rule('wake', 'util %(util).1f%% after idle')
TRAFFIC = reason.rule('traffic', 'util %(util).0f%% answers %(share).0f%% '
                      'of its traffic')
CONFIRM = reason.rule('confirm', '%(action)s to %(cores)d cores on '
                      '%(agreed)d of %(needed)d samples: %(reason)s')
CONFIRM_EMULATOR_GROW = reason.rule(
    'confirm-emulator-grow', '%(action)s to %(cores)d cores on %(agreed)d '
    'of %(needed)d samples (the emulator pool grows): %(reason)s')
SHRINK_UNDONE = reason.rule('shrink-undone', 'shrink to %(cores)d cores '
                            'waits: the last one at this load was grown '
                            'back')
DRAINING = reason.rule('draining', '%(action)s to %(cores)d cores waits: '
                       'the VM is draining a backlog')
DENIED_AGAIN = reason.rule('denied-again', 'probe to %(cores)d cores waits '
                           'for an idle core: %(reason)s')
DRAIN_CORES = reason.rule('drain-cores', '%(extra)d more for one tick to '
                          'work off the backlog (%(need).0f%% to run)')
DRAINED = reason.rule('drained', 'the backlog had one tick on its drain '
                      'cores')
IDLE_POOL_SUPPLIED = reason.rule('idle-pool-supplied', 'idle pool supplied '
                                 '%(got)d of %(wanted)d')
OVERLOADED = reason.rule('overloaded', 'host overloaded: wanted '
                         '%(committed)d committed cores')
HELD_BY_HUNG = reason.rule('held-by-hung', 'placed on %(cores)d of its '
                           '%(counted)d cores: the others are held where '
                           'hung guests\' threads cannot move')
NO_IDLE_CORE = reason.rule('no-idle-core', 'no idle core for a probe to '
                           '%(cores)d cores')
PROBE_DENIED = reason.rule('probe-denied', 'probe denied')


class ControllerError(ValueError):
    """The controller cannot work with what it was given."""


DeniedProbe = memory.DeniedProbe
Shrink = memory.Shrink
Step = memory.Step


@frozen.value
class Traffic:
    """A sample read with its traffic (:meth:`Controller._traffic`).

    ``need``: demand plus the work left unanswered, for drain cores
    (None unless the demand was read from traffic).
    """

    draining: bool
    demand: float
    why: object = None
    need: float = None


class PlanInputs(typing.NamedTuple):
    """What a VM's :class:`VmPlan` is made of: equal inputs, same plan.

    A tuple: made and compared for every VM on each tick.
    """

    mode: VmMode
    cores: frozenset
    cpus: frozenset
    online: int
    wanted: int
    probing: bool
    note: object
    r2: float
    fitted: int
    sched_idle: bool


class VmState:
    """Everything the controller remembers about one VM."""

    def __init__(self, spec, config, pcpus_per_core):
        self.spec = spec
        self.max_cores = max(1, math.ceil(spec.vcpus / pcpus_per_core))
        self.predictor = core_predictor.Predictor(config, self.max_cores,
                                                  pcpus_per_core)
        self.host_only = hostonly.HostOnlyPredictor(
            config, self.max_cores, pcpus_per_core, spec.vcpus)
        self.failed_shrink = None   # host-only: the last probe that stole
        self.isolated_steal = 0.0   # host-only: steal with a CPU per vCPU
        self.judged_host_only = False   # which rule its samples last met
        self.idle = classifier.IdleDetector(config)
        self.confirm = confirm.Confirmation(config)
        self.vm_class = classifier.ClassInference(config, spec.vm_class)
        self.mode = (VmMode.BEST_EFFORT if spec.vm_class == VmClass.BE
                     else VmMode.ACTIVE)
        self.cores = frozenset()
        self.changed_at = -math.inf
        # A new VM starts at its flavor size if idle cores allow (paper
        # section 6.2), with one core guaranteed.
        self.committed = 1
        self.want = self.max_cores
        self.last_action = Step(Action.START, reason.of(START))
        self.cores_before_idle = 0
        self.busy_cores = 0     # cores at its last sample not quiet
        self.last_sample = None
        self.denied = None      # the last probe the host had no core for
        self.backlog = backlog.BacklogDetector(config)
        self.last_shrink = None     # Shrink: the last one
        self.shrink_undone = None   # Shrink: one grown back at its load
        self.regrown = None     # Shrink: the last one grown back soon
        self.plan_inputs = None     # PlanInputs of the last tick's plan
        self.plan = None            # and the VmPlan made of them
        self.drain_back = None  # cores to go back to after a drain tick
        self.reset_by = None    # the error its last update raised, if any
        # QoS-target mode: its latency loop (None: no target), and
        # whether its last sample was judged by it.
        self.latency = None
        if spec.latency_target_us is not None:
            self.latency = latency.LatencyLoop(config, self.max_cores,
                                               pcpus_per_core, spec)
        self.judged_latency = False
        self.latency_since = None   # when its samples were last judged so
        self.forget_sf(config, pcpus_per_core)

    def forget_sf(self, config, pcpus_per_core):
        """Start learning SF anew: no model, probe record, trial or count."""
        self.model = sfmodel.SchedFreqModel(config, self.max_cores,
                                            pcpus_per_core)
        self.flat_sf = False
        self.probe_cache = {}
        self.trial = None
        self.confirm.reset()
        # Whether the SF learned so far counts switches into idle (None:
        # nothing learned yet).
        self.sf_counts_idle = None

    def settled(self, now, settle_time):
        return now - self.changed_at >= settle_time - _EPS

    def hold(self):
        """Keep the current allocation (and any unmet committed demand).

        Cores held beyond the committed count (a new VM's flavor-size
        start) stay speculative: holding them does not commit them.
        """
        if not self.cores:
            return      # not placed yet: keep asking for what it asked
        self.want = max(len(self.cores), self.committed)


class Controller:
    """Per-host UFO controller over a fixed :class:`HostTopology`."""

    def __init__(self, topology, config=None):
        self.config = config or ControllerConfig()
        self.topology = topology
        if len(topology) < self.config.emulator_min_cores + 1:
            raise ControllerError(
                '%d managed cores: need at least emulator_min_cores (%d) '
                'plus one for guests' % (len(topology),
                                         self.config.emulator_min_cores))
        self.ppc = topology.threads_per_core
        self.vms = {}
        # The first cores, little ones first on a host of two classes.
        self.emulator_cores = frozenset(sorted(
            topology.core_ids, key=lambda c: (not topology.is_little(c), c)
        )[:self.config.emulator_min_cores])
        self.idle_cores = topology.core_ids - self.emulator_cores
        self.emulator_util = 0.0
        self.emulator_pool = emulator_pool.EmulatorPool(self.config)
        self.idle_pool = idle_pool.IdlePool(self.config, self.ppc)
        self.last_plan = None
        self._pending = []        # decisions made between two ticks
        # uuid -> emulator cores charged to it (emulator_charge_excess),
        # set by each tick's allocation; the next tick's grow check reads
        # the last one.
        self._charged = {}
        # uuid -> the exception that reset the VM on the last tick.
        self.vm_errors = {}

    # -- inventory -------------------------------------------------------
    def add_vm(self, spec, learned=None, now=0.0):
        """Manage a VM; ``learned`` is :meth:`export_learned` output.

        Learned state that does not fit (another flavor, a corrupt file) is
        dropped: the VM is learned again, as a new one would be.
        """
        if spec.uuid in self.vms:
            raise ControllerError('VM %s is already managed' % spec.uuid)
        state = VmState(spec, self.config, self.ppc)
        if learned is not None:
            try:
                if learned.get('vcpus') != spec.vcpus or \
                        learned.get('threads_per_core') != self.ppc:
                    raise ValueError('flavor or host changed')
                state.model.restore(learned['model'], now)
                state.flat_sf = bool(learned.get('flat_sf', False))
                # Learned before guests reported switch-ins: every switch.
                state.sf_counts_idle = bool(
                    learned.get('sf_counts_idle', True))
            except (ValueError, KeyError, TypeError, AttributeError):
                state.forget_sf(self.config, self.ppc)
        self.vms[spec.uuid] = state
        return state

    def export_learned(self, uuid, now):
        """What a VM has learned, as JSON-ready data for the state store."""
        state = self.vms[uuid]
        return {'vcpus': state.spec.vcpus, 'threads_per_core': self.ppc,
                'flat_sf': state.flat_sf,
                'sf_counts_idle': state.sf_counts_idle,
                'model': state.model.export(now)}

    # Options that size the pools or shape what was learned: fixed for the
    # life of a controller.
    FIXED = ('tick_interval', 'emulator_min_cores', 'idle_pool_min_cores',
             'samples_per_model', 'min_samples_to_fit', 'util_resolution')

    def reconfigure(self, config):
        """Use new thresholds from now on, keeping what every VM learned.

        Raises ControllerError, changing nothing, if an option of
        :attr:`FIXED` differs.
        """
        fixed = [name for name in self.FIXED
                 if getattr(config, name) != getattr(self.config, name)]
        if fixed:
            raise ControllerError('cannot change %s while running'
                                  % ', '.join(fixed))
        old, self.config = self.config, config
        self.emulator_pool.config = config
        self.idle_pool.config = config
        rethreshold = any(getattr(old, name) != getattr(config, name)
                          for name in ('sf_threshold', 'flat_sf_threshold',
                                       'detect_flat_sf'))
        for state in self.vms.values():
            for part in (state.model, state.predictor, state.idle,
                         state.vm_class, state.confirm, state.backlog,
                         state.latency):
                if part is not None:
                    part.config = config
            if rethreshold:
                flat = state.flat_sf and config.detect_flat_sf
                state.model.set_threshold(config.flat_sf_threshold if flat
                                          else config.sf_threshold)

    def remove_vm(self, uuid):
        state = self.vms.pop(uuid, None)
        if state is not None:
            self.idle_cores |= state.cores

    def park(self, uuid, now, why=None):
        """Park an active VM at once (it was paused): no cores, idle pool.

        ``why`` is a :class:`~.reason.Reason`, by default ``paused``.

        The next plan moves it to the shared CPUs and frees its cores; it
        wakes like any parked VM, with the cores it had, once its samples
        show it busy again. Best-effort and parked VMs stay as they are.
        """
        state = self.vms.get(uuid)
        if state is None or state.mode != VmMode.ACTIVE:
            return
        state.mode = VmMode.IDLE
        state.cores_before_idle = max(1, len(state.cores))
        state.trial = None
        self._pending.append(Decision(now, uuid, Action.PARK,
                                      len(state.cores), 0,
                                      why or reason.of(PAUSED)))

    # -- one tick --------------------------------------------------------
    def tick(self, now, samples, emulator_busy_pct, held_cores=None):
        """Run one control step.

        ``samples`` maps VM uuid to a :class:`VmSample` for this tick (a VM
        without one keeps its allocation); ``emulator_busy_pct`` is the CPU
        time of all emulator threads over the tick, in percent of one CPU.
        ``held_cores`` maps ``'emulator'`` or a VM's uuid to cores whose
        threads cannot move this tick (a guest's calls hang): they stay
        that pool's (a VM's, the idle pool's while the VM has no cores).
        """
        cfg = self.config
        decisions = []
        self.vm_errors = {}
        samples = self._usable_samples(samples)
        emu_now = len(self.emulator_cores)
        guest_pct = sum(s.util for u, s in samples.items()
                        if u in self.vms and
                        self.vms[u].mode == VmMode.ACTIVE)
        saturated = emulator_pool.saturated(
            {u: s for u, s in samples.items()
             if u in self.vms and self.vms[u].mode == VmMode.ACTIVE},
            cfg) if cfg.emulator_saturation > 0 else []
        # Idle cores and VM modes change only in the VM loop below.
        decision = self.emulator_pool.decide(self._pool_view(
            now, samples, emulator_busy_pct, guest_pct, saturated))
        self.emulator_util = decision.util
        emu_want, yielded_to = decision.size, decision.yielded_to
        if decision.probe is not None:
            # The probe was confirmed before it was denied: it goes ahead
            # on this tick, on the core the pool yields.
            state = self.vms[decision.probe]
            state.denied = None
            state.confirm.grant((True, len(state.cores)), now)
        # A latency trial's revert takes back the core the trial left
        # because a guest is over its target: that guest moves too.
        emulator_grows = emu_want > emu_now and \
            decision.rule != emulator_pool.LATENCY_POOL_REVERT
        if emu_want != emu_now:
            decisions.append(Decision(
                now, 'emulator',
                Action.EMULATOR_GROW if emu_want > emu_now
                else Action.EMULATOR_SHRINK,
                emu_now, emu_want, decision.reason(saturated)))
        # Parked between two ticks (after the emulator's, which comes first).
        decisions += self._pending
        self._pending = []

        for uuid in sorted(self.vms):
            own = []
            try:
                self._update_vm(self.vms[uuid], samples.get(uuid), now,
                                emulator_grows, own)
            except Exception as exc:
                # One VM's numbers, or a bug they reach, cost that VM
                # what it learned, not the other VMs their tick.
                self._reset_vm(uuid, now, exc, decisions)
            else:
                decisions += own

        self._size_idle_pool(now, samples, decisions)
        offloaded = {u: s.emulator for u, s in samples.items()
                     if u in self.vms}
        entitled = {u: self.vms[u].spec.vcpus for u in offloaded}
        fair = allocator.fair_emulator_cores(emu_want, offloaded, entitled)
        self._charged = {}
        if cfg.emulator_charge_excess:
            self._charged = allocator.charge_excess(emu_want - fair,
                                                    offloaded, entitled)
            if self._charged:
                fair = emu_want
        plan = self._allocate(now, emu_want, decisions, fair, yielded_to,
                              held_cores)
        self.last_plan = plan
        return plan

    def _update_vm(self, state, sample, now, emulator_grows, decisions):
        """One VM's step of the tick: its class, mode and wish."""
        if sample is None:
            state.hold()
            return
        state.last_sample = sample
        self._note_sf_scale(state, sample)
        self._observe(state, sample, now, decisions)
        if state.mode != VmMode.ACTIVE:
            state.drain_back = None
            return
        if state.drain_back is not None:
            if not self._keep_drain_cores(state, sample, now):
                self._end_drain(state)
            return
        if state.latency is not None:
            if sample.latency_us is not None and not sample.host_only:
                self._latency_step(state, sample, now, emulator_grows)
                return
            self._leave_latency(state)
        self._black_box_step(state, sample, now, emulator_grows)
        if state.latency is not None:
            why = state.last_action.reason
            if why.find(latency.STALE) is None:
                state.last_action = Step(state.last_action.action,
                                         why.before_all(
                                             reason.of(latency.STALE)))

    def _black_box_step(self, state, sample, now, emulator_grows):
        """The paper's rules for one active VM's settled sample."""
        if not state.settled(now, self.config.settle_time):
            state.hold()
            return
        if emulator_grows:
            # Nothing moves on a pool grow (paper Algorithm 1), but the
            # sample still counts toward confirming the VM's next move.
            self._count_sample(state, sample, now)
            state.hold()
            return
        self._predict(state, sample, now)

    def _latency_step(self, state, sample, now, emulator_grows):
        """QoS-target mode (:mod:`.latency`): a step on the VM's latency.

        A trial that violates goes back at once; otherwise the settled
        sample decides, through the guards and the confirmation of the
        black-box rules, with the VM's committed cores bounded by what
        its utilization keeps busy (:meth:`_latency_bounded`).
        """
        count = len(state.cores)
        if count == 0:
            return      # not placed yet: keep asking for what it asked
        if not state.judged_latency:
            # A trial of the black-box rules means nothing here.
            state.judged_latency = True
            state.latency_since = now
            state.trial = None
            state.confirm.reset()
        loop = state.latency
        settled = state.settled(now, self.config.settle_time)
        pred = loop.revert(count, sample.latency_us, state.trial,
                           sample.util)
        if pred is not None:
            # Unsettled, the first second on fewer cores spikes with every
            # move (hotplug, cold caches): a revert then needs the
            # samples a move needs.
            if settled or state.confirm.agree((True, count), now):
                self._adopt(state, pred, count, sample.util, now, False,
                            Traffic(False, sample.util))
                # Undone whatever the trial's utilization: a saturated
                # trial reads busier than the load it was tried at.
                last = state.last_shrink
                state.shrink_undone = Shrink(
                    pred.cores, last.util if last is not None and
                    last.cores == pred.cores else sample.util, now)
                return
            state.hold()
            return
        if not settled:
            state.confirm.reset()
            state.hold()
            return
        traffic = self._traffic(state, sample, count, now)
        pred = loop.decide(count, sample.latency_us, sample.util,
                           traffic.demand, min(state.committed, count), now,
                           state.trial)
        if emulator_grows:
            # A step's I/O grows the pool on its first second: that
            # sample still counts toward the grow, as in black-box mode.
            self._count_latency_sample(state, pred, count, sample.util,
                                       now, traffic)
            return
        if pred.action == Action.PROBE and \
                self.emulator_pool.latency_trial_open():
            # One trial at a time: the pool's is judged on this latency.
            self._wait(state, reason.of(latency.POOL_TRIAL,
                                        cores=pred.cores))
            return
        self._adopt(state, self._latency_bounded(state, pred, traffic.demand),
                    count, sample.util, now, True, traffic)
        if pred.action == Action.GROW and \
                state.last_action.action == Action.GROW:
            # The cores it had violated at this load: no trial back to
            # them until the load falls (_shrink_undone).
            state.shrink_undone = Shrink(pred.cores, sample.util, now)

    def _count_latency_sample(self, state, pred, count, util, now,
                              traffic):
        """On an emulator-grow tick: count a latency grow, move nothing.

        Only a grow counts (a trial waits for a quiet tick); the grow
        still needs a sample from after this tick.
        """
        state.hold()
        if pred.action != Action.GROW or state.trial is not None or \
                self._guarded(state, pred, count, util, now, True,
                              traffic.draining):
            state.confirm.reset()
            return
        pending = state.confirm.agree_not_last((True, count), now)
        state.last_action = Step(Action.STAY, reason.of(
            CONFIRM_EMULATOR_GROW, action=pred.action, cores=pred.cores,
            agreed=pending, needed=self.config.confirm_samples,
            reason=pred.reason))

    @staticmethod
    def _violating(state):
        """True if the VM's last sample, judged by latency, missed."""
        sample = state.last_sample
        return state.judged_latency and sample is not None and \
            sample.latency_us is not None and \
            sample.latency_us > state.spec.latency_target_us

    def _latency_bounded(self, state, pred, demand):
        """``pred`` committing no more than the VM's work justifies.

        A latency report is the guest's word: cores it asks for beyond
        what it held committed and what its ``demand`` keeps busy at
        ``pcu_high`` are speculative, served from idle cores only, so
        that no report takes cores from another VM's committed demand.
        The demand is the host's reading (:meth:`_traffic`): its
        utilization, or what its traffic says a saturated VM would run,
        which the black-box rules commit on too.
        """
        cap = max(state.committed,
                  state.latency.cores_for(demand, self.config.pcu_high))
        if pred.committed <= cap:
            return pred
        return dataclasses.replace(pred, committed=cap)

    def _leave_latency(self, state):
        """Back to the black-box rules: no fresh latency from the guest.

        The shrinks the loop recorded were judged on the guest's word: a
        grow on a reported violation is no shrink grown back at this load
        (``shrink-undone``), and the black-box rules do not inherit it.
        """
        if state.judged_latency:
            state.judged_latency = False
            if isinstance(state.trial, latency.LatencyTrial):
                state.trial = None
            state.confirm.reset()
            since = state.latency_since
            if state.shrink_undone is not None and \
                    state.shrink_undone.time >= since:
                state.shrink_undone = None
            if state.last_shrink is not None and \
                    state.last_shrink.time >= since:
                state.last_shrink = None
            if state.regrown is not None and state.regrown.time >= since:
                state.regrown = None

    def _reset_vm(self, uuid, now, exc, decisions):
        """Start a VM whose update raised afresh, at its flavor size.

        What it learned may be what raised, and the update may have
        stopped half way: the VM gets a new state, as a new VM, asking
        for its flavor from idle cores. It keeps the cores it holds and
        the cores it had committed, so that no other VM loses a core to
        it; the allocator places it with the others, as every tick.
        """
        old = self.vms[uuid]
        state = VmState(old.spec, self.config, self.ppc)
        state.cores = old.cores
        state.changed_at = old.changed_at
        if old.mode == VmMode.ACTIVE and state.mode == VmMode.ACTIVE:
            state.committed = max(1, min(old.committed, state.max_cores))
        text = '%s: %s' % (type(exc).__name__, exc)
        why = reason.of(RESET, error=text)
        state.last_action = Step(Action.RESET, why)
        state.reset_by = text
        self.vms[uuid] = state
        self.vm_errors[uuid] = exc
        if old.reset_by != text:
            decisions.append(Decision(now, uuid, Action.RESET,
                                      len(old.cores), len(old.cores), why))

    def _usable_samples(self, samples):
        """The samples of managed VMs whose numbers can be computed with.

        A sample with a number that is not finite, or negative, is left
        out (its VM keeps its allocation, as without a sample) and noted
        in :attr:`vm_errors`: it never reaches the host-wide sums.
        """
        usable = {}
        for uuid, sample in samples.items():
            if uuid not in self.vms:
                continue
            if _plain_numbers(sample):
                usable[uuid] = sample
                continue
            bad = [name for name in _SAMPLE_NUMBERS
                   if not _plain_number(getattr(sample, name))]
            if bad:
                self.vm_errors[uuid] = ValueError(
                    'unusable sample: %s' % ', '.join(
                        '%s=%r' % (name, getattr(sample, name))
                        for name in bad))
                continue
            usable[uuid] = sample
        return usable

    def _note_sf_scale(self, state, sample):
        """Forget what was learned when the guest's SF changes its count.

        A guest module that counts switches into idle reports up to twice
        the SF of one that does not (an upgrade of the module): SF from
        the two, compared across core counts, would read as a fall or a
        rise that no load caused.
        """
        if sample.host_only:
            return
        if state.sf_counts_idle is not None and \
                state.sf_counts_idle != sample.sf_counts_idle:
            state.forget_sf(self.config, self.ppc)
        state.sf_counts_idle = sample.sf_counts_idle

    def _observe(self, state, sample, now, decisions):
        """Class, idle and wake transitions from one raw sample."""
        uuid = state.spec.uuid
        vm_class = state.vm_class.update(sample.util, sample.sf)
        if vm_class == VmClass.BE and state.mode == VmMode.ACTIVE:
            state.mode = VmMode.BEST_EFFORT
            state.trial = None
            decisions.append(Decision(
                now, uuid, Action.BEST_EFFORT, len(state.cores), 0,
                reason.of(BE_CLASS,
                          sf_per_util=sample.sf / max(sample.util, _EPS),
                          limit=self.config.be_sf_per_util)))
            return
        if vm_class == VmClass.LC and state.mode == VmMode.BEST_EFFORT:
            state.mode = VmMode.ACTIVE
            state.committed, state.want = 1, state.max_cores
            state.last_action = Step(Action.LATENCY_CRITICAL,
                                     reason.of(LC_CLASS))
            return
        idle = state.idle.update(sample.util, now)
        if state.mode == VmMode.ACTIVE and not state.idle.quiet():
            state.busy_cores = len(state.cores)
        if state.mode == VmMode.ACTIVE and idle:
            state.mode = VmMode.IDLE
            state.cores_before_idle = max(1, len(state.cores))
            state.trial = None
            decisions.append(Decision(
                now, uuid, Action.PARK, len(state.cores), 0,
                reason.of(IDLE, util=self.config.idle_util,
                          seconds=state.idle.wait())))
            state.idle.parked(now)
            # Its vCPUs go offline now: that work is not a wake-up.
            state.changed_at = now
        elif state.mode == VmMode.IDLE and state.idle.woke() \
                and state.settled(now, self.config.settle_time):
            state.mode = VmMode.ACTIVE
            # Quiet, it shrank on its way to the park; a burst that returns
            # wants what the last one had: from idle cores only, as a new
            # VM's flavor-size start.
            state.committed = state.cores_before_idle
            state.want = max(state.committed, state.busy_cores)
            state.last_action = Step(Action.WAKE,
                                     reason.of(WAKE, util=sample.util))
            state.idle.woken(now)

    def _predict(self, state, sample, now):
        cfg = self.config
        count = len(state.cores)
        if count == 0:
            return      # not placed yet: keep asking for what it asked
        traffic = self._traffic(state, sample, count, now)
        if sample.host_only != state.judged_host_only:
            # A trial of one rule means nothing to the other.
            state.judged_host_only = sample.host_only
            state.trial = None
            state.confirm.reset()
        if sample.host_only:
            # Host-only samples are no SF: they stay out of the SF model.
            if count * self.ppc >= state.spec.vcpus:
                state.isolated_steal = sample.steal
            pred, state.failed_shrink = state.host_only.predict(
                count, sample.util, sample.steal, now, state.trial,
                state.failed_shrink, state.isolated_steal)
            self._adopt(state, pred, count, sample.util, now,
                        state.trial is None, traffic)
            return
        state.model.update(count, sample.util, sample.sf, now)
        horizon = now - cfg.sample_max_age
        for key in [k for k, v in state.probe_cache.items()
                    if v.time < horizon]:
            del state.probe_cache[key]
        if state.trial is not None:
            state.trial.sf[count] = sample.sf
            key = (count, state.model.bucket(state.trial.origin_util))
            state.probe_cache[key] = sfmodel.Recorded(
                state.trial.origin_util, sample.sf, now)
        if cfg.detect_flat_sf and not state.flat_sf and \
                classifier.is_flat_sf(state.model, self.ppc, cfg):
            state.flat_sf = True
            state.model.set_threshold(cfg.flat_sf_threshold)

        def probe_sf(cores, util):
            hit = sfmodel.nearest(
                {k: v for k, v in state.probe_cache.items()
                 if k[0] == cores}, util, state.model.tolerance(util))
            if hit is None or now - hit.time > cfg.sample_max_age:
                return None
            return hit.sf

        fresh = state.trial is None
        pred = _because(traffic.why, state.predictor.predict(
            state.model, count, traffic.demand, now, state.trial, probe_sf))
        self._adopt(state, pred, count, sample.util, now, fresh, traffic)

    def _traffic(self, state, sample, count, now):
        """The sample read with its traffic, as :class:`Traffic`.

        Draining: it works off a backlog (:mod:`.backlog`). Demand: its
        utilization, or for a busy VM that answers only a share of its
        traffic, the utilization that would answer all of it (capped at
        its vCPUs), with ``why`` saying so; the SF model still records
        what was measured. Host-only samples keep their utilization:
        their rule reads demand from run delay.
        """
        busy = state.predictor.pcu(sample.util, count) > self.config.pcu_high
        draining = state.backlog.update(sample, busy, now)
        share = None
        if busy and self.config.grow_to_traffic_demand and \
                not sample.host_only:
            share = state.backlog.served(sample)
        unanswered = state.backlog.left_unanswered(sample, share, now)
        if share is None:
            return Traffic(draining, sample.util)
        demand = min(100.0 * state.spec.vcpus,
                     sample.util / max(share, _EPS))
        why = reason.of(TRAFFIC, util=sample.util, share=100.0 * share)
        return Traffic(draining, demand, why, demand + unanswered)

    def _count_sample(self, state, sample, now):
        """On an emulator-grow tick: count the sample toward a move.

        The VM does not move, the model does not record the sample and no
        trial step is taken; a move it starts or extends still needs a
        sample from after this tick.
        """
        count = len(state.cores)
        if count == 0 or state.trial is not None or \
                sample.host_only != state.judged_host_only:
            return
        traffic = self._traffic(state, sample, count, now)
        if sample.host_only:
            pred, _ = state.host_only.predict(
                count, sample.util, sample.steal, now, None,
                state.failed_shrink, state.isolated_steal)
        else:
            pred = _because(traffic.why, state.predictor.predict(
                state.model, count, traffic.demand, now))
        if pred.cores == count or \
                self._guarded(state, pred, count, sample.util, now, True,
                              traffic.draining):
            state.confirm.reset()
            return
        pending = state.confirm.agree_not_last((pred.cores > count, count),
                                               now)
        state.last_action = Step(Action.STAY, reason.of(
            CONFIRM_EMULATOR_GROW, action=pred.action, cores=pred.cores,
            agreed=pending, needed=self.config.confirm_samples,
            reason=pred.reason))

    def _guarded(self, state, pred, count, util, now, fresh, draining):
        """If a guard holds ``pred`` back: the VM waits, and True."""
        if fresh and pred.cores < count and \
                self._shrink_undone(state, count, util, now):
            # Asked for again at this load: it would be undone again.
            undone = state.shrink_undone
            state.shrink_undone = Shrink(undone.cores, undone.util, now)
            self._wait(state, reason.of(SHRINK_UNDONE, cores=pred.cores))
            return True
        if draining and fresh and pred.cores > count:
            self._wait(state, reason.of(DRAINING, action=pred.action,
                                        cores=pred.cores))
            return True
        if self._denied_again(state, pred, count, util, now):
            self._wait(state, reason.of(DENIED_AGAIN, cores=pred.cores,
                                        reason=pred.reason))
            return True
        return False

    def _adopt(self, state, pred, count, util, now, fresh, traffic):
        """Make ``pred`` the VM's wish, once confirmed or inside a trial."""
        cfg = self.config
        if self._guarded(state, pred, count, util, now, fresh,
                         traffic.draining):
            return
        if not fresh or pred.cores == count:
            state.confirm.reset()
        elif not state.confirm.agree((pred.cores > count, count), now):
            # A new move waits for the next sample to call for it too.
            state.hold()
            state.last_action = Step(Action.STAY, reason.of(
                CONFIRM, action=pred.action, cores=pred.cores,
                agreed=state.confirm.pending, needed=cfg.confirm_samples,
                reason=pred.reason))
            return
        state.last_action = Step(pred.action, pred.reason)
        state.trial = pred.trial
        state.want = pred.cores
        state.committed = pred.committed
        if fresh and pred.cores > count:
            self._add_drain_cores(state, pred, traffic.need)
        if fresh and pred.cores < count:
            state.last_shrink = Shrink(count, util, now)
        elif pred.cores > count and state.last_shrink is not None:
            last = state.last_shrink
            window = 2 * (cfg.settle_time +
                          cfg.confirm_samples * cfg.tick_interval)
            if last.cores == pred.cores and now - last.time <= window:
                # Grown back by a load the shrink never saw (a burst):
                # that says nothing about the shrink (_shrink_undone).
                # But a saturated count reads no utilization to compare:
                # undone again right after the last undo, it is a seesaw.
                same_load = util - last.util <= \
                    state.model.tolerance(last.util)
                again = state.regrown is not None and \
                    state.regrown.cores == last.cores and \
                    last.time - state.regrown.time <= window
                if same_load or again:
                    state.shrink_undone = Shrink(last.cores, last.util, now)
                state.regrown = Shrink(last.cores, util, now)

    def _add_drain_cores(self, state, pred, need):
        """Idle cores for one tick, to work off what the step left queued.

        A grow sized by unanswered traffic serves the demand from the
        next tick on, but the work left unanswered while the VM waited
        for confirmation still queues ahead of it, and on the demand's
        cores it drains over seconds. The cores that run demand plus that
        work within one tick are added to the grow, from idle cores only
        (they are not committed), and go back on the next tick.
        """
        if need is None:
            return
        drain = min(state.max_cores,
                    math.ceil(need / (100.0 * self.ppc) - _EPS))
        if drain > pred.cores:
            state.want = drain
            state.drain_back = pred.cores
            state.last_action = Step(pred.action, pred.reason.after_all(
                reason.of(DRAIN_CORES, extra=drain - pred.cores,
                          need=need)))

    def _keep_drain_cores(self, state, sample, now):
        """QoS-target mode: drain cores a tick more while still late.

        The drain tick's latency over the target says the backlog is not
        worked off yet. They stay up to ``settle_time`` after the grow,
        speculative as before. True if kept.
        """
        if not state.judged_latency or sample.latency_us is None or \
                sample.host_only or \
                sample.latency_us <= state.spec.latency_target_us or \
                len(state.cores) <= state.drain_back or \
                state.settled(now, self.config.settle_time):
            return False
        state.hold()
        state.last_action = Step(Action.STAY, state.latency.drain_kept(
            sample.latency_us, len(state.cores)))
        return True

    def _end_drain(self, state):
        """Give a grow's drain cores back: a core change like any other."""
        back, state.drain_back = state.drain_back, None
        state.want = max(back, state.committed)
        state.last_action = Step(Action.DRAINED, reason.of(DRAINED))

    def _shrink_undone(self, state, count, util, now):
        """True if a shrink from ``count`` was grown back at this load.

        The SF of a step down is looked up at the larger count's
        utilization, which understates the load on one core fewer by up
        to sf_match_tolerance: at the SF mark the VM shrinks, reads busier
        and grows back, every few seconds. That shrink is not repeated
        until its utilization falls by sf_match_tolerance, or for
        sample_max_age after it was last held (``_guarded``). A grow
        back at a utilization beyond the model's match tolerance of the
        shrink's is a new load, and holds nothing,
        unless the shrink followed the last grow back within the window
        (``_adopt``): saturated, the smaller count reads only its capacity.
        """
        undone = state.shrink_undone
        if undone is None:
            return False
        cfg = self.config
        if now - undone.time > cfg.sample_max_age or \
                util < undone.util * (1.0 - cfg.sf_match_tolerance):
            state.shrink_undone = None
            return False
        return undone.cores == count

    @staticmethod
    def _wait(state, why):
        """Keep the VM's cores; a move starts again from its first sample."""
        state.confirm.reset()
        state.hold()
        state.last_action = Step(Action.STAY, why)

    def _denied_again(self, state, pred, count, util, now):
        """True if ``pred`` asks again for a probe the host just denied.

        A probe up takes only idle cores; one denied is asked for again
        once the idle pool has grown, utilization has moved past the
        SF tolerance, or ``sample_max_age`` has passed, not every tick
        the walk reaches it. Any other prediction forgets the denial.
        """
        denied = state.denied
        if denied is None:
            return False
        if pred.action != Action.PROBE or pred.cores <= count or \
                (denied.cores, denied.target) != (count, pred.cores) or \
                abs(util - denied.util) > state.model.tolerance(util) or \
                now - denied.time > self.config.sample_max_age or \
                len(self.idle_cores) > denied.idle:
            state.denied = None
            return False
        return True

    def _size_idle_pool(self, now, samples, decisions):
        """The idle pool's cores above its floor, by the parked VMs' steal.

        Both sides of the steal are the host's measures of the vCPU
        threads, never the guest's utilization: a guest that reports
        less than it runs cannot grow the pool.
        """
        busy = wait = 0.0
        parked = 0
        for uuid, state in self.vms.items():
            if state.mode != VmMode.IDLE:
                continue
            parked += 1
            sample = samples.get(uuid)
            if sample is not None and sample.vcpu_run is not None:
                busy += sample.vcpu_run
                wait += sample.vcpu_wait
        floor = self.config.idle_pool_min_cores
        change = self.idle_pool.decide(
            now, idle_pool.ParkedLoad(busy, wait, parked), floor,
            len(self.idle_cores))
        if change is not None:
            old, why = change
            new = self.idle_pool.extra
            decisions.append(Decision(
                now, 'idle', Action.IDLE_GROW if new > old
                else Action.IDLE_SHRINK, floor + old, floor + new, why))

    def _idle_room(self):
        """Idle cores a guest could grow into, beyond the idle floor.

        A core the idle pool keeps for guests that share it does not
        count; negative when the floor itself is short of cores.
        """
        floor = self.config.idle_pool_min_cores + self.idle_pool.extra \
            if self._some_vm_shares() else 0
        return len(self.idle_cores) - floor

    def _some_vm_shares(self):
        """True if an idle or best-effort VM runs on the idle pool."""
        return any(s.mode != VmMode.ACTIVE for s in self.vms.values())

    def _vcpu_deficit(self, samples):
        """Active VMs at ``pcu_high`` or more, with room to grow.

        Their sample's utilization per CPU of the cores they hold is at
        Algorithm 3's grow mark, and they hold fewer than their flavor.
        """
        found = []
        for uuid, sample in sorted(samples.items()):
            state = self.vms.get(uuid)
            if state is None or state.mode != VmMode.ACTIVE or \
                    not state.cores or \
                    len(state.cores) >= state.max_cores:
                continue
            if state.predictor.pcu(sample.util, len(state.cores)) >= \
                    self.config.pcu_high:
                found.append(uuid)
        return found

    def _short_guests(self):
        """Active VMs placed on fewer cores than they committed."""
        return [s for s in self.vms.values()
                if s.mode == VmMode.ACTIVE and s.cores and
                len(s.cores) < min(s.committed, s.max_cores)]

    def _pool_view(self, now, samples, busy_pct, guest_pct, saturated):
        """The emulator pool's :class:`emulator_pool.PoolView` of a tick."""
        cfg = self.config
        short = []
        for state in sorted(self._short_guests(), key=lambda s: s.spec.uuid):
            count = len(state.cores)
            util = state.last_sample.util if state.last_sample else 0.0
            short.append(emulator_pool.ShortGuest(
                state.spec.uuid, count, min(state.committed, state.max_cores),
                state.predictor.pcu(util, count), self._violating(state)))
        probes, active = [], {}
        for uuid in sorted(self.vms):
            state = self.vms[uuid]
            if state.mode != VmMode.ACTIVE:
                continue
            count = len(state.cores)
            active[uuid] = emulator_pool.ActiveGuest(
                count, state.trial is not None)
            sample, denied = state.last_sample, state.denied
            if denied is None or sample is None or \
                    denied.cores != count or \
                    not state.settled(now, cfg.settle_time) or \
                    now - denied.time > cfg.sample_max_age or \
                    abs(sample.util - denied.util) > \
                    state.model.tolerance(sample.util):
                continue
            probes.append(emulator_pool.ProbeCandidate(
                uuid, count, denied.target, state.predictor.pcu(
                    sample.util, count)))
        return emulator_pool.PoolView(
            now=now, cores=len(self.emulator_cores),
            pcpus=self.topology.pcpus(self.emulator_cores),
            busy_pct=busy_pct, pcpus_per_core=self.ppc,
            max_cores=len(self.topology) - 1, guest_pct=guest_pct,
            saturated=tuple(saturated), short=tuple(short),
            room=self._idle_room(), deficit=tuple(self._vcpu_deficit(samples)),
            probes=tuple(probes), active=active,
            takes_guest_cores=self._grow_takes_guest_cores,
            latency=self._pool_latency(now, samples))

    def _pool_latency(self, now, samples):
        """The pool's :class:`emulator_pool.LatencyGuests`, or None.

        None unless every managed VM is active in the QoS-target mode with
        a fresh latency on this tick: the emulator threads of every VM
        share the pool, and a black-box guest's QoS is not seen.
        """
        cfg = self.config
        if not self.vms:
            return None
        slack, violating = True, False
        for uuid, state in self.vms.items():
            sample = samples.get(uuid)
            if state.latency is None or state.mode != VmMode.ACTIVE or \
                    not state.cores or sample is None or \
                    sample.latency_us is None or sample.host_only:
                return None
            if state.trial is not None or \
                    not state.settled(now, cfg.settle_time):
                # Its own move is judged on its latency: not the pool's.
                slack = False
                continue
            target = state.spec.latency_target_us
            violating = violating or sample.latency_us > target
            slack = slack and sample.latency_us < cfg.latency_slack * target
        return emulator_pool.LatencyGuests(slack, violating)

    def _grow_takes_guest_cores(self, emu_want):
        """Whether the pool at ``emu_want`` takes a VM's committed cores.

        Speculative cores (a new VM's start, a probe) cost nothing to
        give back.
        """
        active, counts = self._counts(emu_want)
        return counts.emulator > len(self.emulator_cores) and any(
            counts.vms.get(s.spec.uuid, 0) < min(len(s.cores), s.committed)
            for s in active)

    def _counts(self, emu_want, emu_fair=None, yielded_to=None):
        """(active VMs, allocator.Counts) for an emulator pool of emu_want.

        ``yielded_to``: the VMs the pool yields a core to on this tick.
        """
        active = [s for s in self.vms.values() if s.mode == VmMode.ACTIVE]
        requests = []
        for s in active:
            served = self._committed(s)
            requests.append(allocator.Request(
                s.spec.uuid, len(s.cores), served, min(s.want, s.max_cores),
                s.last_sample.util if s.last_sample else 0.0,
                quiet=s.idle.quiet(),
                charge=max(0, min(s.committed, s.max_cores) - served)))
        return active, allocator.allocate_counts(
            len(self.topology), self.config.emulator_min_cores, emu_want,
            requests, self._some_vm_shares(),
            idle_floor=self.config.idle_pool_min_cores,
            idle_extra=self.idle_pool.extra, emulator_fair=emu_fair,
            incumbent=self.config.sf_match_tolerance, yielded_to=yielded_to)

    def _committed(self, state):
        """Committed cores the allocator serves: less any I/O charge."""
        committed = min(state.committed, state.max_cores)
        charge = self._charged.get(state.spec.uuid)
        return max(1, committed - charge) if charge else committed

    def _allocate(self, now, emu_want, decisions, emu_fair=None,
                  yielded_to=None, held_cores=None):
        active, counts = self._counts(emu_want, emu_fair, yielded_to)
        emu_cores, vm_cores, idle = allocator.assign_cores(
            self.topology, self.emulator_cores, counts.emulator,
            {s.spec.uuid: s.cores for s in active}, counts.vms,
            held=self._held(held_cores),
            idle_needed=bool(self.config.idle_pool_min_cores and
                             self._some_vm_shares()),
            emulator_min=self.config.emulator_min_cores)
        if counts.emulator != emu_want and decisions and \
                decisions[0].vm == 'emulator':
            decisions[0] = Decision(
                now, 'emulator', decisions[0].action,
                len(self.emulator_cores), counts.emulator,
                decisions[0].reason.after_all(reason.of(
                    IDLE_POOL_SUPPLIED, got=counts.emulator,
                    wanted=emu_want)))
        self.emulator_cores = emu_cores
        self.idle_cores = idle
        idle_cpus = self.topology.cpus_of(idle)
        # With no idle core (possible only with idle_pool_min_cores = 0),
        # VMs without cores share every managed CPU.
        shared_cpus = idle_cpus or self.topology.cpus_of(
            self.topology.core_ids)
        shared_pcpus = len(shared_cpus)
        vm_plans = {}
        for uuid in sorted(self.vms):
            state = self.vms[uuid]
            old = len(state.cores)
            if state.mode == VmMode.ACTIVE:
                new_cores = vm_cores[uuid]
                # Fewer than counted only where held cores took them.
                self._record_change(state, old, len(new_cores), now,
                                    decisions, counts.vms[uuid])
                state.cores = new_cores
            else:
                state.cores = frozenset()
            vm_plans[uuid] = self._vm_plan(state, shared_cpus, shared_pcpus)
        return HostPlan(
            time=now, vms=vm_plans, emulator_cores=emu_cores,
            emulator_cpus=self.topology.cpus_of(emu_cores) or shared_cpus,
            idle_cores=idle, idle_cpus=idle_cpus, shared_cpus=shared_cpus,
            managed_cores=len(self.topology),
            emulator_util=self.emulator_util,
            overloaded=counts.shortfall > 0,
            shortfall_cores=counts.shortfall,
            decisions=tuple(decisions))

    def _held(self, held_cores):
        """``held_cores`` a VM may hold: its flavor at most; others idle.

        A VM keeps the held cores it has first. What it may not hold (or
        a VM without cores) stays idle: it is given to no other pool.
        """
        held = {}
        for key, cores in (held_cores or {}).items():
            state = self.vms.get(key)
            if key == 'emulator' or state is None:
                held[key] = frozenset(cores)
                continue
            keep = ()
            if state.mode == VmMode.ACTIVE:
                keep = sorted(cores, key=lambda c: (c not in state.cores,
                                                    c))[:state.max_cores]
            held[key] = frozenset(keep)
            held[None] = held.get(None, frozenset()) | (
                frozenset(cores) - held[key])
        return held

    def _record_change(self, state, old, new, now, decisions,
                       counted=None):
        uuid = state.spec.uuid
        action, why = state.last_action.action, state.last_action.reason
        if counted is not None and new < min(old, counted):
            if new < state.committed:
                state.trial = None
            decisions.append(Decision(
                now, uuid, Action.SQUEEZE, old, new,
                reason.of(HELD_BY_HUNG, cores=new, counted=counted)))
        elif new < state.committed:
            state.trial = None
            if new != old:
                decisions.append(Decision(
                    now, uuid, Action.SQUEEZE, old, new,
                    reason.of(OVERLOADED, committed=state.committed)))
        elif new < state.want and action == Action.PROBE and new == old:
            state.trial = None
            state.denied = DeniedProbe(
                old, state.want,
                state.last_sample.util if state.last_sample else 0.0, now,
                len(self.idle_cores))
            decisions.append(Decision(
                now, uuid, Action.PROBE_DENIED, old, new,
                reason.of(NO_IDLE_CORE, cores=state.want)))
            why = reason.of(PROBE_DENIED)
        elif action == Action.DRAINED:
            if new != old:
                decisions.append(Decision(now, uuid, action, old, new, why))
        elif new != old:
            if action not in _MOVES:
                # Cores it asked for earlier came free.
                action = Action.RESTORE if new > old else Action.SQUEEZE
            decisions.append(Decision(now, uuid, action, old, new, why))
        elif action in _NOTED:
            decisions.append(Decision(now, uuid, action, old, new, why))
        if new != old:
            state.changed_at = now
        state.last_action = Step(Action.STAY, why)

    def _vm_plan(self, state, shared_cpus, shared_pcpus):
        vcpus = state.spec.vcpus
        soak = (state.mode == VmMode.BEST_EFFORT and
                self.config.be_policy == 'soak')
        if state.mode == VmMode.ACTIVE and state.cores:
            cpus = self.topology.cpus_of(state.cores)
            online = min(vcpus, len(cpus))
        elif state.mode == VmMode.IDLE or (
                state.mode == VmMode.ACTIVE and state.idle.quiet()):
            # A quiet VM left without a core runs as a parked one until
            # idle_after parks it: every vCPU online would come up on the
            # shared CPUs (the busy VMs' cores on a small host) only to
            # go down again at parking, two hotplugs of an idle guest.
            cpus, online = shared_cpus, 1
        elif soak:
            # Not on the emulator pool: LC guests' I/O runs there.
            cpus = self.topology.cpus_of(
                self.topology.core_ids - self.emulator_cores)
            online = min(vcpus, len(cpus))
        else:
            cpus, online = shared_cpus, max(1, min(vcpus, shared_pcpus))
        model = state.model.models.get(len(state.cores))
        inputs = PlanInputs(
            state.mode, state.cores, cpus, online,
            min(state.want, state.max_cores)
            if state.mode == VmMode.ACTIVE else 0,
            state.trial is not None, state.last_action.reason,
            model.r2 if model is not None else None,
            len(state.model.models), soak)
        # Most VMs' plans repeat tick after tick: reuse the frozen one.
        if state.plan is None or state.plan_inputs != inputs:
            state.plan_inputs = inputs
            state.plan = VmPlan(
                uuid=state.spec.uuid, mode=inputs.mode, cores=inputs.cores,
                cpus=inputs.cpus, online_vcpus=inputs.online,
                wanted_cores=inputs.wanted, probing=inputs.probing,
                note=inputs.note, max_cores=state.max_cores,
                model_r2=inputs.r2, fitted_models=inputs.fitted,
                sched_idle=inputs.sched_idle)
        return state.plan


_SAMPLE_NUMBERS = ('util', 'sf', 'steal', 'emulator', 'emulator_wait',
                   'vcpu_run', 'vcpu_wait', 'emulator_threads', 'packets_in',
                   'packets_out', 'bytes_in', 'bytes_out')
_sample_numbers = operator.attrgetter(*_SAMPLE_NUMBERS)


def _plain_numbers(sample):
    """True when every number of ``sample`` is plainly fine.

    The common case, decided in one pass for every VM on each tick;
    anything else (False) is looked at number by number.
    """
    total = 0.0
    for value in _sample_numbers(sample):
        if value is None:
            continue
        # A NaN is not >= 0; an infinity makes the total infinite.
        if type(value) not in (int, float) or not value >= 0:
            return False
        total += value
    return math.isfinite(total)


def _plain_number(value):
    """None (not known), or a finite number that is not negative."""
    return value is None or (isinstance(value, (int, float)) and
                             math.isfinite(value) and value >= 0)


def _because(why, pred):
    """``pred`` with ``why`` put before its reason, if there is one."""
    if not why:
        return pred
    return dataclasses.replace(pred, reason=pred.reason.before_all(why))
