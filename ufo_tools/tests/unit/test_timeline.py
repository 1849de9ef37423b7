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


def test_the_be_guest_soaks_beside_one_lc_guest():
    for cores in 2, 4:
        assert scenario.agent_options(cores)['controller__be_policy'] == \
            'soak'
    assert scenario.CLASSES == {'lc': 'lc', 'be': 'be', 'idle': None}
    assert set(scenario.GUESTS) == set(scenario.CLASSES)
    loads = scenario.loads()
    assert [p.name for p in scenario.PHASES] == list(loads)
    assert loads['lc-busy'] == '%d req/s' % scenario.BUSY
    assert loads['lc-quiet'] == 'quiet'


def test_p99_and_work_are_read_from_workload_reports():
    line = ('UFO-WL t=32.0 phase=0 rate=300 arrivals=303 done=304 '
            'dropped=0 backlog=0 p50_us=1698 p95_us=10744 p99_us=17440 '
            'max_us=19000')
    assert timeline.p99_of(line) == 17440
    assert timeline.done_of(line) == 304
    assert timeline.p99_of('UFO-STAT 12.0 cpu 1 2 3') is None
    assert timeline.done_of('UFO-WL start phases=1 workers=2 batch=1') \
        is None


def test_summary_by_phase_and_guest():
    tl = timeline.Timeline({'u-a': 'lc-a', 'u-c': 'idle'})
    for i in range(4):
        tl.add(i, 'one', _status(2), {'lc-a': 1000 * (i + 1)},
               {'idle': [None, 10.0, 20.0, None][i]})
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
    # 30 units reported over the phase's four seconds; none: None.
    assert one['guests']['idle']['work_per_s'] == 7.5
    assert one['guests']['lc-a']['work_per_s'] is None
    assert one['guests']['lc-a']['idle_priority_pct'] == 0.0
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


def _lc_be_status(lc_cores, soak=True):
    """/status of the agent: lc on its cores, be soaking."""
    return {
        'tick_seconds': 0.002,
        'pools': {'managed_cores': 2, 'vcpu_cores': lc_cores,
                  'emulator_cores': 0, 'idle_cores': 2 - lc_cores,
                  'overloaded': False},
        'vms': [
            {'uuid': 'u-lc', 'mode': 'active' if lc_cores else 'idle',
             'signal': 'guest', 'cores': lc_cores, 'cpus': '0',
             'target_vcpus': max(1, lc_cores),
             'online_vcpus': max(1, lc_cores), 'util': 40.0, 'sf': 900.0,
             'vcpus': 2},
            {'uuid': 'u-be', 'mode': 'be', 'signal': 'guest', 'cores': 0,
             'cpus': '0-1', 'target_vcpus': 2, 'online_vcpus': 2,
             'util': 150.0, 'sf': 20.0, 'vcpus': 2, 'idle_priority': soak},
        ],
    }


