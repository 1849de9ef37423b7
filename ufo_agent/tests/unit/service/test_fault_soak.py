"""The fault-injection soak, shortened: the real agent under faults.

:mod:`ufo_agent.tests.soak` runs the agent (loop, controller, enforcer,
sampler, the libvirt driver with its call deadlines) over a fake libvirt
that fails, hangs and half-applies calls, with guests that appear,
pause, resize, migrate, lose vCPUs and lie on their pages, and an agent
that stops, crashes and starts again. After every step the host's actual
affinities must keep the promises (doc/source/agent-safety.rst, "The
fault-injection soak"); at the end a stop and ``--restore`` must give
every guest back exactly.

A fixed seed, no example database, no shrinking: the same steps on every
run. The full run and minimal failing examples come from
``tox -e soak`` (``python -m ufo_agent.tests.soak``).
"""

import logging
import threading

from ufo_agent.service import ledger as ledger_mod
from ufo_agent.tests.soak import machine
from ufo_agent.tests.soak import world

SEED = 61
EXAMPLES = 10
STEPS = 50
# Small, so that a hung call costs little; still far above what a call
# that does not hang takes.
CALL_TIMEOUT = 0.1
# The scenarios below assert which calls time out: a call that does not
# hang took 0.3 s on a loaded 2-core machine, so they wait longer.
SCENARIO_CALL_TIMEOUT = 2.0


def test_the_agents_promises_hold_under_injected_faults(caplog):
    caplog.set_level(logging.ERROR)
    before = world.STATS['ticks']
    machine.run(SEED, EXAMPLES, STEPS, CALL_TIMEOUT, shrink=False)
    # It ran: the guests lived, the agent ticked and was restarted.
    assert world.STATS['ticks'] - before > EXAMPLES * STEPS // 2


def test_a_guest_binding_a_page_left_by_another_host_keeps_its_vcpus():
    # A guest migrating in brings the source agent's target (3 of 4
    # vCPUs). It restarts here before any agent adopted it: its module
    # binds that page, whose heartbeat nobody beats, and must not take
    # the dead writer's target up (the checker fails a shrink on a
    # target the running agent did not send).
    soak = world.World(SCENARIO_CALL_TIMEOUT)
    try:
        soak.start_agent()
        spec = soak.define(world.SHARED, 4, carried_pins=frozenset({7}))
        inc = soak.boot(spec, migrating_pins=frozenset({7}),
                        migrating_page=(3, 3))
        soak.tick()
        soak.stop(inc)
        again = soak.boot(spec)
        soak.tick()
        soak.raise_violations()
        assert again.module.bound and again.module.online == 4
        # Once the agent beats its heartbeat, targets count again.
        for _ in range(3):
            soak.tick()
            soak.raise_violations()
        assert soak.page_target(again) == 4
    finally:
        soak.close()


def test_a_release_landing_after_the_next_agent_started_is_fresh():
    # A stopping agent's release of a parked guest waits behind a stuck
    # QEMU job and lands, putting a vCPU back on its definition, while
    # the next agent has parked the other guest on the idle CPUs. The
    # thread is where libvirt's definition puts it, as after any
    # release: the running agent has its grace to place it (it holds
    # the guest's recorded CPUs from every pool meanwhile), not a
    # thread of a pool that spills over the idle CPUs.
    soak = world.World(SCENARIO_CALL_TIMEOUT)
    try:
        soak.start_agent()
        parked = soak.boot(soak.define(world.SHARED, 2))
        other = soak.boot(soak.define(world.SHARED, 1))
        for _ in range(8):
            soak.tick()
            soak.raise_violations()
        soak.pause(parked)
        soak.pause(other)
        for _ in range(4):
            soak.tick()
            soak.raise_violations()
        plan = soak.run_.plan
        assert plan.vms[parked.uuid].cpus == plan.idle_cpus
        assert world.as_set(parked.dom.vcpu_pins[0]) == plan.idle_cpus

        parked.dom.script['pinVcpuFlags'].append('hang')
        parked.dom.late = 'apply'
        assert soak.stop_agent() == [parked.uuid]
        soak.raise_violations()
        soak.start_agent()
        for _ in range(3):
            soak.tick()
            soak.raise_violations()
        assert world.as_set(other.dom.vcpu_pins[0]) == \
            soak.run_.plan.idle_cpus
        # The new agent took the release's CPUs from the record: the
        # other guest joined no pool over them, it only narrowed.
        ledger = soak.run_.agent.enforcer.ledger
        held = ledger.get((parked.uuid, 'vcpu'))
        assert held.guessed and held.cpus == world.MANAGED
        for kind in ('vcpu', 'emulator'):
            key = (other.uuid, kind)
            assert ledger.get(key).pool == ledger_mod.unknown(key)
        # libvirtd runs the old release, then the new agent's calls.
        soak.unstick(parked.dom, 'apply')
        soak.raise_violations()
        for _ in range(world.GRACE_TICKS + 2):
            soak.tick()
            soak.raise_violations()
        # The new agent placed it once its own pins could land.
        assert world.as_set(parked.dom.vcpu_pins[0]) <= \
            soak.run_.plan.shared_cpus
    finally:
        soak.close()


