"""The demo's pure parts: scenario settings, the timeline and its summary."""

from ufo_tools.demo import nova_view
from ufo_tools.demo import run
from ufo_tools.demo import scenario
from ufo_tools.demo import timeline


def _status(a_cores, a_mode='active', overloaded=False, tick=0.002):
    return {
        'tick_seconds': tick,
        'pools': {'managed_cores': 2, 'vcpu_cores': a_cores,
                  'emulator_cores': 0, 'idle_cores': 2 - a_cores,
                  'overloaded': overloaded},
        'vms': [
            {'uuid': 'u-a', 'mode': a_mode, 'signal': 'guest',
             'cores': a_cores, 'cpus': '0', 'target_vcpus': max(1, a_cores),
             'online_vcpus': max(1, a_cores), 'util': 50.0 * a_cores,
             'sf': 100.0, 'vcpus': 2},
            {'uuid': 'u-c', 'mode': 'idle', 'signal': 'guest', 'cores': 0,
             'cpus': '0,1', 'target_vcpus': 1, 'online_vcpus': 1,
             'util': 0.1, 'sf': 2.0, 'vcpus': 2},
            {'uuid': 'not-ours', 'mode': 'active', 'cores': 1, 'vcpus': 8},
        ],
    }


def test_small_hosts_get_the_small_host_mode():
    small = scenario.agent_options(2)
    assert small['controller__emulator_min_cores'] == '0'
    assert small['controller__idle_pool_min_cores'] == '0'
    assert 'controller__emulator_min_cores' not in scenario.agent_options(4)
    assert small['controller__idle_util'] == str(scenario.IDLE_UTIL)
    for phase in scenario.PHASES:
        assert set(phase.rates) == set(scenario.LC_GUESTS)


def test_p99_is_read_from_workload_reports():
    line = ('UFO-WL t=32.0 phase=0 rate=300 arrivals=303 done=304 '
            'dropped=0 backlog=0 p50_us=1698 p95_us=10744 p99_us=17440 '
            'max_us=19000')
    assert timeline.p99_of(line) == 17440
    assert timeline.p99_of('UFO-STAT 12.0 cpu 1 2 3') is None


def test_summary_by_phase_and_guest():
    tl = timeline.Timeline({'u-a': 'lc-a', 'u-c': 'idle'})
    for i in range(4):
        tl.add(i, 'one', _status(2), {'lc-a': 1000 * (i + 1)})
    for i in range(4, 6):
        tl.add(i, 'two', _status(0, 'idle', overloaded=(i == 5),
                                 tick=0.010), {'lc-a': None})
    s = tl.summary(qos_p99_ms=3.0)
    assert s['seconds'] == 6 and s['managed_cores'] == 2
    assert s['guest_vcpus'] == 4
    assert s['vcpu_core_seconds'] == 8
    assert s['guest_core_seconds'] == 8
    one, two = s['phases']
    assert one['phase'] == 'one' and one['seconds'] == 4
    assert one['guests']['lc-a']['cores'] == 2.0
    assert one['cores_given'] == 2.0 and two['cores_given'] == 0.0
    assert one['guests']['lc-a']['p99_ms'] == 2.5
    # Median 2.5 ms <= 3 ms; 3 of the 4 seconds were within 3 ms.
    assert one['guests']['lc-a']['qos_met'] is True
    assert one['guests']['lc-a']['qos_seconds_pct'] == 75.0
    assert one['guests']['idle']['qos_met'] is None
    assert one['qos_met'] is True and two['qos_met'] is None
    assert tl.summary(qos_p99_ms=2.0)['phases'][0]['qos_met'] is False
    assert one['guests']['idle']['parked_pct'] == 100.0
    assert one['overloaded_pct'] == 0.0
    assert two['guests']['lc-a']['parked_pct'] == 100.0
    assert two['guests']['lc-a']['p99_ms'] is None
    assert two['overloaded_pct'] == 50.0 and two['idle_cores'] == 2.0
    assert s['tick_ms_max'] == 10.0
    text = timeline.format_agent(s, {'grow': 2, 'park': 1})
    assert 'decisions: grow 2, park 1' in text
    assert 'overloaded: one 0%, two 50%' in text


def _floating(shared=frozenset({0, 1}), online=2, a_pins=None):
    pins = {'u-a': nova_view.GuestPins(
        2, online, frozenset({a_pins or shared}), shared),
        'u-c': nova_view.GuestPins(2, 2, frozenset({shared}), shared)}
    return nova_view.status(pins, shared, len), pins


def test_without_the_agent_every_guest_gets_the_shared_set():
    status, pins = _floating()
    assert [(v['uuid'], v['mode'], v['cores'], v['cpus'])
            for v in status['vms']] == [('u-a', 'floating', 2, '0-1'),
                                        ('u-c', 'floating', 2, '0-1')]
    assert status['pools']['vcpu_cores'] == 2
    assert all(p.as_nova_wrote({0, 1}) for p in pins.values())
    # An agent's pin or an offline vCPU is no longer Nova's.
    _, pins = _floating(a_pins=frozenset({0}))
    assert not pins['u-a'].as_nova_wrote({0, 1})
    _, pins = _floating(online=1)
    assert not pins['u-a'].as_nova_wrote({0, 1})


def test_both_runs_side_by_side():
    names = {'u-a': 'lc-a', 'u-c': 'idle'}
    nova, ufo = timeline.Timeline(names), timeline.Timeline(names)
    for i in range(4):
        nova.add(i, 'one', _floating()[0], {'lc-a': 30000})
        ufo.add(i, 'one', _status(1), {'lc-a': 2000})
    runs = [('without ufo-agent', nova.summary(20.0)),
            ('with ufo-agent', ufo.summary(20.0))]
    assert runs[0][1]['guest_core_seconds'] == 16
    assert runs[1][1]['guest_core_seconds'] == 4
    text = timeline.format_comparison(runs, 20.0)
    lines = text.splitlines()
    assert lines[0] == ('UFO demo: 4 guest vCPUs on 2 cores (2.0x '
                        'oversubscribed), 1 phases of 4 s, run 2 times; '
                        'QoS target: p99 <= 20 ms')
    row = next(line for line in lines if line.startswith('one'))
    assert row.split() == ['one', 'idle', '2.0', '2.0', '-', '0.0', '1.0',
                           '-']
    row = next(line for line in lines if 'lc-a' in line)
    assert row.split() == ['lc-a', '2.0', '2.0', '30.0', 'ms', 'MISSED',
                           '1.0', '1.0', '2.0', 'ms', 'met']
    assert ('per second: without ufo-agent 4.0, with ufo-agent 1.0'
            in text)
    assert ('phases meeting the QoS target: without ufo-agent 0 of 1, '
            'with ufo-agent 1 of 1' in text)


def test_decisions_are_read_from_the_agent_log():
    log = ('2026-11-21 07:06:14.392 1 INFO ufo_agent.decisions [-] t=5.0 '
           'vm=u-a action=grow cores=1->2 reason="PCU 91% > 80%"\n'
           '2026-11-21 07:06:15.392 1 INFO ufo_agent.service.loop [-] other\n'
           '2026-11-21 07:06:16.392 1 INFO ufo_agent.decisions [-] t=6.0 '
           'vm=emulator action=emulator-grow cores=0->1 reason="x"\n')
    got = run.decisions(log, {'u-a': 'lc-a'})
    assert [(n, a) for n, a, _ in got] == [('lc-a', 'grow'),
                                           ('emulator', 'emulator-grow')]
    assert got[0][2].startswith('t=5.0 vm=lc-a action=grow')
