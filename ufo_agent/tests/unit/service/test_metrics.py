"""The Prometheus endpoint and the status JSON, over real HTTP.

The exposition is read back with prometheus_client's own parser, as a
scraper would; the event counters are driven through the agent loop over
the in-memory driver, where the events happen.
"""

import dataclasses
import json
import logging
import threading
import time
import urllib.request

from prometheus_client import parser
import pytest

from ufo_agent import hostsignal
from ufo_agent.service import metrics
from ufo_agent.service import snapshot as snapshot_mod
from ufo_agent.tests.unit.service import fakes
from ufo_agent.tests.unit.service import test_loop


def _families(text):
    return {f.name: f for f in parser.text_string_to_metric_families(text)}


def _value(families, name, **labels):
    """The value of the one sample ``name`` with ``labels``."""
    found = [s.value for f in families.values() for s in f.samples
             if s.name == name and s.labels == labels]
    assert len(found) == 1, (name, labels, found)
    return found[0]


def _running_agent(ticks=4):
    driver = fakes.FakeDriver()
    driver.add(fakes.FakeGuest('a', 8))
    driver.add(fakes.FakeGuest('b"x', 4, channel=False))
    agent, tick = test_loop._agent(driver)
    agent.signal_tracker = hostsignal.HostSignalTracker()
    agent.start()
    for _ in range(ticks):
        tick()
    return agent, driver, tick


def test_endpoint_serves_the_exposition_and_the_status_on_loopback():
    agent, _, _ = _running_agent()
    server = metrics.MetricsServer('127.0.0.1', 0)
    server.snapshot = agent.snapshot
    server.start()
    try:
        base = 'http://127.0.0.1:%d' % server.address[1]
        with urllib.request.urlopen(base + '/metrics') as response:
            assert response.headers['Content-Type'].startswith(
                'text/plain; version=0.0.4')
            families = _families(response.read().decode())
        assert _value(families, 'ufo_pool_cores', pool='idle') == \
            agent.snapshot['pools']['idle_cores']
        assert _value(families, 'ufo_overloaded') == 0
        assert _value(families, 'ufo_host_state', state='saturated') == 1
        assert _value(families, 'ufo_host_state', state='overloaded') == 0
        assert _value(families, 'ufo_host_signal_sequence') == 4
        assert _value(families, 'ufo_tick_duration_seconds_count') == 4
        assert _value(families, 'ufo_vm_cores', uuid='a') == \
            agent.status['a'].cores
        # Host counters of the guest's threads, in seconds.
        emulator = _value(
            families, 'ufo_vm_emulator_threads_cpu_seconds_total', uuid='a')
        assert emulator > 0
        assert _value(
            families, 'ufo_vm_emulator_threads_run_delay_seconds_total',
            uuid='a') == pytest.approx(emulator / 4)
        # Label escaping: the uuid comes back as it went in.
        assert _value(families, 'ufo_vm_vcpus', uuid='b"x') == 4
        assert _value(families, 'ufo_vm_mode', uuid='a', mode='active') == 1
        assert _value(families, 'ufo_vm_signal', uuid='b"x',
                      signal='host-only') == 1
        assert _value(families, 'ufo_vm_channel_state', uuid='b"x',
                      channel='no-channel') == 1
        # This process, from prometheus_client's ProcessCollector.
        assert _value(families, 'process_resident_memory_bytes') > 0
        assert families['process_cpu_seconds'].type == 'counter'

        # A scraper that asks for OpenMetrics gets it.
        request = urllib.request.Request(base + '/metrics', headers={
            'Accept': 'application/openmetrics-text; version=1.0.0'})
        with urllib.request.urlopen(request) as response:
            assert response.headers['Content-Type'].startswith(
                'application/openmetrics-text')
            assert response.read().decode().endswith('# EOF\n')

        status = json.loads(urllib.request.urlopen(base + '/status').read())
        assert status['ticks'] == 4 and status['pools']['managed_cores'] == 8
        try:
            urllib.request.urlopen(base + '/nope')
        except urllib.error.HTTPError as exc:
            assert exc.code == 404
        else:
            raise AssertionError('/nope answered')
    finally:
        server.stop()


def test_before_the_first_tick_only_process_metrics_are_served():
    families = _families(metrics.render({}))
    assert 'process_start_time_seconds' in families
    assert not [n for n in families if n.startswith('ufo_')]


def test_names_units_and_labels_follow_prometheus_conventions():
    agent, _, _ = _running_agent()
    families = _families(metrics.render(agent.snapshot))
    ufo = {n: f for n, f in families.items() if n.startswith('ufo_')}
    assert len(ufo) >= 30
    for name, family in ufo.items():
        assert family.documentation, name
        assert family.type in ('gauge', 'counter', 'summary'), name
        for word in ('percent', '_ms', 'per_second'):
            assert word not in name, name
        for sample in family.samples:
            if family.type == 'counter':
                assert sample.name == name + '_total', sample
            # Guests by instance UUID; never the tenant's display name.
            assert 'name' not in sample.labels, sample
            if name.startswith('ufo_vm_'):
                assert sample.labels['uuid'] in ('a', 'b"x'), sample
    # Ratios are 0-1.
    assert 0 <= _value(families, 'ufo_emulator_pool_utilization_ratio') <= 1
    assert _value(families, 'ufo_vm_utilization_vcpus', uuid='a') == \
        agent.status['a'].util / 100.0


