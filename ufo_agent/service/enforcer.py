"""Carry out a HostPlan through the driver, in an order that is safe.

Order matters (paper section 4.6, and the isolation promise):

1. guests that lose vCPUs are told first, and the enforcer waits for
   their acknowledgements (all at once, up to ``ack_timeout``);
2. pins narrow: every guest and the emulator threads give up the CPUs
   they lose, so no CPU is ever in two pools;
3. pins widen to the new sets;
4. guests that gain vCPUs are told last (acknowledged on a later tick).

A guest that does not acknowledge a shrink in time keeps all its vCPUs:
its target is rolled back to its flavor size and it is reported. Its pins
still narrow, because the host can always enforce pins, and another guest
may already own the CPUs it gave up; the guest is then no worse off than
under Nova's default shared policy. Nothing is rewritten that has not
changed, and everything is written again after a guest (re)starts or when
the driver reports it lost track.
"""

import dataclasses
import logging
import time

from ufo_agent.driver import base

LOG = logging.getLogger(__name__)


@dataclasses.dataclass
class _Applied:
    vcpu_cpus: frozenset = None
    emulator_cpus: frozenset = None
    target: int = None
    target_seq: int = None
    target_sent_at: float = 0.0


@dataclasses.dataclass(frozen=True)
class Outcome:
    """What one :meth:`Enforcer.apply` did."""

    pinned: int
    targets: int
    failed: dict          # uuid -> reason


