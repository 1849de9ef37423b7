"""Traffic counters of a guest's NICs, from libvirt's bulk stats (fake)."""

import logging
import re
import threading
import time

import pytest

from ufo_agent.driver.base import NicCounters
from ufo_tools.fakes.fakehost import nova_xml
from ufo_tools.fakes import fakelibvirt as lv

U1 = '8f1d3c2e-1111-4a5b-9c0d-2e3f4a5b6c7d'
TAP = 'tap7c1f2e3d-4b'          # the NIC of nova_xml
TIMEOUT = 0.3

# A second tap, a NIC without a host device and one whose transmitted
# packets libvirt could not count (an Open vSwitch port without them).
MORE_NICS = """
    <interface type='ethernet'>
      <mac address='fa:16:3e:00:00:02'/>
      <target dev='tap0000aaaa-11'/>
      <model type='virtio'/>
    </interface>
    <interface type='user'>
      <mac address='fa:16:3e:00:00:03'/>
      <model type='virtio'/>
    </interface>
    <interface type='vhostuser'>
      <mac address='fa:16:3e:00:00:04'/>
      <source type='unix' path='/run/openvswitch/vhu0000bbbb-22'
              mode='server'/>
      <target dev='vhu0000bbbb-22'/>
      <model type='virtio'/>
    </interface>
  </devices>"""


def _stats(rx, tx):
    """What libvirt reports of a NIC that received and sent packets."""
    return {'rx.bytes': rx * 600, 'rx.pkts': rx, 'rx.errs': 0, 'rx.drop': 0,
            'tx.bytes': tx * 90, 'tx.pkts': tx, 'tx.errs': 0, 'tx.drop': 0}


def _counters(rx, tx):
    return NicCounters(rx, tx, rx * 600, tx * 90)


@pytest.fixture
def gate():
    event = threading.Event()
    yield event
    event.set()


def _observe_within(driver, uuid, limit):
    """``driver.observe(uuid)`` and how long it took; fails past ``limit``.

    On a thread, so that a call stuck at a gate fails the test rather
    than hanging it.
    """
    out = []
    worker = threading.Thread(target=lambda: out.append(driver.observe(uuid)),
                              daemon=True)
    start = time.monotonic()
    worker.start()
    worker.join(limit)
    assert out, 'observe took more than %.1f s' % limit
    return out[0], time.monotonic() - start


def _wait_until(pred, timeout=5.0):
    deadline = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < deadline, 'condition not reached'
        time.sleep(0.01)


def test_traffic_is_counted_per_nic_that_has_every_counter(host, hv):
    dom = host.boot(U1, nova_xml(U1).replace('</devices>', MORE_NICS),
                    pid=500)
    ovs = _stats(30, 0)
    del ovs['tx.pkts']
    dom.nic_counters = {TAP: _stats(1200, 45),
                        'tap0000aaaa-11': _stats(7, 9), 'vhu0000bbbb-22': ovs}
    driver = host.driver()
    driver.guests()
    obs = driver.observe(U1)
    assert obs.nics == {TAP: _counters(1200, 45),
                        'tap0000aaaa-11': _counters(7, 9)}
    assert obs.nics[TAP].packets_in == 1200
    assert obs.vcpu_cpu_ns == 200           # the /proc counters too
    dom.nic_counters[TAP] = _stats(1300, 50)
    assert driver.observe(U1).nics[TAP] == _counters(1300, 50)


def test_a_guest_without_nics_has_none_to_count(host, hv):
    host.boot(U1, re.sub(r'<interface .*?</interface>', '', nova_xml(U1),
                         flags=re.S), pid=500)
    driver = host.driver()
    driver.guests()
    assert driver.observe(U1).nics == {}


def test_a_failing_stats_call_leaves_the_counters_unknown_only(
        host, hv, caplog):
    dom = host.boot(U1, nova_xml(U1), pid=500)
    dom.nic_counters = {TAP: _stats(10, 20)}
    dom.fail['domainListGetStats'] = lv.libvirtError(
        'internal error: stats failed')
    driver = host.driver()
    driver.guests()
    caplog.set_level(logging.DEBUG)
    for _ in range(3):
        obs = driver.observe(U1)
        assert obs.nics is None
        assert (obs.vcpu_cpu_ns, obs.vcpu_slices) == (200, 6)
    said = [r for r in caplog.records if 'No NIC counters' in r.message]
    assert [r.levelno for r in said] == [
        logging.WARNING, logging.DEBUG, logging.DEBUG]
    assert 'stats failed' in said[0].message
    del dom.fail['domainListGetStats']
    assert driver.observe(U1).nics == {TAP: _counters(10, 20)}


def test_a_hung_stats_call_costs_observe_one_deadline(host, hv, gate):
    dom = host.boot(U1, nova_xml(U1), pid=500)
    dom.nic_counters = {TAP: _stats(10, 20)}
    driver = host.driver(call_timeout=TIMEOUT)
    driver.guests()
    dom.block['domainListGetStats'] = gate
    obs, took = _observe_within(driver, U1, 5.0)
    assert obs.nics is None and obs.vcpu_cpu_ns == 200
    assert TIMEOUT <= took < TIMEOUT + 1.0
    # While that call hangs, the next observations do not wait for it.
    obs, took = _observe_within(driver, U1, 5.0)
    assert obs.nics is None and took < TIMEOUT
    del dom.block['domainListGetStats']
    gate.set()
    _wait_until(lambda: not driver._host.deadlines.outstanding())
    assert driver.observe(U1).nics == {TAP: _counters(10, 20)}


def _observed(host):
    """(driver, domain) of a guest whose counters were read once."""
    dom = host.boot(U1, nova_xml(U1), pid=500)
    dom.nic_counters = {TAP: _stats(10, 20)}
    driver = host.driver()
    driver.guests()
    assert driver.observe(U1).nics == {TAP: _counters(10, 20)}
    return driver, dom


def test_counters_are_read_over_a_new_connection_with_its_domain(host, hv):
    driver, dom = _observed(host)
    first = hv.conn
    first.alive = False                 # libvirtd restarted
    dom.nic_counters = {TAP: _stats(11, 21)}
    assert driver.observe(U1).nics == {TAP: _counters(11, 21)}
    assert hv.conn is not first and U1 in hv.conn.handed_out


def test_a_domain_gone_between_calls_has_unknown_counters(host, hv):
    driver, dom = _observed(host)
    # libvirt leaves a domain it no longer knows out of the records.
    del hv.domains[U1]
    obs = driver.observe(U1)
    assert obs.nics is None and obs.vcpu_cpu_ns == 200
