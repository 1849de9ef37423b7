"""A libvirtd that hangs before the agent's first plan costs no plan.

When a call on the connection hangs (libvirtd busy or wedged), every
guest counts as busy: its threads cannot be moved until libvirtd
answers, and the plan keeps the cores they may run on. Guests as Nova
starts them float over every managed CPU, and before the first plan the
emulator and idle pools are every core: those threads must hold nothing
(they would leave no core for the idle pool), and the first plan must
pass the controller's invariants. Over the libvirt driver and a fake
libvirt whose domain listing blocks.
"""

import threading
import time

from ufo_agent.controller import ControllerConfig
from ufo_agent.service import loop
from ufo_agent.service import settings as settings_mod
from ufo_tools.fakes.fakehost import nova_xml

GUESTS = {'8f1d3c2e-1111-4a5b-9c0d-2e3f4a5b6c7d': 'instance-00000001',
          '3b7e0a52-6c1d-4f0e-a9b8-7d6c5b4a3f2e': 'instance-00000002'}
TIMEOUT = 0.1


def test_a_first_tick_under_a_hung_libvirtd_plans_an_idle_pool(
        host, hv, monkeypatch):
    monkeypatch.setattr('os.cpu_count', lambda: 8)
    for pid, (uuid, name) in enumerate(sorted(GUESTS.items()), start=500):
        dom = host.boot(uuid, nova_xml(uuid, name=name, vcpus=2,
                                       cpuset='0-7'),
                        pid=pid, vcpus=2, name=name)
        # As Nova starts it: every thread on <vcpu cpuset>.
        dom.vcpu_pins = {i: (True,) * 8 for i in range(2)}
        dom.emulator_pin = (True,) * 8
    driver = host.driver(call_timeout=TIMEOUT)
    now = [1000.0]
    agent = loop.Agent(driver, frozenset(range(8)), ControllerConfig(),
                       settings_mod.AgentSettings(),
                       clock=lambda: now[0])
    agent.start()
    assert set(agent.guests) == set(GUESTS)
    gate = hv.list_block = threading.Event()
    try:
        now[0] += 1.0
        plan = agent.tick()
        # The listing hung: every guest is busy, none holds a core.
        assert driver.busy_guests() == frozenset(GUESTS)
        assert agent.invariant_violations == 0
        assert agent.failed_ticks == 0
        assert plan is not None and plan.idle_cores
        for uuid in GUESTS:
            assert 'earlier call has not returned' in \
                agent.status[uuid].reason
    finally:
        gate.set()
    give_up = time.monotonic() + 5.0
    while driver._host.deadlines.outstanding():
        assert time.monotonic() < give_up, 'the listing never returned'
        time.sleep(0.01)
