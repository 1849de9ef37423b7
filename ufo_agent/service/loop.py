"""One ufo-agent: the controller driven by a hypervisor driver.

``Agent.start`` adopts the running guests (with what they learned before),
``Agent.tick`` runs one second of UFO, ``Agent.stop`` gives every guest
back (all vCPUs online, its original pins): the fail-safe path of a clean
stop. After a crash the guests' watchdogs bring their vCPUs back, and the
next ``start`` re-applies everything it finds, taking the pin calls that
may not have returned as still to land (:mod:`.inflight`).

A tick survives its own errors: an exception is logged with its
traceback and counted (``tick_errors``); one raised by a driver call on
one guest only costs that guest its tick (:mod:`.guard`), any other
abandons the tick and the next one runs. A tick is healthy when it
completed without one and enforced a plan that passed the invariants.
``last_progress`` is when the last healthy tick ended and
``failed_ticks`` how many failed since: the heartbeat thread
(:mod:`.heartbeat`) beats only while progress is recent, systemd's
watchdog is fed only after a healthy tick, and ``[agent]
max_failed_ticks`` failures in a row end the agent, which gives every
guest back (``ufo_agent.cmd.agent.run``).
"""

import collections
import dataclasses
import functools
import logging
import math
import time

from ufo_agent.channel import latency as latency_mod
from ufo_agent.controller import controller as controller_mod
from ufo_agent.controller import invariants
from ufo_agent.controller import plan as plan_mod
from ufo_agent.controller import topology as topology_mod
from ufo_agent.driver import base
from ufo_agent import hostsignal
from ufo_agent.service import enforcer as enforcer_mod
from ufo_agent.service import gcsize
from ufo_agent.service import guard
from ufo_agent.service import inflight as inflight_mod
from ufo_agent.service import sampler as sampler_mod
from ufo_agent.service import settings as settings_mod
from ufo_agent.service import snapshot as snapshot_mod

LOG = logging.getLogger(__name__)
DECISIONS = logging.getLogger('ufo_agent.decisions')


@dataclasses.dataclass
class VmStatus:
    """What the operator sees of one guest (ufo-status, metrics)."""

    uuid: str
    name: str
    vcpus: int
    mode: str = 'active'
    signal: str = sampler_mod.MODE_HOST_ONLY
    channel: str = ''
    reason: str = ''
    cores: int = 0
    cpus: str = ''
    target_vcpus: int = 0
    online_vcpus: int = 0
    util: float = 0.0
    sf: float = 0.0
    r2: float = None
    vcpu_pct: float = 0.0
    emulator_pct: float = 0.0
    run_delay_ms: float = 0.0
    wanted_cores: int = 0
    note: str = ''
    note_rule: str = ''     # the rule of the note (controller.rst)
    paused: bool = False
    idle_priority: bool = False     # BE soak: its group has cpu.idle set
    # Cumulative, from the host, for the metrics' counters (None until
    # the first observation).
    vcpu_cpu_seconds: float = None
    emulator_cpu_seconds: float = None
    vcpu_run_delay_seconds: float = None
    emulator_run_delay_seconds: float = None
    # The flavor's latency target (us, None: none) and its percentile;
    # the guest's published latency, as last judged (channel.latency):
    # its last accepted value (us), how old it is, and its state.
    latency_target_us: int = None
    latency_percentile: float = None
    latency_us: float = None
    latency_age_s: float = None
    latency_state: str = latency_mod.STATE_ABSENT
    latency_fresh: bool = False     # the controller gets latency_us


@functools.lru_cache(maxsize=1024)
def _cpu_list(cpus):
    # The same few sets every tick (the shared CPUs: most of the host).
    return ','.join(str(c) for c in sorted(cpus))


