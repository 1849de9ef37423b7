"""Deadlines on libvirt calls: a hung domain costs one deadline, not more.

The fake libvirt's gates stand for a QEMU whose monitor does not answer
(the call waits until the gate opens) and for a stuck libvirtd.
"""

import threading
import time

import pytest

from ufo_agent.controller import ControllerConfig
from ufo_agent.driver import base
from ufo_agent.driver.libvirt import deadline
from ufo_agent.service import loop
from ufo_agent.service import settings as settings_mod
from ufo_tools.fakes.fakehost import nova_xml

U1 = '8f1d3c2e-1111-4a5b-9c0d-2e3f4a5b6c7d'
U2 = '8f1d3c2e-2222-4a5b-9c0d-2e3f4a5b6c7d'
TIMEOUT = 0.3


def _bits(cpus, width=8):
    return tuple(cpu in cpus for cpu in range(width))


@pytest.fixture
def gates():
    """Events that tests block calls on; all opened at the end."""
    made = []

    def gate():
        made.append(threading.Event())
        return made[-1]

    yield gate
    for event in made:
        event.set()


@pytest.fixture
def two(host, hv):
    """Two managed guests, pinned to every managed CPU."""
    doms = []
    for uuid, pid, name in ((U1, 500, 'instance-1'), (U2, 600, 'instance-2')):
        dom = host.boot(uuid, nova_xml(uuid, name=name, cpuset='2-7'),
                        pid=pid, name=name)
        dom.vcpu_pins = {0: _bits(range(8)), 1: _bits(range(8))}
        dom.emulator_pin = _bits(range(8))
        doms.append(dom)
    driver = host.driver(call_timeout=TIMEOUT)
    assert sorted(g.uuid for g in driver.guests()) == [U1, U2]
    return driver, doms


def _wait_until(pred, timeout=5.0):
    deadline_ = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < deadline_, 'condition not reached'
        time.sleep(0.01)


def _timed(func, *args):
    start = time.monotonic()
    try:
        func(*args)
    except base.DriverError as exc:
        return time.monotonic() - start, exc
    return time.monotonic() - start, None


def test_a_hung_call_times_out_and_its_domain_is_skipped_until_it_returns(
        two, hv, gates, monkeypatch):
    monkeypatch.setattr('os.cpu_count', lambda: 8)
    driver, (d1, d2) = two
    gate = d1.block['pinVcpuFlags'] = gates()
    took, exc = _timed(driver.pin_vcpus, U1, frozenset({2}))
    assert isinstance(exc, deadline.CallTimedOut)
    assert 'pin vCPU 0 of %s timed out after 0.3 s' % U1 in str(exc)
    assert TIMEOUT <= took < TIMEOUT + 1.0
    # Marked: calls on it fail at once and never reach libvirt.
    reached = len(hv.blocked)
    for call in (driver.pin_vcpus, driver.pin_emulator):
        took, exc = _timed(call, U1, frozenset({3}))
        assert isinstance(exc, deadline.CallSkipped)
        assert 'earlier call has not returned (pin vCPU 0 of %s)' % U1 \
            in str(exc)
        assert took < 0.1
    took, exc = _timed(driver.read_pins, U1)
    assert isinstance(exc, deadline.CallSkipped) and took < 0.1
    # Giving it back (on stop) does not wait for it either.
    took, exc = _timed(driver.release, U1)
    assert 'skipped while an earlier call has not returned' in str(exc)
    assert took < 0.1
    assert len(hv.blocked) == reached
    # The other guest carries on.
    driver.pin_vcpus(U2, frozenset({4}))
    assert d2.vcpu_pins == {0: _bits({4}), 1: _bits({4})}
    # The hung call returns: the guest is called again.
    gate.set()
    _wait_until(lambda: driver._host.deadlines.busy(U1) is None)
    del d1.block['pinVcpuFlags']
    driver.pin_vcpus(U1, frozenset({2}))
    assert d1.vcpu_pins == {0: _bits({2}), 1: _bits({2})}
    assert driver._host.deadlines.timeouts == 1


def test_the_connection_of_a_hung_call_is_retired_then_closed(
        two, hv, gates):
    """libvirt's client answers calls late while another one is out."""
    driver, (d1, _) = two
    first = hv.conn
    gate = d1.block['vcpuPinInfo'] = gates()
    with pytest.raises(deadline.CallTimedOut):
        driver.read_pins(U1)
    # Later calls go over a new connection; the old one waits for its call.
    driver.read_pins(U2)
    assert len(hv.connections) == 2 and hv.conn is not first
    assert not first.closed
    gate.set()
    _wait_until(lambda: driver._host.deadlines.busy(U1) is None)
    driver.read_pins(U2)
    assert first.closed and not hv.conn.closed
    assert len(hv.connections) == 2