def test_a_guest_stops_while_libvirtd_hangs_a_listing():
    # The agent's pin call on a paused guest waits behind its stuck
    # QEMU, and its domain listing waits for a stuck libvirtd. The
    # guest's QEMU ends: its call returns, the listing does not, and
    # the guest is gone from the host at once.
    soak = world.World(SCENARIO_CALL_TIMEOUT)
    try:
        soak.start_agent()
        inc = soak.boot(soak.define(world.SHARED, 2))
        soak.boot(soak.define(world.SHARED, 1))
        for _ in range(6):
            soak.tick()
            soak.raise_violations()
        inc.dom.script['pinVcpuFlags'].append('hang')
        soak.pause(inc)
        soak.tick()
        assert inc.dom.stuck is not None and inc.dom.waiters
        soak.libvirtd_stuck = threading.Event()
        soak.libvirtd_hold = soak.ticks + 100
        soak.tick()
        assert any(not e.is_set() for e in soak.libvirtd_waiters)
        soak.stop(inc)
        assert inc.uuid not in soak.incs
        soak.unstick_libvirtd()
        for _ in range(3):
            soak.tick()
        soak.raise_violations()
    finally:
        soak.close()


def test_guests_parked_together_while_their_pins_hang_share_the_idle_pool():
    # Three guests on cores of their own go idle and are parked at
    # once: the pin calls that move two of them onto the idle pool hang
    # (their threads stay on their old cores, which the plan made
    # idle), the third one's lands over those cores. All three are in
    # the idle pool: each of the two hung ones lies in it with its
    # outstanding call, and is alone there but for the others parked.
    soak = world.World(SCENARIO_CALL_TIMEOUT)
    try:
        soak.start_agent()
        hung_a, hung_b, moved = [soak.boot(soak.define(world.SHARED, 1))
                                 for _ in range(3)]
        for _ in range(4):
            soak.tick()
            soak.raise_violations()
        plan = soak.run_.plan
        assert all(plan.vms[inc.uuid].cores
                   for inc in (hung_a, hung_b, moved))
        for inc in (hung_a, hung_b):
            inc.dom.script['pinVcpuFlags'].append('hang')
            inc.dom.late = 'apply'
        for _ in range(15):
            soak.tick()
            soak.raise_violations()
            if hung_a.dom.stuck is not None:
                break
        plan = soak.run_.plan
        assert not any(vm.cores for vm in plan.vms.values())
        assert hung_b.dom.stuck is not None
        assert world.as_set(moved.dom.vcpu_pins[0]) == plan.idle_cpus
        for _ in range(2):
            soak.tick()
            soak.raise_violations()
        for inc in (hung_a, hung_b):
            soak.unstick(inc.dom, 'apply')
            soak.raise_violations()
            assert world.as_set(inc.dom.vcpu_pins[0]) == plan.idle_cpus
    finally:
        soak.close()


def test_an_agent_restarted_often_places_a_guest_whose_shrinks_wait():
    # A deaf guest's unanswered probe takes each tick's wait for
    # answers, so the other guests' shrinks are answered a tick late.
    # The agent is stopped (its guests given back on their definitions)
    # and then crashes after every tick: each new agent finds the big
    # guest on every managed CPU, over the others' cores, and shrinks
    # it again. It must be placed all the same within its grace.
    soak = world.World(SCENARIO_CALL_TIMEOUT)
    try:
        for module in ('honest', 'deaf', 'honest', 'honest', 'honest'):
            soak.boot(soak.define(world.SHARED, 1, module=module))
        big = soak.boot(soak.define(world.SHARED, 4))
        soak.start_agent()
        for _ in range(15):
            soak.tick()
            soak.raise_violations()
        soak.stop_agent()
        soak.restore_host()
        soak.raise_violations()
        soak.start_agent()
        for restarts in range(world.GRACE_TICKS + 1):
            if restarts:
                soak.crash_agent()
                soak.start_agent()
            soak.tick()
            soak.raise_violations()
        vcpus = world.as_set(big.dom.vcpu_pins[0])
        assert vcpus <= soak.run_.plan.vms[big.uuid].cpus
    finally:
        soak.close()


def test_guests_no_release_reached_are_placed_by_the_next_agent():
    # The agent stops while libvirt fails every domain lookup: no guest
    # is given back, and each one's release (its definition, every
    # managed CPU) may still land. The next agent holds those CPUs for
    # every guest from every other, so no pinning may widen anywhere
    # until one of its own pins on the guest returned. A guest that
    # gets busy must still get its cores, and a vCPU plugged back its
    # pins.
    soak = world.World(SCENARIO_CALL_TIMEOUT)
    try:
        soak.start_agent()
        guests = [soak.boot(soak.define(world.SHARED, vcpus))
                  for vcpus in (3, 3, 1)]
        for _ in range(8):
            soak.tick()
            soak.raise_violations()
        soak.hv.lookup_error = world.lv.libvirtError(
            'internal error: client socket is closed')
        assert sorted(soak.stop_agent()) == sorted(g.uuid for g in guests)
        soak.raise_violations()
        soak.hv.lookup_error = None
        soak.start_agent()
        assert soak.run_.agent.enforcer.in_flight.inherited == \
            {g.uuid for g in guests}
        guests[1].demand = 3
        assert soak.unplug(guests[0])
        soak.tick()
        soak.raise_violations()
        assert soak.plug(guests[0])
        for _ in range(world.GRACE_TICKS + 2):
            soak.tick()
            soak.raise_violations()
        plan = soak.run_.plan
        assert len(plan.vms[guests[1].uuid].cpus) == 4
        for inc in guests:
            for pins in inc.dom.vcpu_pins.values():
                assert world.as_set(pins) == plan.vms[inc.uuid].cpus
        assert not soak.run_.agent.enforcer.in_flight.inherited
    finally:
        soak.close()