class Agent:
    def __init__(self, driver, managed_cpus, controller_config,
                 settings=None, store=None, clock=time.monotonic,
                 signal_tracker=None, publishers=None, wallclock=time.time,
                 sleep=time.sleep):
        self.driver = guard.GuardedDriver(driver, self._guest_error)
        self.settings = settings or settings_mod.AgentSettings()
        self.store = store
        self.clock = clock
        host = driver.host_cpus()
        self.topology = topology_mod.HostTopology(
            host.siblings, host.numa_of_cpu, managed=managed_cpus,
            little=host.little)
        if self.topology.unmanaged_partial_cpus:
            LOG.warning('CPUs %s are managed but their SMT siblings are '
                        'not: ufo-agent leaves them alone',
                        sorted(self.topology.unmanaged_partial_cpus))
        self.controller = controller_mod.Controller(self.topology,
                                                    controller_config)
        self.specs = {}
        self.invariant_violations = 0
        self.sampler = sampler_mod.Sampler(
            self.settings.guest_util_tolerance,
            latency_stale_after=self.settings.latency_stale_after)
        self.enforcer = enforcer_mod.Enforcer(
            self.driver, self.settings.ack_timeout, clock=clock, sleep=sleep,
            ack_wait=self.settings.ack_wait,
            max_vcpu_step=self.settings.max_vcpu_step,
            managed_cpus=self.topology.cpus_of(self.topology.core_ids),
            be_soak=controller_config.be_policy == 'soak',
            in_flight=inflight_mod.InFlightPins(
                store.in_flight_record() if store is not None else None))
        self.guests = {}
        self.paused = set()       # guests whose vCPUs are stopped
        self.status = {}
        self.last_plan = None
        # The cores the last plan kept out of every pool, for the
        # status: [(uuid or 'emulator', reason, cores)].
        self.held = []
        self.tick_seconds = 0.0
        self.tick_seconds_sum = 0.0
        self.ticks = 0
        self.tick_errors = 0
        self.failed_ticks = 0       # in a row, since the last healthy one
        # Counted since start, for the metrics (see also the enforcer's).
        self.host_only_fallbacks = 0    # guest signals lost to host-only
        self.decisions = collections.Counter()      # action -> count
        self.decision_rules = collections.Counter()  # (action, rule) ->
        self.last_progress = time.monotonic()
        self._errors_seen = {}      # (uuid, where) -> last error text
        self._failed = {}           # uuid -> last enforcement failure
        self._deferred = {}         # uuid -> why its enforcement waits
        self._signals = {}          # uuid -> last (signal, reason) logged
        self._shown = {}            # uuid -> (VmPlan, VmStatus) shown
        self._last_save = clock()
        self._last_drift_check = clock()
        self._drift_order = []      # guests not yet checked this round
        self.signal_tracker = signal_tracker
        self.publishers = publishers
        self.wallclock = wallclock
        self.signal = None
        # Built when asked for after a tick, not on every tick.
        self._snapshot = {}
        self._snapshot_at = None    # the tick it is to picture, if unbuilt

    # -- lifecycle ---------------------------------------------------------
    def start(self):
        """Adopt the running guests; everything is written on first tick.

        Pin calls an earlier agent left outstanding are taken as still
        to land (a dry run pins nothing and leaves them alone).
        """
        self.last_progress = time.monotonic()
        in_flight = self.enforcer.in_flight
        if not self.settings.dry_run:
            in_flight.load()
        self._sync_guests()
        for uuid in sorted(in_flight.uuids() - set(self.guests)):
            try:
                gone = not self.driver.guest_exists(uuid)
            except base.DriverError:
                gone = False
            if gone:
                in_flight.drop(uuid)
        LOG.info('ufo-agent manages %d cores (%d CPUs) and %d guests%s',
                 len(self.topology), len(self.topology.cpus_of(
                     self.topology.core_ids)), len(self.guests),
                 ' in dry-run mode' if self.settings.dry_run else '')

    def stop(self):
        """Give every managed guest back; returns the uuids that failed.

        A dry run pinned nothing, so it gives nothing back: releasing would
        reset the pins of an agent that does run beside it.
        """
        # Giving the guests back must not depend on what may be the
        # reason the agent stops (a broken controller or publisher).
        try:
            self.save_learned()
        except Exception:
            LOG.exception('Could not save the learned state')
        if self.publishers is not None:
            try:
                self.publishers.close()
            except Exception:
                LOG.exception('Could not close the publishers')
        failed = []
        if self.settings.dry_run:
            return failed
        # Its release calls may land after this process ended: on record
        # first, and off it once they returned. Giving the guests back
        # goes on whatever happens to the record.
        in_flight = self.enforcer.in_flight
        try:
            self._expect_release()
        except Exception:
            LOG.exception('Could not record the release calls')
        for uuid in sorted(self.guests):
            try:
                self.driver.release(uuid)
            except base.DriverError as exc:
                LOG.error('Could not release guest %s: %s', uuid, exc)
                failed.append(uuid)
                continue
            in_flight.drop(uuid)
        try:
            in_flight.flush()
        except Exception:
            LOG.exception('Could not record the guests given back')
        return failed

    def _expect_release(self):
        try:
            outstanding = self.driver.busy_guests()
        except base.DriverError:
            outstanding = self.guests
        self.enforcer.in_flight.expect(
            inflight_mod.release_calls(self.guests.values()), outstanding)

    def save_learned(self):
        if self.store is None:
            return
        now = self.clock()
        for uuid in self.guests:
            try:
                self.store.save(uuid, self.controller.export_learned(uuid,
                                                                     now))
            except (OSError, ValueError) as exc:
                LOG.warning('Could not save learned state of %s: %s',
                            uuid, exc)
        self._last_save = now

    def reconfigure(self, controller_config, settings):
        """Use options reloaded at run time; the guests stay managed.

        ``dry_run``, ``libvirt_call_timeout`` and ``heartbeat_interval``
        keep their values. Returns {name: (old, new)} of what changed;
        raises ValueError (the controller's ControllerError), changing
        nothing, for a controller option that cannot change.
        """
        settings = dataclasses.replace(
            settings, dry_run=self.settings.dry_run,
            libvirt_call_timeout=self.settings.libvirt_call_timeout,
            heartbeat_interval=self.settings.heartbeat_interval)
        changes = {}
        for group, old, new in (
                ('controller', self.controller.config, controller_config),
                ('agent', self.settings, settings)):
            for field in dataclasses.fields(old):
                before = getattr(old, field.name)
                after = getattr(new, field.name)
                if before != after:
                    changes['%s.%s' % (group, field.name)] = (before, after)
        self.controller.reconfigure(controller_config)
        self.settings = settings
        self.enforcer.ack_timeout = settings.ack_timeout
        self.enforcer.ack_wait = settings.ack_wait
        self.enforcer.max_vcpu_step = max(1, settings.max_vcpu_step)
        self.sampler.tolerance = settings.guest_util_tolerance
        self.sampler.latency_stale_after = settings.latency_stale_after
        return changes

    # -- one tick ------------------------------------------------------------
    def tick(self):
        """One tick; never raises (see the module docstring)."""
        started = time.monotonic()
        now = self.clock()
        violations = self.invariant_violations
        ok = True
        try:
            plan = self._tick(now)
        except Exception:
            ok = False
            self.tick_errors += 1
            LOG.exception('Tick %d failed and was abandoned; the next tick '
                          'runs as usual', self.ticks + 1)
            plan = self.last_plan
        try:
            self._finish_tick(started, now)
        except Exception:
            ok = False
            self.tick_errors += 1
            LOG.exception('Could not finish tick %d', self.ticks)
        # A refused plan is no progress either: the pins stay as they were.
        if ok and self.invariant_violations == violations:
            self.last_progress = time.monotonic()
            self.failed_ticks = 0
        else:
            self.failed_ticks += 1
        return plan

    def _guest_error(self, uuid, where, exc):
        """An unexpected exception concerning one guest: log and count."""
        self.tick_errors += 1
        text = '%s: %s' % (type(exc).__name__, exc)
        if self._errors_seen.get((uuid, where)) != text:
            self._errors_seen[(uuid, where)] = text
            LOG.error('Unexpected error in %s of guest %s; the guest is '
                      'skipped this tick', where, uuid,
                      exc_info=(type(exc), exc, exc.__traceback__))
        else:
            LOG.debug('Unexpected error in %s of guest %s again: %s',
                      where, uuid, text)
        status = self.status.get(uuid)
        if status is not None:
            status.reason = 'error in %s: %s' % (where, text)

    def _tick(self, now):
        self._handle_events()
        self._sync_guests()
        samples, online, emulator_busy = self._observe()
        if not self.settings.dry_run:
            # Before the plan: a guest whose pins cannot be read because
            # its calls hang is busy by then, and the plan keeps its
            # cores (observing a guest makes no call that waits for it).
            for uuid in self._check_drift(now):
                LOG.warning('Pins of guest %s changed behind ufo-agent; '
                            'applying them again', uuid)
        busy = self._busy_guests()
        held = self._held_cores(busy)
        unadopted = self._unadopted_cores()
        held.update(unadopted)
        self.held = [(owner, snapshot_mod.HELD_UNADOPTED
                      if owner in unadopted else snapshot_mod.HELD_HUNG,
                      sorted(cores))
                     for owner, cores in sorted(held.items())]
        plan = self.controller.tick(now, samples, emulator_busy, held)
        for uuid, exc in self.controller.vm_errors.items():
            self._guest_error(uuid, 'controller update', exc)
        try:
            invariants.check_plan(plan, self.topology, self.specs,
                                  self.controller.config)
        except invariants.InvariantError as exc:
            # A controller bug: enforcing it could put a CPU in two pools.
            self.invariant_violations += 1
            LOG.error('Not applying the controller\'s plan, keeping the '
                      'last good pins: %s', exc)
            return self.last_plan
        for decision in plan.decisions:
            DECISIONS.info('%s', decision)
            self.decisions[str(decision.action)] += 1
            self.decision_rules[str(decision.action),
                                decision.reason.rule] += 1
        if not self.settings.dry_run:
            for uuid, count in online.items():
                if self.enforcer.check_guest(uuid, count):
                    LOG.warning('Guest %s keeps %d vCPUs online, not its '
                                'target: sending it again', uuid, count)
            outcome = self.enforcer.apply(plan, online)
            for uuid, reason in outcome.failed.items():
                # A guest that keeps failing the same way is logged once.
                log = LOG.debug if self._failed.get(uuid) == reason \
                    else LOG.warning
                log('Guest %s: %s', uuid, reason)
                if uuid in self.status:
                    self.status[uuid].reason = reason
            self._failed = dict(outcome.failed)
            for uuid, reason in outcome.deferred.items():
                # A guest that waits the same way tick after tick is
                # logged once (a host of hundreds of guests waits often).
                log = LOG.debug if self._deferred.get(uuid) == reason \
                    else LOG.info
                log('Guest %s: %s', uuid, reason)
            self._deferred = dict(outcome.deferred)
        self._update_status(plan)
        for uuid in busy:
            self.status[uuid].reason = ('an earlier call has not returned: '
                                        'its CPUs stay its own meanwhile')
        self.last_plan = plan
        self._signal(plan)
        return plan

    def _check_drift(self, now):
        """Check a share of the guests' pins: each once an interval.

        Spread over the ticks, so that no tick reads every guest's pins.
        """
        interval = self.settings.drift_check_interval
        if not interval:
            return []
        share = (now - self._last_drift_check) / interval
        if share <= 0:
            return []
        self._last_drift_check = now
        if not self._drift_order:
            self._drift_order = sorted(self.guests)
        count = len(self._drift_order) if share >= 1 else \
            math.ceil(len(self.guests) * share)
        due = self._drift_order[:count]
        del self._drift_order[:count]
        return self.enforcer.check_drift(
            [uuid for uuid in due if uuid in self.guests])

    def _busy_guests(self):
        """The managed guests whose earlier driver calls have not returned.

        Not those on which an earlier agent's calls may still land: the
        ledger holds their CPUs meanwhile, and this agent's first pin on
        each tells. It returns once the old calls did; it waits behind
        one that hangs, and the guest is busy then. (After a crash many
        guests may be on record: holding all their cores in the plan
        can leave no idle pool.)
        """
        try:
            busy = self.driver.busy_guests()
        except base.DriverError as exc:
            LOG.warning('Could not tell which guests hang: %s', exc)
            return ()
        return sorted(set(busy) & set(self.guests))

    def _held_cores(self, busy):
        """{'emulator' or uuid: cores} where hung guests' threads may run.

        Their threads cannot move until their calls return: planning
        those cores to another pool would only make it wait for them.
        So the emulator pool keeps the cores of their emulator threads,
        and each guest the cores of its vCPUs (idle ones if it has none).
        Those are the cores its pinnings lie within when they lie within
        its own cores, the emulator and the idle pool; else the cores
        the agent's pins put it on (:meth:`Enforcer.placed_cpus`), even
        where a later plan gave them to another pool: its own cores,
        idle-pool and emulator cores it was pinned to then. Threads
        over every managed core, or not known, hold nothing: freezing
        every core for them would leave no pool for anyone else.
        (Before the first plan, and while no guest has cores of its
        own, the emulator and idle pools are every core: threads still
        on their definition's pins lie within them, over every core.)
        """
        ctl = self.controller
        every = self.topology.core_ids
        held = {}
        for uuid in busy:
            vcpu, emulator = self.enforcer.held_cpus(uuid)
            placed_vcpu, placed_emulator = self.enforcer.placed_cpus(uuid)
            cores = self._cores_of(emulator)
            if not cores <= ctl.emulator_cores | ctl.idle_cores:
                cores = self._cores_of(placed_emulator)
            if cores != every:
                held.setdefault('emulator', set()).update(cores)
            state = ctl.vms.get(uuid)
            own = state.cores if state is not None else frozenset()
            mine = self._cores_of(self.enforcer.own_pool_cpus(uuid))
            cores = self._cores_of(vcpu)
            if not cores <= own | mine | ctl.idle_cores:
                cores = self._cores_of(placed_vcpu)
            if cores != every:
                held[uuid] = cores
        return held

    def _unadopted_cores(self):
        """{uuid: cores} where domains not adopted hold CPUs.

        The plan gives them to no pool: the enforcer would only wait for
        them. Not every core (pins not read): as for a hung guest.
        """
        every = self.topology.core_ids
        held = {}
        for uuid, cpus in self.enforcer.unadopted_cpus().items():
            cores = self._cores_of(cpus)
            if cores and cores != every:
                held[uuid] = cores
        return held

    def _cores_of(self, cpus):
        return {core.core_id for core in self.topology.cores
                if not cpus.isdisjoint(core.cpus)}

    def _finish_tick(self, started, now):
        self.ticks += 1
        self.tick_seconds = time.monotonic() - started
        self.tick_seconds_sum += self.tick_seconds
        if self.store is not None and \
                now - self._last_save >= self.settings.state_save_interval:
            self.save_learned()
        self._snapshot_at = now

    @property
    def snapshot(self):
        """The picture of the agent after its last tick (:mod:`.snapshot`).

        Built on the first ask after a tick: the endpoint wants one now and
        then, and a picture of every guest on every tick cost more than
        some steps of the tick. Ask from the loop's thread only, between
        ticks: it reads the live agent.
        """
        if self._snapshot_at is not None:
            self._snapshot = snapshot_mod.build(self, self._snapshot_at)
            self._snapshot_at = None
        return self._snapshot

    def _handle_events(self):
        try:
            events = self.driver.events()
        except base.DriverError as exc:
            LOG.warning('Could not read guest events: %s', exc)
            return
        for uuid, event in events:
            LOG.info('Guest %s %s', uuid, event.value)
            try:
                self._handle_event(uuid, event)
            except Exception as exc:
                self._guest_error(uuid, '%s event' % event.value, exc)

    def _handle_event(self, uuid, event):
        if event in (base.GuestEvent.STARTED, base.GuestEvent.REBOOTED):
            if event == base.GuestEvent.STARTED:
                self._resume(uuid)      # a new QEMU runs (or says so)
            # Pins and online vCPUs were reset: write them again.
            self.enforcer.invalidate(uuid)
            self.sampler.forget(uuid)
        elif event == base.GuestEvent.PAUSED:
            self._pause(uuid)
        elif event == base.GuestEvent.RESUMED:
            self._resume(uuid)
        elif event == base.GuestEvent.STOPPED:
            self._drop(uuid, keep_state=True)
        elif event == base.GuestEvent.UNDEFINED:
            self._drop(uuid, keep_state=False)

    def _pause(self, uuid):
        """Park a paused guest; it stays managed, its pins are moved.

        Its cores go back to the idle pool only through the enforcer,
        which frees them after the guest's pins left them: when it runs
        again it runs on the shared CPUs, never on another guest's.
        """
        if uuid not in self.guests or uuid in self.paused:
            return
        self.paused.add(uuid)
        self.controller.park(uuid, self.clock())
        self.enforcer.pause(uuid)
        self.sampler.forget(uuid)
        self.status[uuid].paused = True

    def _resume(self, uuid):
        """Running again, parked: it wakes when its samples show load."""
        if uuid not in self.paused:
            return
        self.paused.discard(uuid)
        self.enforcer.resume(uuid)
        self.sampler.forget(uuid)
        if uuid in self.status:
            self.status[uuid].paused = False

    def _sync_guests(self):
        try:
            current = {g.uuid: g for g in self.driver.guests()}
        except base.DriverError as exc:
            LOG.warning('Could not list guests: %s', exc)
            return
        for uuid in sorted(set(self.guests) - set(current)):
            self._drop(uuid, keep_state=True)
        for uuid in sorted(set(self.guests) & set(current)):
            # A new QEMU (resized, started over) whose definition changed:
            # its vCPU count and restore pins are the new ones.
            if current[uuid] is not self.guests[uuid] and \
                    current[uuid] != self.guests[uuid]:
                LOG.info('Guest %s changed its definition: adopting it '
                         'again', uuid)
                self._drop(uuid, keep_state=True)
        now = self.clock()
        added = sorted(set(current) - set(self.guests))
        failed = []
        for uuid in added:
            try:
                self._adopt(current[uuid], now)
            except Exception as exc:
                # Half adopted: undone, tried again on the next tick.
                self.controller.remove_vm(uuid)
                self.specs.pop(uuid, None)
                self.enforcer.forget(uuid)
                self.sampler.forget(uuid)
                self.guests.pop(uuid, None)
                self.status.pop(uuid, None)
                self.paused.discard(uuid)
                self._guest_error(uuid, 'adoption', exc)
                failed.append(uuid)
        self._hold_unadopted(failed)
        if added:
            # Adopted ones found paused say so by an event: park them now.
            self._handle_events()
        gcsize.fit(len(self.guests))

    def _hold_unadopted(self, failed=()):
        """Keep the CPUs of domains not adopted out of every pool.

        Those the driver could not adopt, and ``failed``: guests it
        listed whose adoption here failed. After a restart such a guest
        may sit in a pool of the agent before: until it is adopted no
        other guest's pool takes its CPUs.
        """
        try:
            found = self.driver.unadopted_pins()
        except base.DriverError as exc:
            LOG.warning('Could not read the pins of guests not adopted: '
                        '%s', exc)
            return
        for uuid in failed:
            try:
                found[uuid] = self.driver.read_pins(uuid)
            except base.DriverError:
                found[uuid] = None
        self.enforcer.hold_unadopted(found)

    def _adopt(self, guest, now):
        uuid = guest.uuid
        learned = self.store.load(uuid) if self.store else None
        spec = plan_mod.VmSpec(uuid, guest.vcpus, guest.vm_class,
                               guest.latency_target_us,
                               guest.latency_percentile)
        try:
            self.controller.add_vm(spec, learned, now)
        except Exception as exc:
            if learned is None:
                raise
            # What was saved must never keep a guest unmanaged.
            self.store.discard(uuid, 'not usable: %s: %s'
                               % (type(exc).__name__, exc))
            learned = None
            self.controller.add_vm(spec, None, now)
        self.specs[uuid] = spec
        self.enforcer.track(guest)
        self.guests[uuid] = guest
        self.status[uuid] = VmStatus(
            uuid, guest.name, guest.vcpus,
            latency_target_us=guest.latency_target_us,
            latency_percentile=guest.latency_percentile
            if guest.latency_target_us is not None else None)
        LOG.info('Managing guest %s (%s, %d vCPUs, class %s%s%s)', uuid,
                 guest.name, guest.vcpus, guest.vm_class,
                 '' if guest.latency_target_us is None else
                 ', latency target %d us at p%g' % (
                     guest.latency_target_us, guest.latency_percentile),
                 ', learned state restored' if learned else '')

    def _drop(self, uuid, keep_state):
        # Its QEMU is gone, and with it any call that was to land.
        self.enforcer.in_flight.drop(uuid)
        if uuid not in self.guests:
            if not keep_state:
                self._forget_files(uuid)
            return
        if keep_state and self.store is not None:
            try:
                self.store.save(uuid, self.controller.export_learned(
                    uuid, self.clock()))
            except (OSError, ValueError) as exc:
                LOG.warning('Could not save learned state of %s: %s',
                            uuid, exc)
        self.controller.remove_vm(uuid)
        self.paused.discard(uuid)
        self.specs.pop(uuid, None)
        self.enforcer.forget(uuid)
        self.sampler.forget(uuid)
        del self.guests[uuid]
        self.status.pop(uuid, None)
        self._failed.pop(uuid, None)
        self._deferred.pop(uuid, None)
        self._signals.pop(uuid, None)
        self._shown.pop(uuid, None)
        for key in [k for k in self._errors_seen if k[0] == uuid]:
            del self._errors_seen[key]
        if not keep_state:
            self._forget_files(uuid)

    def _forget_files(self, uuid):
        if self.store is not None:
            self.store.delete(uuid)
        try:
            self.driver.forget(uuid)
        except base.DriverError as exc:
            LOG.warning('Could not clean up after guest %s: %s', uuid, exc)

    def _observe(self):
        samples, online, emulator_busy = {}, {}, 0.0
        for uuid in sorted(self.guests):
            if uuid in self.paused:
                continue            # stopped vCPUs: nothing to learn
            try:
                obs = self.driver.observe(uuid)
            except base.DriverError as exc:
                LOG.warning('Could not observe guest %s: %s', uuid, exc)
                continue
            status = self.status[uuid]
            status.vcpu_cpu_seconds = obs.vcpu_cpu_ns / 1e9
            status.emulator_cpu_seconds = obs.emulator_cpu_ns / 1e9
            status.vcpu_run_delay_seconds = obs.vcpu_wait_ns / 1e9
            status.emulator_run_delay_seconds = obs.emulator_wait_ns / 1e9
            try:
                rates = self.sampler.rates(uuid, obs)
            except Exception as exc:
                self.sampler.forget(uuid)
                self._guest_error(uuid, 'sampling', exc)
                continue
            if rates is None:
                # No rates yet, but a valid page already says the module
                # answers: the enforcer may prove it this tick.
                if obs.guest is not None and obs.guest.ok:
                    online[uuid] = obs.guest.sample.online_vcpus
                continue
            emulator_busy += rates.emulator_pct
            samples[uuid] = rates.sample
            if rates.online_vcpus:
                online[uuid] = rates.online_vcpus
            # Logged on change (status.reason may since hold why the
            # enforcer failed).
            previous = self._signals.get(uuid)
            if previous != (rates.mode, rates.reason):
                self._signals[uuid] = (rates.mode, rates.reason)
                if previous is not None and \
                        previous[0] == sampler_mod.MODE_GUEST and \
                        rates.mode == sampler_mod.MODE_HOST_ONLY:
                    self.host_only_fallbacks += 1
                # No module, or samples not checkable yet (every guest at
                # a start): not worth a warning per guest.
                log = LOG.warning if rates.fault else LOG.info
                log('Guest %s signal: %s%s', uuid, rates.mode,
                    ' (%s)' % rates.reason if rates.reason else '')
            status.signal, status.reason = rates.mode, rates.reason
            status.util, status.sf = rates.sample.util, rates.sample.sf
            status.vcpu_pct = rates.vcpu_pct
            status.emulator_pct = rates.emulator_pct
            status.run_delay_ms = rates.run_delay_ms
            status.online_vcpus = rates.online_vcpus
            status.latency_us = rates.latency.value_us
            status.latency_age_s = rates.latency.age_s
            status.latency_state = rates.latency.state
            status.latency_fresh = rates.latency.fresh
        return samples, online, emulator_busy

    def _update_status(self, plan):
        shown = self._shown
        for uuid, vm in plan.vms.items():
            status = self.status.get(uuid)
            if status is None:
                continue
            status.channel = str(self.enforcer.ack_state(uuid) or '')
            status.idle_priority = self.enforcer.idle.get(uuid) is True
            # Most guests' plans are the very plan of the last tick (the
            # controller reuses a frozen VmPlan): shown on that status.
            seen = shown.get(uuid)
            if seen is not None and seen[0] is vm and seen[1] is status:
                continue
            shown[uuid] = (vm, status)
            status.mode = vm.mode.value
            status.cores = len(vm.cores)
            status.cpus = _cpu_list(vm.cpus)
            status.target_vcpus = vm.online_vcpus
            status.wanted_cores = vm.wanted_cores
            if vm.note is not None:
                status.note, status.note_rule = str(vm.note), vm.note.rule
            status.r2 = vm.model_r2

    def _signal(self, plan):
        """Paper Appendix B.4: tell the cloud scheduler how loaded we are."""
        if self.signal_tracker is None:
            return
        usage = hostsignal.HostUsage.from_plan(plan, self.wallclock())
        previous = self.signal
        self.signal = self.signal_tracker.update(usage)
        if previous is None or previous.state != self.signal.state:
            LOG.info('Host signal: %s (idle %d, unmet %d cores)',
                     self.signal.state, usage.idle_cores,
                     usage.unmet_cores)
        if self.publishers is not None and not self.settings.dry_run:
            self.publishers.publish(self.signal)

    def cores_saved(self):
        """Cores the guests would hold without UFO, minus what they hold."""
        if self.last_plan is None:
            return 0
        without = sum(vm.max_cores for vm in self.last_plan.vms.values())
        held = sum(len(vm.cores) for vm in self.last_plan.vms.values())
        return without - held