def test_adoption_stops_for_the_tick_when_its_connection_is_retired(
        host, hv, gates):
    driver = host.driver(call_timeout=TIMEOUT)
    d1 = host.boot(U1, nova_xml(U1, name='instance-1'), pid=500,
                   name='instance-1')
    host.boot(U2, nova_xml(U2, name='instance-2'), pid=600,
              name='instance-2')
    gate = d1.block['XMLDesc'] = gates()
    took, exc = _timed(driver.guests)
    assert exc is None and took < TIMEOUT + 1.0
    # The second domain was not asked over the retired connection.
    assert hv.blocked == [(U1, 'XMLDesc')]
    assert [g.uuid for g in driver.guests()] == [U2]
    gate.set()
    _wait_until(lambda: driver._host.deadlines.busy(U1) is None)
    del d1.block['XMLDesc']
    assert sorted(g.uuid for g in driver.guests()) == [U1, U2]


def test_a_stuck_libvirtd_costs_one_deadline_then_calls_fail_at_once(
        two, hv, gates):
    driver, _ = two
    gate = hv.list_block = gates()
    took, exc = _timed(driver.guests)
    assert isinstance(exc, deadline.CallTimedOut)
    assert 'list domains timed out' in str(exc)
    assert took < TIMEOUT + 1.0
    # Every call waits for the connection: none reaches libvirt.
    for call, args in ((driver.guests, ()), (driver.read_pins, (U1,)),
                       (driver.pin_emulator, (U2, frozenset({3})))):
        took, exc = _timed(call, *args)
        assert isinstance(exc, deadline.CallSkipped), call
        assert took < 0.1
    assert hv.blocked == [('listAllDomains',)]
    gate.set()
    hv.list_block = None
    _wait_until(lambda: not driver._host.deadlines.outstanding())
    assert sorted(g.uuid for g in driver.guests()) == [U1, U2]


def test_a_connection_opened_after_its_deadline_is_closed(host, hv, gates):
    gate = hv.open_block = gates()
    with pytest.raises(base.DriverError, match='cannot connect to '
                       'qemu:///system: connect to qemu:///system timed '
                       'out'):
        host.driver(call_timeout=TIMEOUT)
    gate.set()
    _wait_until(lambda: hv.connections and hv.connections[0].closed)


def test_existence_is_assumed_while_the_domain_hangs(two, hv, gates):
    driver, (d1, _) = two
    d1.running = False
    hv.lookup_error = None
    gate = gates()
    # A lookup that hangs: the domain is not reported undefined.
    real = hv.conn.lookupByUUIDString

    def lookup(uuid):
        hv.wait_gate(gate, ('lookup', uuid))
        return real(uuid)

    hv.conn.lookupByUUIDString = lookup
    assert driver._host.exists(U1) is True
    gate.set()


def test_a_tick_with_a_hung_guest_waits_one_deadline_and_the_others_go_on(
        two, hv, gates, monkeypatch):
    """The loop over the libvirt driver: the tick stays responsive."""
    monkeypatch.setattr('os.cpu_count', lambda: 8)
    driver, (d1, d2) = two
    clock = [100.0]
    agent = loop.Agent(driver, frozenset(range(8)), ControllerConfig(),
                       settings_mod.AgentSettings(drift_check_interval=1.0),
                       clock=lambda: clock[0])
    agent.start()

    def tick():
        clock[0] += 1.0
        start = time.monotonic()
        agent.tick()
        return time.monotonic() - start

    for _ in range(3):
        tick()
    assert set(d2.vcpu_pins.values()) == {
        _bits(agent.last_plan.vms[U2].cpus)}
    # The first guest's QEMU hangs; someone re-pins both guests.
    d1.block['pinVcpuFlags'] = d1.block['pinEmulator'] = gates()
    d1.vcpu_pins = {0: _bits(range(8)), 1: _bits(range(8))}
    d2.vcpu_pins = {0: _bits(range(8)), 1: _bits(range(8))}
    times = [tick() for _ in range(4)]
    assert max(times) < TIMEOUT + 1.0
    assert sum(t > TIMEOUT for t in times) <= 1, times
    assert agent.ticks == 7 and agent.tick_errors == 0
    # The other guest was pinned again meanwhile, inside its plan (its
    # CPUs that the hung guest may still hold wait for that guest).
    pins = set(d2.vcpu_pins.values())
    assert len(pins) == 1
    cpus = {cpu for cpu, on in enumerate(pins.pop()) if on}
    assert cpus and cpus <= agent.last_plan.vms[U2].cpus
    assert 'earlier call has not returned' in agent.status[U1].reason