class Enforcer:
    def __init__(self, driver, ack_timeout=2.0, clock=time.monotonic,
                 sleep=time.sleep):
        self.driver = driver
        self.ack_timeout = ack_timeout
        self.clock = clock
        self.sleep = sleep
        self.applied = {}
        self.vcpus = {}           # uuid -> flavor vCPUs (rollback target)
        self.channel = {}         # uuid -> has a guest channel

    def track(self, guest):
        self.vcpus[guest.uuid] = guest.vcpus
        self.channel[guest.uuid] = guest.has_channel

    def invalidate(self, uuid):
        """Forget what was applied: the next apply writes everything."""
        self.applied.pop(uuid, None)

    def forget(self, uuid):
        self.applied.pop(uuid, None)
        self.vcpus.pop(uuid, None)
        self.channel.pop(uuid, None)

    def apply(self, plan, guest_online=None):
        """Enforce ``plan``.

        ``guest_online`` maps uuid to the vCPU count the guest reports
        online (used to see who shrinks).
        """
        guest_online = guest_online or {}
        failed = {}
        pinned = targets = 0
        uuids = [u for u in sorted(plan.vms) if u in self.vcpus]
        state = {u: self.applied.setdefault(u, _Applied()) for u in uuids}

        def want_target(uuid):
            if not self.channel.get(uuid):
                return None
            return plan.vms[uuid].online_vcpus

        # 1. Shrinking guests first; wait for all of them together.
        waiting = {}
        for uuid in uuids:
            target, st = want_target(uuid), state[uuid]
            if target is None or target == st.target:
                continue
            current = guest_online.get(uuid) or st.target or \
                self.vcpus[uuid]
            if target < current:
                seq = self._send(uuid, target, st, failed)
                targets += seq is not None
                if seq is not None:
                    waiting[uuid] = seq
        self._wait(waiting, failed)
        for uuid in waiting:
            if uuid in failed:
                self._send(uuid, self.vcpus[uuid], state[uuid], {})

        # 2. Narrow, then move the owners that keep nothing of their old
        # set, 3. widen: no CPU is ever pinned to two pools at once.
        for step in ('narrow', 'move', 'widen'):
            for uuid in uuids:
                vm, st = plan.vms[uuid], state[uuid]
                for kind, new, old in (
                        ('vcpu', vm.cpus, st.vcpu_cpus),
                        ('emulator', plan.emulator_cpus, st.emulator_cpus)):
                    cpus = _step_target(step, old, new)
                    if cpus is not None and \
                            self._pin(uuid, kind, cpus, st, failed):
                        pinned += 1

        # 4. Growing guests last; their acknowledgement is checked later.
        for uuid in uuids:
            target, st = want_target(uuid), state[uuid]
            if uuid in failed or target is None or target == st.target:
                continue
            if self._send(uuid, target, st, failed) is not None:
                targets += 1
        return Outcome(pinned, targets, failed)

    def check_guest(self, uuid, online):
        """Notice a guest that no longer keeps its target online.

        A guest reset or a reloaded module brings every vCPU back without
        the agent asking. If what the guest reports differs from the last
        target for longer than ``ack_timeout``, the target is sent again on
        the next apply. Returns True when it will be.
        """
        st = self.applied.get(uuid)
        if st is None or st.target is None or online == st.target:
            return False
        if self.clock() - st.target_sent_at < self.ack_timeout:
            return False
        st.target = st.target_seq = None
        return True

    def check_drift(self):
        """Compare live pins with what was applied; forget what drifted.

        Returns the uuids whose pins someone else changed: the next apply
        writes them again.
        """
        drifted = []
        for uuid, st in sorted(self.applied.items()):
            if st.vcpu_cpus is None or st.emulator_cpus is None:
                continue
            try:
                vcpus, emulator = self.driver.read_pins(uuid)
            except base.DriverError:
                continue
            if vcpus != {st.vcpu_cpus} or emulator != st.emulator_cpus:
                drifted.append(uuid)
                self.invalidate(uuid)
        return drifted

    def pending(self):
        """Guests whose last target is unacknowledged past the timeout."""
        late = {}
        now = self.clock()
        for uuid, st in self.applied.items():
            if st.target_seq is None:
                continue
            if now - st.target_sent_at < self.ack_timeout:
                continue
            try:
                if not self.driver.acknowledged(uuid, st.target_seq):
                    late[uuid] = st.target
            except base.DriverError:
                late[uuid] = st.target
        return late

    def _send(self, uuid, target, st, failed):
        try:
            seq = self.driver.set_vcpu_target(uuid, target)
        except base.DriverError as exc:
            failed[uuid] = 'target %d: %s' % (target, exc)
            return None
        st.target, st.target_seq = target, seq
        st.target_sent_at = self.clock()
        return seq

    def _wait(self, waiting, failed):
        deadline = self.clock() + self.ack_timeout
        next_beat = self.clock() + 0.5
        left = dict(waiting)
        while left:
            if self.clock() >= next_beat:
                # Guests must not take a slow wait for a dead host.
                self.driver.heartbeat()
                next_beat = self.clock() + 0.5
            for uuid, seq in list(left.items()):
                try:
                    if self.driver.acknowledged(uuid, seq):
                        del left[uuid]
                except base.DriverError as exc:
                    failed[uuid] = 'acknowledgement: %s' % exc
                    del left[uuid]
            if not left or self.clock() >= deadline:
                break
            self.sleep(0.005)
        for uuid in left:
            failed[uuid] = ('no acknowledgement of %d vCPUs within %.1f s'
                            % (self.applied[uuid].target, self.ack_timeout))

    def _pin(self, uuid, kind, cpus, st, failed):
        try:
            if kind == 'vcpu':
                self.driver.pin_vcpus(uuid, cpus)
                st.vcpu_cpus = cpus
            else:
                self.driver.pin_emulator(uuid, cpus)
                st.emulator_cpus = cpus
        except base.DriverError as exc:
            failed[uuid] = '%s pin: %s' % (kind, exc)
            # Unknown state now: write it again next time.
            if kind == 'vcpu':
                st.vcpu_cpus = None
            else:
                st.emulator_cpus = None
            return False
        return True


def _step_target(step, old, new):
    """The CPUs to pin in ``step``, or None for nothing to do."""
    if old == new:
        return None
    if step == 'widen':
        return new
    if old is None:
        return None
    kept = old & new
    if step == 'narrow':
        return kept if kept and kept != old else None
    return new if not kept else None
