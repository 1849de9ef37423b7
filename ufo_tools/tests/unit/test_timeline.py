"""The demo's pure parts: scenario settings, the timeline and its summary."""

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
    s = tl.summary()
    assert s['seconds'] == 6 and s['managed_cores'] == 2
    assert s['guest_vcpus'] == 4
    assert s['vcpu_core_seconds'] == 8
    one, two = s['phases']
    assert one['phase'] == 'one' and one['seconds'] == 4
    assert one['guests']['lc-a']['cores'] == 2.0
    assert one['guests']['lc-a']['p99_ms'] == 2.5
    assert one['guests']['idle']['parked_pct'] == 100.0
    assert one['overloaded_pct'] == 0.0
    assert two['guests']['lc-a']['parked_pct'] == 100.0
    assert two['guests']['lc-a']['p99_ms'] is None
    assert two['overloaded_pct'] == 50.0 and two['idle_cores'] == 2.0
    assert s['tick_ms_max'] == 10.0
    text = timeline.format_summary(s, {'grow': 2, 'park': 1})
    assert '4 guest vCPUs on 2 managed cores (2.0x' in text
    assert 'decisions: grow 2, park 1' in text


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
