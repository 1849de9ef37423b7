"""Carry out a HostPlan through the driver, in an order that is safe.

Order (paper section 4.6) and the isolation promise:

1. answers to earlier targets are collected; a guest whose answer is
   overdue falls back to host-only (every vCPU online, backoff: see
   :mod:`ufo_agent.service.acks`);
2. guests that lose vCPUs are told first, in steps of at most
   ``max_vcpu_step`` vCPUs, and the enforcer waits for their answers
   together, at most ``ack_wait`` seconds; a guest that has not answered
   keeps its pins this tick (its CPUs stay its own until it answers or
   falls back), unless they are in no pool yet (found as they are): those
   may be other guests' cores, so it is placed all the same;
3. pins narrow: every pinning gives up the CPUs it loses;
4. pins widen, each only onto CPUs that no pinning of another pool may
   hold (:mod:`ufo_agent.service.ledger`): a CPU changes owner only after
   its old owner's narrow succeeded;
5. guests that gain vCPUs are told last (answered on a later tick).

Before pins are written, the CPUs they may put each pinning on are
recorded (:mod:`ufo_agent.service.inflight`): a call that hangs may land
after the agent died, and the next agent must know. A pin that may move
threads onto CPUs the record does not hold is not made.

Best-effort guests under ``be_policy = soak`` (``sched_idle`` plans) are
put at idle priority before their vCPU pins widen over the other pools,
and are taken out of it only once those pins have narrowed back; a
guest whose priority cannot be set stays on the shared CPUs.

Only guests that proved they answer get shrink targets; others are pinned
with every vCPU online, no worse off than under Nova's shared policy.
Nothing is pinned outside the managed CPUs. Nothing is rewritten that has
not changed, and everything is written again after a guest (re)starts or
when the driver reports it lost track.
"""

import collections
import dataclasses
import logging
import time

from ufo_agent.driver import base
from ufo_agent.service import acks as acks_mod
from ufo_agent.service import inflight as inflight_mod
from ufo_agent.service import ledger as ledger_mod

LOG = logging.getLogger(__name__)

VCPU = base.VCPU
EMULATOR = base.EMULATOR
# The driver calls whose failures the enforcer counts (``errors``).
DRIVER_METHODS = ('pin_vcpus', 'pin_emulator', 'set_vcpu_target',
                  'acknowledged', 'set_vcpus_idle')


@dataclasses.dataclass(frozen=True)
class Outcome:
    """What one :meth:`Enforcer.apply` did."""

    pinned: int
    targets: int
    failed: dict          # uuid -> reason
    deferred: dict = dataclasses.field(default_factory=dict)
    fallbacks: tuple = ()  # uuids that fell back to host-only


class EnforcementError(Exception):
    """A pin the enforcer must never write (outside the managed CPUs)."""