def test_calls_run_together_keep_a_deadline_each(gates):
    deadlines = deadline.Deadlines(TIMEOUT)
    made = []

    def slow(name):
        time.sleep(0.6 * TIMEOUT)
        made.append(name)
        return name

    # Longer than one deadline together, none alone.
    assert deadlines.run_each('k', [(n, slow, (n,)) for n in 'abc']) == \
        ['a', 'b', 'c']
    assert made == ['a', 'b', 'c'] and deadlines.timeouts == 0

    gate = gates()
    del made[:]
    calls = [('a', made.append, ('a',)), ('b', gate.wait, ()),
             ('c', made.append, ('c',))]
    start = time.monotonic()
    with pytest.raises(deadline.CallTimedOut, match='^b timed out'):
        deadlines.run_each('k', calls)
    assert time.monotonic() - start < 3 * TIMEOUT
    assert deadlines.busy('k') == 'b'
    with pytest.raises(deadline.CallSkipped):
        deadlines.run_each('k', [('d', made.append, ('d',))])
    gate.set()
    _wait_until(lambda: deadlines.busy('k') is None)
    # Abandoned, the run made no call after the hung one.
    assert made == ['a']


def test_a_caller_that_waits_less_leaves_the_call_in_flight(gates):
    deadlines = deadline.Deadlines(10.0)
    gate = gates()
    made = []
    calls = [('a', made.append, ('a',)), ('b', gate.wait, ()),
             ('c', made.append, ('c',))]
    start = time.monotonic()
    with pytest.raises(deadline.CallInFlight, match='^b not returned'):
        deadlines.run_each('k', calls, wait=TIMEOUT)
    assert time.monotonic() - start < 3 * TIMEOUT
    # As if its deadline had passed: the key is busy until it returns.
    assert deadlines.busy('k') == 'b' and deadlines.timeouts == 1
    with pytest.raises(deadline.CallSkipped):
        deadlines.run_each('k', [('d', made.append, ('d',))])
    gate.set()
    _wait_until(lambda: deadlines.busy('k') is None)
    assert made == ['a']
    # A wait beyond the deadline is the deadline.
    gate = gates()
    with pytest.raises(deadline.CallTimedOut, match='timed out'):
        deadline.Deadlines(TIMEOUT).run_each('j', [('e', gate.wait, ())],
                                             wait=10.0)


def test_the_first_call_that_fails_ends_the_run():
    made = []

    def fail():
        raise ValueError('no')

    for timeout in (TIMEOUT, 0):
        del made[:]
        with pytest.raises(deadline.ItemFailed) as caught:
            deadline.Deadlines(timeout).run_each(
                'k', [('a', made.append, ('a',)), ('b', fail, ()),
                      ('c', made.append, ('c',))])
        assert caught.value.what == 'b'
        assert isinstance(caught.value.error, ValueError)
        assert made == ['a']


def test_a_batch_stops_at_its_first_failing_key_and_keeps_its_deadlines(
        gates):
    deadlines = deadline.Deadlines(10.0)
    gate = gates()
    made = []

    def after_a(value):
        # A generator's call depends on the value of the one before.
        made.append((yield ('a1', lambda: 'x', ())))
        yield ('a2', made.append, (value,))

    items = [('a', after_a('y')), ('b', [('b1', gate.wait, ())]),
             ('c', [('c1', made.append, ('c',))])]
    start = time.monotonic()
    outcomes = deadlines.run_batch(items, wait=TIMEOUT)
    assert time.monotonic() - start < 3 * TIMEOUT
    assert outcomes[0] == ['x', None]
    assert isinstance(outcomes[1], deadline.CallInFlight)
    assert len(outcomes) == 2 and made == ['x', 'y']
    # Its key alone is busy; the keys after it go in a batch of their own.
    assert deadlines.busy('b') == 'b1' and deadlines.busy('c') is None
    assert deadlines.run_batch(items[2:]) == [[None]]
    assert isinstance(deadlines.run_batch(items[1:2])[0],
                      deadline.CallSkipped)
    gate.set()
    _wait_until(lambda: deadlines.busy('b') is None)
    assert made == ['x', 'y', 'c']
