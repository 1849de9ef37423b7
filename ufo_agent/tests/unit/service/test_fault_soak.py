"""The fault-injection soak, shortened: the real agent under faults.

:mod:`ufo_agent.tests.soak` runs the agent (loop, controller, enforcer,
sampler, the libvirt driver with its call deadlines) over a fake libvirt
that fails, hangs and half-applies calls, with guests that appear,
pause, resize, migrate, lose vCPUs and lie on their pages, and an agent
that stops, crashes and starts again. After every step the host's actual
affinities must keep the promises (doc/source/agent.rst, "The
fault-injection soak"); at the end a stop and ``--restore`` must give
every guest back exactly.

A fixed seed, no example database, no shrinking: the same steps on every
run. The full run and minimal failing examples come from
``tox -e soak`` (``python -m ufo_agent.tests.soak``).
"""

import logging

from ufo_agent.tests.soak import machine
from ufo_agent.tests.soak import world

SEED = 61
EXAMPLES = 10
STEPS = 50
# Small, so that a hung call costs little; still far above what a call
# that does not hang takes.
CALL_TIMEOUT = 0.1


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
    soak = world.World(CALL_TIMEOUT)
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