class Enforcer:
    def __init__(self, driver, ack_timeout=2.0, clock=time.monotonic,
                 sleep=time.sleep, ack_wait=None, max_vcpu_step=8,
                 managed_cpus=None, be_soak=False, in_flight=None):
        self.driver = driver
        self.ack_timeout = ack_timeout
        self.ack_wait = (min(0.3, ack_timeout) if ack_wait is None
                         else ack_wait)
        self.max_vcpu_step = max(1, max_vcpu_step)
        self.managed_cpus = (frozenset(managed_cpus)
                             if managed_cpus is not None else None)
        self.clock = clock
        self.sleep = sleep
        self.ledger = ledger_mod.Ledger()
        self.in_flight = (in_flight if in_flight is not None
                          else inflight_mod.InFlightPins())
        self.acks = {}            # uuid -> acks.GuestAcks
        self.guests = {}          # uuid -> driver Guest
        self.paused = set()       # uuids whose vCPUs are stopped
        # Running domains the driver could not adopt: their CPUs are
        # held in the ledger (hold_unadopted).
        self.unadopted = set()
        # be_policy = soak: uuid -> whether its vCPUs are at idle priority
        # (None: not known, as for a guest found running).
        self.be_soak = be_soak
        self.idle = {}
        # Counted since start, for the metrics: targets rolled back after
        # a missed acknowledgement, and failed driver calls by method.
        self.rollbacks = 0
        # Pinnings found changed behind the agent's back (a vCPU plugged
        # on other CPUs, a re-pin by someone else) and written again.
        self.pin_repairs = 0
        self.errors = collections.Counter(
            dict.fromkeys(DRIVER_METHODS, 0))

    # -- inventory ---------------------------------------------------------
    def track(self, guest):
        self.unadopted.discard(guest.uuid)
        self.guests[guest.uuid] = guest
        self.acks[guest.uuid] = acks_mod.GuestAcks.for_guest(
            guest.vcpus, guest.has_channel)
        self._adopt_pins(guest.uuid)

    def invalidate(self, uuid):
        """The guest restarted or was re-pinned by someone else.

        Its pins are whatever its definition or that someone says, and its
        module starts over: everything is written again.
        """
        if uuid not in self.guests:
            return
        self.acks[uuid].reset()
        self.idle.pop(uuid, None)
        self._adopt_pins(uuid)

    def forget(self, uuid):
        self.unadopted.discard(uuid)
        self.ledger.forget_guest(uuid)
        self.idle.pop(uuid, None)
        self.acks.pop(uuid, None)
        self.guests.pop(uuid, None)
        self.paused.discard(uuid)

    def pause(self, uuid):
        """The guest's vCPUs stopped: it cannot answer until it resumes.

        It is sent no target meanwhile and an unanswered one is given up
        (not a miss): its vCPUs are taken as all online. Its pins follow
        the plan as before: a paused guest's threads keep their pins and
        run on them again when it resumes, so its CPUs change owner only
        after its pins moved (the ledger's rule, as for any guest).
        """
        st = self.acks.get(uuid)
        if st is None:
            return
        self.paused.add(uuid)
        if st.waiting:
            st.seq = None
            st.online = None

    def resume(self, uuid):
        """The guest runs again, on the pins it had: targets may follow."""
        self.paused.discard(uuid)

    def _adopt_pins(self, uuid, keys=None):
        """Record the guest's pins as found (``keys``: only those).

        With the CPUs that an earlier agent's calls, not known to have
        returned, may still put them on. Those are not seen: the threads
        may never have run there, so they count as guessed (the
        pinning's first pin narrows within the CPUs all its threads were
        read on, or if it could not be read, widens onto CPUs no other
        pool may hold).
        """
        guest = self.guests[uuid]
        vcpu = guest.restore_vcpu_cpus
        emulator = guest.restore_emulator_cpus
        exact = guessed = False
        seen = {VCPU: None, EMULATOR: None}
        try:
            live_vcpus, live_emulator = self.driver.read_pins(uuid)
            sets = [s for s in live_vcpus if s]
            exact = len(sets) == 1 and bool(live_emulator)
            # Threads on different sets hold their union; a narrow keeps
            # each where it ran only within the CPUs common to all.
            seen = {VCPU: _common(sets),
                    EMULATOR: frozenset(live_emulator or ()) or None}
            vcpu = frozenset().union(*sets) or vcpu
            emulator = live_emulator or emulator
        except base.DriverError as exc:
            LOG.debug('Live pins of %s unknown (%s): assuming its '
                      'definition and every managed CPU', uuid, exc)
            if keys is not None:
                return
            every = self.managed_cpus or frozenset()
            vcpu, emulator = vcpu | every, emulator | every
            guessed = True
        for kind, cpus in ((VCPU, vcpu), (EMULATOR, emulator)):
            if keys is None or (uuid, kind) in keys:
                landing = (self.in_flight.cpus((uuid, kind))
                           if uuid in self.in_flight.inherited
                           else frozenset())
                self.ledger.adopt((uuid, kind), cpus | landing,
                                  exact and not landing,
                                  guessed or bool(landing - cpus),
                                  seen[kind])

    def hold_unadopted(self, found):
        """Hold the CPUs of running domains the driver could not adopt.

        ``found`` maps their uuids to their live pins (as ``read_pins``),
        or None where those could not be read. An earlier agent may have
        placed such a domain in a pool, and its threads stay there: no
        pool may take their CPUs. A thread on every managed CPU is in no
        pool (but the floating shared pool, which shares them with every
        pool by design) and holds none. Pins not read, and CPUs an
        earlier agent's calls may still put it on, are held as guessed.
        Once adopted the guest's pins are read as any guest's
        (:meth:`track`); a domain no longer found holds nothing.
        """
        every = self.managed_cpus or frozenset()
        for uuid in self.unadopted - set(found):
            if uuid not in self.guests:
                self.ledger.forget_guest(uuid)
        self.unadopted = set()
        for uuid, pins in sorted(found.items()):
            if uuid in self.guests:
                continue
            self.unadopted.add(uuid)
            self.ledger.forget_guest(uuid)
            if pins is None:
                held = {VCPU: every, EMULATOR: every}
            else:
                held = {VCPU: _pooled(pins[0], every),
                        EMULATOR: _pooled([pins[1]], every)}
            for kind, cpus in held.items():
                landing = (self.in_flight.cpus((uuid, kind))
                           if uuid in self.in_flight.inherited
                           else frozenset())
                if cpus | landing:
                    self.ledger.adopt((uuid, kind), cpus | landing,
                                      guessed=pins is None or
                                      bool(landing - cpus))

    def unadopted_cpus(self):
        """{uuid: CPUs} held for the domains not adopted (see above)."""
        held = {}
        for uuid in self.unadopted:
            entries = [self.ledger.get((uuid, kind))
                       for kind in (VCPU, EMULATOR)]
            held[uuid] = frozenset().union(*[entry.cpus for entry in entries
                                             if entry is not None])
        return held

    def _read_guessed(self, uuids):
        """Read again the pins that could not be read when adopted.

        Only pinnings nothing was written to since: a pin that failed
        may still land, and reading now would not cover it.
        """
        # Most ticks there is none: not a look at every guest's pins.
        guessed = {uuid for uuid, _ in self.ledger.guessed()}
        for uuid in uuids:
            if uuid not in guessed:
                continue
            keys = {key for key in ((uuid, VCPU), (uuid, EMULATOR))
                    if self._untouched_guess(key)}
            if keys:
                self._adopt_pins(uuid, keys)

    def _untouched_guess(self, key):
        entry = self.ledger.get(key)
        return entry is not None and entry.guessed and \
            entry.pool == ledger_mod.unknown(key)

    # -- one pass ----------------------------------------------------------
    def apply(self, plan, guest_online=None):
        """Enforce ``plan``.

        ``guest_online`` maps the guests whose page holds a valid report to
        the vCPU count they report online.
        """
        guest_online = guest_online or {}
        now = self.clock()
        failed, deferred, fallbacks = {}, {}, []
        uuids = [u for u in sorted(plan.vms) if u in self.guests]
        self._collect_answers(uuids, now, failed, fallbacks)

        # Targets: probes (a no-op target to prove the channel) and the
        # shrinks of proven guests, waited for together; then the shrinks
        # of guests proven or done with an earlier target meanwhile. All
        # within one deadline, one shrink step a guest.
        targets = 0
        deadline = self.clock() + self.ack_wait
        shrunk = set()
        walk = uuids
        for phase in ('probe', 'shrink'):
            waiting = {}
            for uuid in walk:
                st = self.acks[uuid]
                if st.state == acks_mod.AckState.NO_CHANNEL or \
                        uuid in self.paused:
                    continue
                if phase == 'probe' and st.wants_probe(now):
                    # Only a guest whose module answers on its page: one
                    # still booting is not yet proven, but not punished.
                    if uuid in guest_online:
                        targets += self._send(uuid, st.vcpus, now, failed)
                elif st.may_shrink and not st.waiting and \
                        uuid not in shrunk:
                    want = self._wanted_online(uuid, plan)
                    have = st.assumed_online()
                    if want < have:
                        shrunk.add(uuid)
                        step = max(want, have - self.max_vcpu_step)
                        targets += self._send(uuid, step, now, failed)
                if st.waiting:
                    waiting[uuid] = st.seq
            self._wait(waiting, deadline)
            self._collect_answers(uuids, self.clock(), failed, fallbacks)
            walk = self._answered(uuids, waiting)

        # Idle priority before any pin may widen over other pools.
        soaking = self._enter_idle(uuids, plan, failed)
        # Pins: narrow every pinning, then widen where the ledger allows.
        self._read_guessed(uuids)
        wanted = self._wanted_pins(uuids, plan, soaking, deferred)
        moving = self._moving(wanted)
        self._expect_pins(moving)
        narrows = []
        for key, (pool, cpus) in sorted(moving.items(), key=_vcpus_first):
            entry = self.ledger.get(key)
            if entry.cpus is cpus and entry.exact and not entry.guessed:
                continue            # pinned on this very set: no narrow
            kept = self._narrowed(entry, cpus) or self._off_idle(
                key, entry, plan.idle_cpus)
            if kept:
                narrows.append((key, None, kept))
        pinned = self._pin_all(narrows, failed) if narrows else 0
        pending = {key: target for key, target in moving.items()
                   if not _on_target(self.ledger.get(key), target)}
        # Without an idle core (idle_pool_min_cores = 0) the shared pool
        # is every managed CPU: by design it floats over the other pools'
        # cores, so it neither waits for them nor makes them wait.
        floating = None
        if not plan.idle_cpus and any(pool == ledger_mod.SHARED
                                      for pool, _ in wanted.values()):
            floating = ledger_mod.SHARED
        pinned += self._widen(pending, plan.shared_cpus, failed, deferred,
                              floating, plan.idle_cpus)
        self._leave_idle(uuids, plan, wanted, failed, deferred)

        # Growing guests last; their answer is collected on a later tick.
        for uuid in uuids:
            st = self.acks[uuid]
            if uuid in failed or not st.may_shrink or st.waiting or \
                    uuid in self.paused:
                continue
            entry = self.ledger.get((uuid, VCPU))
            want = self._wanted_online(uuid, plan)
            if want > st.assumed_online() and \
                    entry.cpus == plan.vms[uuid].cpus:
                targets += self._send(uuid, want, now, failed)
        return Outcome(pinned, targets, failed, deferred, tuple(fallbacks))

    @staticmethod
    def _answered(uuids, waiting):
        """The guests the second target phase walks: those that waited.

        Only an answer (or its miss) since the first phase changes what
        a guest may be sent; the others were decided on the same state.
        """
        return [uuid for uuid in uuids if uuid in waiting]

    def _moving(self, wanted):
        """The pinnings of ``wanted`` not yet exactly on their target.

        One on its target takes part in no step of the pass (no record
        in flight, no narrow, no widen): most of them, most ticks. The
        ledger is read afresh each pass, so nothing here can go stale.
        """
        get = self.ledger.get
        return {key: target for key, target in wanted.items()
                if not _on_target(get(key), target)}

    def _expect_pins(self, wanted):
        """Record where this pass's pin calls may put each pinning.

        Their targets: where the threads are now, a next agent reads.
        The entries of guests whose earlier calls have not returned
        stay. (A pinning that waits in a cycle and is parked on the
        shared CPUs, :meth:`_widen`, has them recorded by :meth:`_pin`
        first.)
        """
        try:
            outstanding = set(self.driver.busy_guests())
        except base.DriverError:
            outstanding = set(self.guests)
        calls = {}
        for key, (pool, cpus) in wanted.items():
            entry = self.ledger.get(key)
            if not _on_target(entry, (pool, cpus)):
                calls[key] = cpus | self._narrowed(entry, cpus)
        self.in_flight.expect(calls, outstanding)

    def _narrowed(self, entry, cpus):
        """The CPUs a narrow of ``entry`` towards ``cpus`` pins it on.

        Empty: no narrow. A pinning narrows only within the CPUs every
        thread of it was seen on (``Entry.room``; none for guessed pins
        not read): elsewhere a thread may never have run, and another
        pool may be there (see the ledger). When a guessed one keeps
        none of its target it still goes where it was seen (the managed
        CPUs of it): an earlier agent's calls that may land hold every guessed
        pinning over every CPU they may reach, so without that pin none
        of them might ever widen, and its return shows that nothing
        older can land any more (:mod:`ufo_agent.service.inflight`).
        """
        room = entry.room
        if entry.guessed:
            managed = (room if self.managed_cpus is None
                       else room & self.managed_cpus)
            return room & cpus or managed
        kept = room & cpus
        if kept and (kept != entry.cpus or not entry.exact):
            return kept
        return frozenset()

    def _off_idle(self, key, entry, idle_cpus):
        """The CPUs a pinning found as it is narrows to off the idle pool.

        Empty: no such narrow. Pinnings found as they are (after a
        restart, a migration in, a call cut short) may each hold idle
        CPUs and CPUs the others are bound for: every one then waits for
        another, and none can be parked on the idle CPUs to break the
        cycle while the others hold them (:meth:`_widen`). One that
        keeps none of its target by a narrow leaves the idle CPUs first,
        within where its threads were seen (for one bound for the idle
        pool, that is where every thread was seen, off the idle CPUs):
        the others may then enter the idle pool, and one of a cycle be
        parked there.
        """
        if entry.guessed or not idle_cpus or \
                entry.pool != ledger_mod.unknown(key) or \
                not entry.cpus & idle_cpus:
            return frozenset()
        room = entry.room
        if self.managed_cpus is not None:
            room &= self.managed_cpus
        kept = room - idle_cpus
        if kept and (kept != entry.cpus or not entry.exact):
            return kept
        return frozenset()

    def _wanted_pins(self, uuids, plan, soaking, deferred):
        """(uuid, kind) -> (pool, CPUs) of every pinning to write."""
        wanted = {}
        for uuid in uuids:
            vm = plan.vms[uuid]
            st = self.acks[uuid]
            if st.shrinking and self._in_pools((uuid, VCPU)):
                # Not yet answered: its CPUs stay its own meanwhile.
                deferred[uuid] = ('waiting for the guest to keep %d vCPUs '
                                  'online' % st.target)
            elif uuid in soaking:
                wanted[(uuid, VCPU)] = (ledger_mod.SOAK, vm.cpus)
            elif vm.sched_idle:
                # Not at idle priority: where best-effort VMs would be
                # without soak mode.
                wanted[(uuid, VCPU)] = (ledger_mod.SHARED, plan.shared_cpus)
            else:
                pool = (ledger_mod.vm_pool(uuid) if vm.cores
                        else ledger_mod.SHARED)
                wanted[(uuid, VCPU)] = (pool, vm.cpus)
            pool = (ledger_mod.EMULATOR if plan.emulator_cores
                    else ledger_mod.SHARED)
            wanted[(uuid, EMULATOR)] = (pool, plan.emulator_cpus)
        return wanted

    def _in_pools(self, key):
        """Whether every CPU of the pinning is in a pool it was given.

        Not one found as it is (at a start, after a release or a
        restart): its CPUs may be other guests' cores, so a guest whose
        shrink is unanswered is placed all the same; until it answers
        it may run more vCPUs than CPUs, but only where the plan puts it.
        """
        entry = self.ledger.get(key)
        return entry is not None and all(_known(pool)
                                         for pool, _ in entry.parts)

    def _enter_idle(self, uuids, plan, failed):
        """Set idle priority where the plan wants it; return who has it."""
        soaking = set()
        if not self.be_soak:
            return soaking
        for uuid in uuids:
            if not plan.vms[uuid].sched_idle:
                continue
            if self.idle.get(uuid) is not True:
                if not self._set_idle(uuid, True, failed):
                    continue
            soaking.add(uuid)
        return soaking

    def _leave_idle(self, uuids, plan, wanted, failed, deferred):
        """Normal priority back, once the vCPUs are off the other pools.

        A best-effort guest left on the shared CPUs because its priority
        could not be set is left as it is: idle priority harms nobody.
        """
        if not self.be_soak:
            return
        for uuid in uuids:
            target = wanted.get((uuid, VCPU))
            if self.idle.get(uuid) is False or target is None or \
                    plan.vms[uuid].sched_idle:
                continue
            entry = self.ledger.get((uuid, VCPU))
            if entry.exact and entry.pool == target[0] and \
                    entry.cpus <= target[1]:
                self._set_idle(uuid, False, failed)
            else:
                deferred.setdefault(uuid, 'idle priority kept until its '
                                    'vCPU pins leave the other pools')

    def _set_idle(self, uuid, idle, failed):
        try:
            self.driver.set_vcpus_idle(uuid, idle)
        except base.DriverError as exc:
            self.errors['set_vcpus_idle'] += 1
            failed[uuid] = 'idle priority %s: %s' % (
                'on' if idle else 'off', exc)
            # A failed write may have happened or not.
            self.idle[uuid] = None
            return False
        self.idle[uuid] = idle
        return True

    def _widen(self, pending, shared_cpus, failed, deferred, floating=None,
               idle_cpus=frozenset()):
        """Widen or move what the ledger allows, in rounds.

        A pinning waits while a pinning of another pool may hold a CPU it
        wants. When every pinning left waits for another one that waits
        (a swap, or pins adopted from a crashed agent), one of them moves
        to the shared CPUs first, which frees its old CPUs. ``floating``
        is the pool that takes part in no ownership (see
        :meth:`~ufo_agent.service.ledger.Ledger.holders`); ``idle_cpus``
        the idle pool's CPUs, where guests without cores are parked.
        """
        pinned = 0
        for _ in range(2 * len(pending) + 2):
            progress, blocked = False, {}
            joining = self._joining(pending, idle_cpus)
            for key, pool in sorted(joining.items()):
                # Inside its new pool already: join it where it is first,
                # so the ledger never shows a member under its old pool.
                entry = self.ledger.get(key)
                if entry.pool != pool and not self.ledger.holders(
                        entry.cpus, pool, key, joining, floating):
                    self.ledger.joined(key, pool)
            ready = []
            for key in sorted(pending):
                pool, cpus = pending[key]
                entry = self.ledger.get(key)
                holders = self.ledger.holders(cpus, pool, key, joining,
                                              floating)
                if holders:
                    blocked[key] = holders
                    continue
                if entry.cpus == cpus and entry.exact:
                    self.ledger.joined(key, pool)
                else:
                    ready.append((key, pool, cpus))
                del pending[key]
                progress = True
            if ready:
                # Each decided on the ledger before the round's pins: a
                # pin the others clear the way for waits a round.
                pinned += self._pin_all(ready, failed)
            if not pending:
                break
            if progress:
                continue
            for key in sorted(blocked):
                entry = self.ledger.get(key)
                if pending[key][0] == ledger_mod.SHARED or not shared_cpus \
                        or not set(blocked[key]) <= set(pending) or \
                        (entry.pool, entry.cpus) == (ledger_mod.SHARED,
                                                     shared_cpus):
                    continue
                if not self.ledger.holders(shared_cpus, ledger_mod.SHARED,
                                           key, joining, floating):
                    pinned += self._pin(key, ledger_mod.SHARED, shared_cpus,
                                        failed)
                    progress = True
                    break
            if not progress:
                break
        for key in sorted(pending):
            holders = self.ledger.holders(pending[key][1], pending[key][0],
                                          key, floating=floating)
            deferred.setdefault(key[0], '%s pins wait for CPUs held by %s'
                                % (key[1], ', '.join('%s %s' % h
                                                     for h in holders)))
        return pinned

    def _joining(self, pending, idle_cpus):
        """Pending pinnings that are inside a pool's CPUs: its members.

        A pinning inside the CPUs it is wanted on joins its new pool
        there. One that waits for CPUs elsewhere but sits inside the idle
        pool (parked by an earlier plan, or found there at start) is a
        member of the shared pool meanwhile, like the guests parked
        beside it: otherwise pinnings parked together would each hold
        the idle CPUs from the other, and a guest that must park to free
        the cores they wait for never could. The idle pool's CPUs are no
        other pool's, so a pinning inside them holds nothing more as a
        member of the shared pool than under its old label.
        """
        joining = {}
        for key, (pool, cpus) in pending.items():
            held = self.ledger.get(key).cpus
            if held <= cpus:
                joining[key] = pool
            elif idle_cpus and held <= idle_cpus:
                joining[key] = ledger_mod.SHARED
        return joining

    def _wanted_online(self, uuid, plan):
        st = self.acks[uuid]
        if not st.may_shrink:
            return st.vcpus
        return max(1, min(st.vcpus, plan.vms[uuid].online_vcpus))

    def _collect_answers(self, uuids, now, failed, fallbacks):
        for uuid in uuids:
            st = self.acks[uuid]
            if not st.waiting:
                continue
            try:
                answered = self.driver.acknowledged(uuid, st.seq)
            except base.DriverError as exc:
                self.errors['acknowledged'] += 1
                failed[uuid] = 'acknowledgement: %s' % exc
                answered = False
            if answered:
                st.acknowledged(now)
            elif st.overdue(now, self.ack_timeout):
                target = st.target
                backoff = st.missed(now)
                self.rollbacks += 1
                fallbacks.append(uuid)
                failed[uuid] = ('no acknowledgement of %d vCPUs within '
                                '%.1f s: host-only for %.0f s'
                                % (target, self.ack_timeout, backoff))
                try:
                    # Every vCPU back; no answer is waited for.
                    self.driver.set_vcpu_target(uuid, st.vcpus)
                except base.DriverError:
                    self.errors['set_vcpu_target'] += 1

    def _send(self, uuid, target, now, failed):
        st = self.acks[uuid]
        try:
            seq = self.driver.set_vcpu_target(uuid, target)
        except base.DriverError as exc:
            self.errors['set_vcpu_target'] += 1
            failed[uuid] = 'target %d: %s' % (target, exc)
            return 0
        if seq is None:             # the guest has no channel after all
            st.state = acks_mod.AckState.NO_CHANNEL
            return 0
        st.sent(target, seq, now)
        return 1

    def _wait(self, waiting, deadline):
        left = dict(waiting)
        while left:
            for uuid, seq in list(left.items()):
                try:
                    if self.driver.acknowledged(uuid, seq):
                        del left[uuid]
                except base.DriverError:
                    del left[uuid]
            if not left or self.clock() >= deadline:
                return
            self.sleep(0.005)

    def _pin(self, key, pool, cpus, failed):
        """Pin; ``pool`` None narrows within the pinning's own pools."""
        return self._pin_all([(key, pool, cpus)], failed)

    def _pin_all(self, pins, failed):
        """Make ``pins``, ``(key, pool, cpus)`` as :meth:`_pin`'s, at once.

        The pins of a pass (the narrows, a round of widens) are each
        decided on the ledger before any of them is made: none depends
        on another's outcome, so the driver may hand them to libvirt
        together. Until its outcome is known, each pin beyond the CPUs
        its pinning holds is held in the ledger as failed (its old and
        new CPUs), which covers its threads whichever of the calls have
        landed. Returns the pins made.
        """
        if self.managed_cpus is not None:
            for (uuid, kind), _, cpus in pins:
                if not cpus <= self.managed_cpus:
                    raise EnforcementError(
                        'refusing to pin %s of %s to unmanaged CPUs %s'
                        % (kind, uuid, sorted(cpus - self.managed_cpus)))
        calls, before = [], {}
        for key, pool, cpus in pins:
            entry = self.ledger.get(key)
            # A narrow of pins seen lands inside them: the next agent
            # reads them. Any other pin must be on record before it is
            # made.
            if not (entry.exact and cpus <= entry.cpus) and \
                    not self.in_flight.cover(key, cpus):
                failed[key[0]] = ('%s pin withheld: the in-flight pin '
                                  'record cannot be written (%s)'
                                  % (key[1], self.in_flight.error))
                continue
            if pool is not None and not cpus <= entry.cpus:
                before[key] = entry
                self.ledger.failed(key, pool, cpus)
            calls.append((key, pool, cpus))
        outcomes = self.driver.pin_many(
            [(uuid, kind, cpus) for (uuid, kind), _, cpus in calls])
        made = 0
        for ((uuid, kind), pool, cpus), error in zip(calls, outcomes):
            if error is not None:
                self.errors[base.PIN_METHODS[kind]] += 1
                failed[uuid] = '%s pin: %s' % (kind, error)
                # A pin not made (GuestBusy) left the threads where they
                # were.
                if isinstance(error, base.GuestBusy) and \
                        (uuid, kind) in before:
                    self.ledger.restore((uuid, kind), before[(uuid, kind)])
                continue
            self.in_flight.returned(uuid)
            if pool is None:
                self.ledger.narrowed((uuid, kind), cpus)
            else:
                self.ledger.succeeded((uuid, kind), pool, cpus)
            made += 1
        return made

    def held_cpus(self, uuid):
        """(vCPU CPUs, emulator CPUs) the guest's threads may run on.

        None for a guessed pinning (its pins not read, or an earlier
        agent's calls may still land on it): where it is is not known,
        and the ledger holds its CPUs from the other pools all the same.
        """
        return tuple(entry.cpus if entry is not None and not entry.guessed
                     else frozenset()
                     for entry in (self.ledger.get((uuid, kind))
                                   for kind in (VCPU, EMULATOR)))

    def placed_cpus(self, uuid):
        """(vCPU CPUs, emulator CPUs) where the agent's pins put the guest.

        The parts of its pinnings in its own pool, the idle pool or the
        emulator pool: its threads may sit there whatever the plan made
        of those CPUs since. Not parts found as they are (they may be
        every CPU), nor at idle priority (every CPU by design), nor a
        guessed pinning's.
        """
        placed = (ledger_mod.vm_pool(uuid), ledger_mod.SHARED,
                  ledger_mod.EMULATOR)
        return tuple(
            frozenset().union(*[cpus for pool, cpus in entry.parts
                                if pool in placed])
            if entry is not None and not entry.guessed else frozenset()
            for entry in (self.ledger.get((uuid, kind))
                          for kind in (VCPU, EMULATOR)))

    def own_pool_cpus(self, uuid):
        """The CPUs of the guest's own vCPU pool its vCPUs may run on.

        The part of its vCPU pinning the agent gave it as its own cores
        (empty if none): whole cores of that guest alone, at most its
        flavor's.
        """
        entry = self.ledger.get((uuid, VCPU))
        if entry is None:
            return frozenset()
        return frozenset().union(*[cpus for pool, cpus in entry.parts
                                   if pool == ledger_mod.vm_pool(uuid)])

    # -- checks between passes -----------------------------------------------
    def check_guest(self, uuid, online):
        """Notice a guest that no longer keeps its target online.

        A guest reset or a reloaded module brings every vCPU back without
        the agent asking. If what the guest reports differs from its last
        answered target for longer than ``ack_timeout``, the agent assumes
        every vCPU online and sends its target again. Returns True then.
        """
        st = self.acks.get(uuid)
        if st is None or st.waiting or st.online is None or \
                online == st.online:
            return False
        if self.clock() - st.acked_at < self.ack_timeout:
            return False
        st.online = None
        return True

    def check_drift(self, uuids=None):
        """Compare live pins with the ledger; re-adopt what drifted.

        ``uuids``: the guests to check (default: every one).

        The live pins are libvirt's and the kernel's of every vCPU thread
        present. Returns the uuids whose pins someone else changed: they
        are recorded as wide as both, and the next apply pins them to the
        plan again (``pin_repairs`` counts them).
        """
        drifted = []
        due = []
        for uuid in sorted(self.guests if uuids is None else uuids):
            vcpu = self.ledger.get((uuid, VCPU))
            emulator = self.ledger.get((uuid, EMULATOR))
            if vcpu is None or emulator is None or \
                    not _known(vcpu.pool) or not _known(emulator.pool):
                continue
            due.append(uuid)
        # Read at once: one hand-off to the libvirt call thread for all.
        live = self.driver.read_pins_many(due)
        for uuid in due:
            vcpu = self.ledger.get((uuid, VCPU))
            emulator = self.ledger.get((uuid, EMULATOR))
            found = live.get(uuid)
            if found is None or isinstance(found, Exception):
                continue
            vcpus, live_emulator = found
            if vcpus != {vcpu.cpus} or live_emulator != emulator.cpus:
                drifted.append(uuid)
                self.pin_repairs += 1
                sets = [s for s in vcpus if s]
                # Held where the threads are and were; a narrow stays
                # where every thread was read (as at adoption).
                self.ledger.adopt((uuid, VCPU), frozenset().union(*sets) |
                                  vcpu.cpus, seen=_common(sets))
                live_emulator = frozenset(live_emulator or ())
                self.ledger.adopt((uuid, EMULATOR),
                                  live_emulator | emulator.cpus,
                                  seen=live_emulator or None)
        return drifted

    def ack_state(self, uuid):
        st = self.acks.get(uuid)
        return st.state if st is not None else None


def _common(sets):
    """The CPUs in every one of ``sets`` (None if there is none)."""
    return frozenset.intersection(*sets) if sets else None


def _pooled(sets, every):
    """The CPUs of the pin ``sets`` that may be a pool's.

    Not those of a set over every managed CPU (``every``): no pool but
    the floating one is that wide. An empty set (None) was not read.
    """
    return frozenset().union(*[cpus & every if every else cpus
                               for cpus in sets if cpus and
                               (not every or not cpus >= every)])


def _on_target(entry, target):
    """Whether a pinning is exactly where ``target`` (pool, CPUs) wants it.

    Such a pinning (exact, so neither guessed nor narrower where seen)
    is neither narrowed nor widened nor recorded in flight.
    """
    pool, cpus = target
    return entry.exact and entry.pool == pool and (
        entry.cpus is cpus or entry.cpus == cpus)


def _known(pool):
    return pool is not None and not pool.startswith('unknown:')


def _vcpus_first(item):
    (uuid, kind), _ = item
    return kind != VCPU, uuid
