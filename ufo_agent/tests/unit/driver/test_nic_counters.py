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


U2 = '8f1d3c2e-2222-4a5b-9c0d-2e3f4a5b6c7d'
U3 = '8f1d3c2e-3333-4a5b-9c0d-2e3f4a5b6c7d'


def _three_guests(host):
    doms = {}
    for n, uuid in enumerate((U1, U2, U3)):
        name = 'instance-%08x' % (n + 1)
        doms[uuid] = host.boot(uuid, nova_xml(uuid, name=name),
                               pid=500 + 100 * n, name=name)
        doms[uuid].nic_counters = {TAP: _stats(10 * (n + 1), n + 1)}
    return doms


def _count_stats_calls(conn):
    """Wrap ``conn.domainListGetStats``; returns the list of calls."""
    calls = []
    real = conn.domainListGetStats

    def counted(doms, stats=0, flags=0):
        calls.append((sorted(d.uuid for d in doms), flags))
        return real(doms, stats, flags)

    conn.domainListGetStats = counted
    return calls


def test_one_stats_call_a_poll_serves_every_guest(host, hv):
    doms = _three_guests(host)
    driver = host.driver()
    calls = _count_stats_calls(hv.conn)
    for tick in range(2):
        driver.guests()
        for n, uuid in enumerate((U1, U2, U3)):
            assert driver.observe(uuid).nics == {
                TAP: _counters(10 * (n + 1) + tick, n + 1)}
        for n, dom in enumerate(doms.values()):
            dom.nic_counters[TAP] = _stats(10 * (n + 1) + tick + 1, n + 1)
    assert [uuids for uuids, _ in calls] == [sorted((U1, U2, U3))] * 2
    # Without waiting for a domain's job: a hung QEMU costs nobody.
    assert all(flags & lv.VIR_CONNECT_GET_ALL_DOMAINS_STATS_NOWAIT
               for _, flags in calls)


def test_a_guest_observed_again_in_a_poll_is_read_again(host, hv):
    doms = _three_guests(host)
    driver = host.driver()
    driver.guests()
    driver.observe(U1)
    doms[U1].nic_counters[TAP] = _stats(99, 1)
    assert driver.observe(U1).nics == {TAP: _counters(99, 1)}


def test_a_guest_whose_call_hangs_is_left_out_of_the_stats(host, hv, gate):
    doms = _three_guests(host)
    driver = host.driver(call_timeout=TIMEOUT)
    driver.guests()
    doms[U2].block['pinVcpuFlags'] = gate
    with pytest.raises(Exception):
        driver.pin_vcpus(U2, frozenset({1}))        # times out: busy
    assert U2 in driver.busy_guests()
    # Its stats would hang too: it is not asked about.
    doms[U2].block['domainListGetStats'] = gate
    driver.guests()             # on a new connection: the old one hangs
    calls = _count_stats_calls(hv.conn)
    started = time.monotonic()
    assert driver.observe(U1).nics == {TAP: _counters(10, 1)}
    assert driver.observe(U2).nics is None
    assert driver.observe(U3).nics == {TAP: _counters(30, 3)}
    assert time.monotonic() - started < TIMEOUT
    assert [uuids for uuids, _ in calls] == [sorted((U1, U3))]