def _lc_be_runs(nova_p99, ufo_p99, nova_work=(1000, 800, 1800),
                ufo_work=(1500, 600, 1900)):
    """Both runs of lc-light, lc-busy, lc-quiet, two seconds each."""
    names = {'u-lc': 'lc', 'u-be': 'be'}
    shared = frozenset({0, 1})
    floating = nova_view.status(
        {u: nova_view.GuestPins(2, 2, frozenset({shared}), shared)
         for u in names}, shared, len)
    nova, ufo = timeline.Timeline(names), timeline.Timeline(names)
    phases = ('lc-light', 'lc-busy', 'lc-quiet')
    for i in range(6):
        phase = phases[i // 2]
        cores = {'lc-light': 1, 'lc-busy': 2, 'lc-quiet': 0}[phase]
        n99, u99 = nova_p99[i // 2], ufo_p99[i // 2]
        nova.add(i, phase, floating, {'lc': n99 and n99 * 1000},
                 {'be': nova_work[i // 2]})
        ufo.add(i, phase, _lc_be_status(cores), {'lc': u99 and u99 * 1000},
                {'be': ufo_work[i // 2]})
    return [('without ufo-agent', nova.summary(20.0)),
            ('with ufo-agent', ufo.summary(20.0))]


def test_both_runs_side_by_side():
    runs = _lc_be_runs(nova_p99=(12.0, 400.0, None),
                       ufo_p99=(3.0, 8.0, None))
    text = timeline.format_comparison(runs, 20.0, 'lc', 'be',
                                      scenario.loads())
    lines = text.splitlines()
    assert lines[0] == ('UFO demo: 4 guest vCPUs on 2 cores (2.0x '
                        'oversubscribed), 3 phases of 2 s, run twice; QoS '
                        'target of lc: p99 <= 20 ms')
    row = next(line for line in lines if line.startswith('lc-light'))
    assert row.split() == ['lc-light', '%d' % scenario.LIGHT, 'req/s',
                           '12.0', 'ms', 'met', '2.0', '1000',
                           '3.0', 'ms', 'met', '1.0', '1500']
    row = next(line for line in lines if line.startswith('lc-busy'))
    assert row.split()[3:] == ['400.0', 'ms', 'MISSED', '2.0', '800',
                               '8.0', 'ms', 'met', '2.0', '600']
    row = next(line for line in lines if line.startswith('lc-quiet'))
    assert row.split() == ['lc-quiet', 'quiet', '-', '2.0', '1800', '-',
                           '0.0', '1900']
    assert ('phases in which lc met its QoS target: without ufo-agent 1 '
            'of 2, with ufo-agent 2 of 2' in text)
    # (1000 + 800 + 1800) / 3 = 1200 against 1333: +11 %.
    assert ("be's work, mean over the phases: without ufo-agent 1200 "
            "units/s, with ufo-agent 1333 units/s (+11 %)" in text)
    # Each guest floats over both cores; with the agent, lc's pool only.
    assert ('per second: without ufo-agent 4.0, with ufo-agent 1.0'
            in text)
    said = ' '.join(text.split())
    assert ("lc-busy: ufo-agent met the target that Nova's pins missed "
            "(p99 8.0 ms with ufo-agent, 400.0 ms without), lc on 2.0 "
            "cores of its own (2.0 vCPUs online) instead of floating over "
            "2; be did 600 units/s of work, 75 % of its 800 without."
            in said)
    assert 'lc-light: both met the target (p99 3.0 ms' in said
    assert ('lc-quiet: lc quiet, parked 100 % of the phase (0.0 cores); '
            'be did 1900 units/s' in said)


def test_the_verdict_says_better_only_where_the_agent_made_it_so():
    better = _lc_be_runs((12.0, 400.0, None), (3.0, 8.0, None))
    assert timeline.difference(better[0][1], better[1][1], 'lc') == {
        'lc-light': 'both-met', 'lc-busy': 'better', 'lc-quiet': 'no-load'}
    assert timeline.shows_difference(better[0][1], better[1][1], 'lc')
    # Better in one phase, worse in another: no difference shown.
    mixed = _lc_be_runs((400.0, 12.0, None), (8.0, 30.0, None))
    assert timeline.difference(mixed[0][1], mixed[1][1], 'lc') == {
        'lc-light': 'better', 'lc-busy': 'worse', 'lc-quiet': 'no-load'}
    assert not timeline.shows_difference(mixed[0][1], mixed[1][1], 'lc')
    text = timeline.format_comparison(mixed, 20.0, 'lc', 'be', {})
    assert "lc-busy: ufo-agent MISSED the target that Nova's pins met" in \
        ' '.join(text.split())
    same = _lc_be_runs((400.0, 500.0, None), (300.0, 900.0, None))
    assert set(timeline.difference(same[0][1], same[1][1], 'lc').values()) \
        == {'both-missed', 'no-load'}
    assert not timeline.shows_difference(same[0][1], same[1][1], 'lc')


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


def test_the_verdict_names_the_phases_and_a_busy_host():
    better = _lc_be_runs((12.0, 400.0, None), (3.0, 8.0, None))
    said = timeline.verdict(better[0][1], better[1][1], 'lc', 'be')
    # be: 1200 units/s without, 1333 with.
    assert said == ('In short: with ufo-agent lc met its QoS target in '
                    'lc-busy, where it missed it without while be kept '
                    '111 % of its work, and missed it in no phase where '
                    'it met it without.')
    same = _lc_be_runs((400.0, 500.0, None), (300.0, 900.0, None))
    nova, ufo = same[0][1], same[1][1]
    said = timeline.verdict(nova, ufo, 'lc', 'be')
    assert said == ('In short: lc met or missed its QoS target in the same '
                    'phases with and without ufo-agent in this run '
                    '(lc-light both missed, lc-busy both missed).')
    ufo['outside_cpu_pct'] = 60.0
    said = timeline.verdict(nova, ufo, 'lc', 'be')
    assert 'The host was busy outside the guests (60 % of its CPUs)' in said
    mixed = _lc_be_runs((400.0, 12.0, None), (8.0, 30.0, None))
    said = timeline.verdict(mixed[0][1], mixed[1][1], 'lc', 'be')
    assert said.startswith("In short: ufo-agent did not make lc's QoS "
                           "better in this run: it missed the target in "
                           "lc-busy, where lc met it without it, and met "
                           "it in lc-light.")


def test_the_simulator_answers_when_this_machine_shows_nothing(
        monkeypatch):
    from ufo_sim.experiments import demo as sim_demo
    canned = {'conditions': 'cores=8', 'results': [
        {'phase': 'lc-busy', 'manager': manager, 'load': 0.8,
         'lc_p99_us': p99, 'qos_p99_us': 500.0, 'lc_qos_met': met,
         'lc_cpus': cpus, 'be_chunks_per_s': work, 'be_cpus': 8.0}
        for manager, p99, met, cpus, work in (
            ('without', 9000.0, False, 16, 3000.0),
            ('with', 300.0, True, 8, 800.0))]}
    seen = []
    monkeypatch.setattr(sim_demo, 'run',
                        lambda settings: seen.append(settings) or canned)
    out, text = run.simulator_answer()
    assert out is canned
    assert (seen[0].converge, seen[0].judge) == (20, 6)
    assert text.startswith("The simulator's answer for this scenario on "
                           "the paper's host (ufo-sim demo, ")
    assert sim_demo.table(canned) in text
    assert 'in lc-busy missed its target without ufo-agent and met it' in \
        ' '.join(text.split())

    def broken(settings):
        raise RuntimeError('no C compiler')
    monkeypatch.setattr(sim_demo, 'run', broken)
    out, text = run.simulator_answer()
    assert out is None
    assert text.startswith('The simulator could not run here (no C '
                           'compiler): pip install ".[sim]" and run '
                           'ufo-sim demo')


def test_a_run_another_agent_or_re_pin_disturbed_says_so():
    runs = _lc_be_runs((12.0, 400.0, None), (3.0, 8.0, None))
    assert timeline.cautions(runs, (6, 6)) == []
    runs[1][1]['other_agents'] = [4242]
    said = timeline.cautions(runs, (4, 6))
    assert said == [
        'Caution: another ufo-agent ran on this host during the run with '
        'ufo-agent (pid 4242). It manages every Nova guest on the host, '
        "this demo's too: that run is not what it says.",
        "Caution: the guests did not have Nova's pins in 2 of the 6 "
        'samples of the run without ufo-agent: something changed them.']
    text = timeline.format_comparison(runs, 20.0, 'lc', 'be', {},
                                      nova_pins=(4, 6))
    flat = ' '.join(text.split())
    assert flat.index('Caution: another') < flat.index('In short:')