def test_enforcement_errors_are_counted_by_method():
    agent, driver, tick = _running_agent(ticks=0)
    raised = []

    def fault(uuid, kind, cpus):
        if uuid == 'a' and kind == 'vcpu':
            raised.append(cpus)
            return 'before'
    driver.fault = fault
    for _ in range(3):
        tick()
    families = _families(metrics.render(agent.snapshot))
    assert raised and 'vcpu pin: pin failed' in agent.status['a'].reason
    assert _value(families, 'ufo_enforcement_errors_total',
                  method='pin_vcpus') == len(raised)
    assert _value(families, 'ufo_enforcement_errors_total',
                  method='set_vcpu_target') == 0


def test_a_target_rolled_back_after_a_missed_acknowledgement_is_counted():
    driver = fakes.FakeDriver()
    driver.add(fakes.FakeGuest('mute', 4, acks=False))
    agent, tick = test_loop._agent(driver)
    clock = agent.clock

    def sleep(seconds):             # waiting for the answer takes time
        clock.now += seconds
    agent.enforcer.sleep = sleep
    agent.start()
    for _ in range(8):
        tick()
    families = _families(metrics.render(agent.snapshot))
    # The probe went unanswered: one rollback, then a backoff of 30 s.
    assert _value(families, 'ufo_rollbacks_total') == 1
    assert _value(families, 'ufo_vm_channel_state', uuid='mute',
                  channel='host-only') == 1
    assert _value(families, 'ufo_host_only_fallbacks_total') == 0


def test_a_guest_signal_falling_back_to_host_only_is_counted_once():
    agent, driver, tick = _running_agent()
    driver.all['a'].lie = True
    for _ in range(6):
        tick()
    families = _families(metrics.render(agent.snapshot))
    assert agent.status['a'].signal == 'host-only'
    # b never had a guest signal: no fallback; a fell back once.
    assert _value(families, 'ufo_host_only_fallbacks_total') == 1
    assert _value(families, 'ufo_vm_signal', uuid='a',
                  signal='host-only') == 1


def test_invariant_violations_and_decisions_are_counted(caplog):
    agent, _, tick = _running_agent()
    families = _families(metrics.render(agent.snapshot))
    assert _value(families, 'ufo_controller_decisions_total',
                  action='start') == 2
    assert _value(families, 'ufo_controller_decisions_total',
                  action='revert') == 0
    # The same starts, by the rule that decided them.
    assert _value(families, 'ufo_controller_decision_rules_total',
                  action='start', rule='start') == 2
    real_tick = agent.controller.tick

    def broken_tick(*args):
        plan = real_tick(*args)
        vms = dict(plan.vms)
        vms['b"x'] = dataclasses.replace(
            vms['b"x'], cores=vms['a'].cores | vms['b"x'].cores)
        return dataclasses.replace(plan, vms=vms)

    agent.controller.tick = broken_tick
    with caplog.at_level(logging.ERROR):
        tick()
        tick()
    families = _families(metrics.render(agent.snapshot))
    assert _value(families, 'ufo_invariant_violations_total') == 2
    assert _value(families, 'ufo_tick_errors_total') == 0


def test_a_request_is_served_the_snapshot_after_the_next_tick():
    server = metrics.MetricsServer('127.0.0.1', 0, wait=30.0)
    server.publish({'ticks': 1})
    server.start()
    got = []

    def get():
        url = 'http://127.0.0.1:%d/status' % server.address[1]
        with urllib.request.urlopen(url, timeout=30) as response:
            got.append(json.loads(response.read()))

    try:
        assert not server.wanted()
        request = threading.Thread(target=get)
        request.start()
        deadline = time.monotonic() + 30
        while not server.wanted() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert server.wanted() and not got
        server.publish({'ticks': 2})
        request.join(30)
        assert got == [{'ticks': 2}]
        assert not server.wanted()
    finally:
        server.stop()


def test_a_snapshot_is_built_only_when_asked_for(monkeypatch):
    agent, _, tick = _running_agent()
    built = []
    real_build = snapshot_mod.build
    monkeypatch.setattr(snapshot_mod, 'build',
                        lambda *args: built.append(args) or real_build(*args))
    tick()
    tick()
    assert built == []
    assert agent.snapshot is agent.snapshot
    assert agent.snapshot['ticks'] == agent.ticks
    assert len(built) == 1
    tick()
    assert agent.snapshot['ticks'] == agent.ticks
    assert len(built) == 2
