"""ufo-sim demo: ufo-demo's scenario without and with the agent."""

from ufo_sim.experiments import demo
from ufo_sim.managers import cell as cell_mod

# A small host and short settling: the shape of the answer, fast.
SMALL = cell_mod.Settings(cores=4, converge=14, judge=3)


def test_without_the_agent_every_vm_floats_over_the_host():
    got = demo.run_phase('lc-light', 0.2, 'without', SMALL)
    assert got['lc_cpus'] == SMALL.budget
    assert got['qos_p99_us'] == 500.0       # Memcached's, in real time
    assert got['lc_p99_us'] > 0 and got['lc_qos_met'] in (True, False)
    # The BE VM has a vCPU per host CPU and works on what LC leaves.
    assert 0 < got['be_cpus'] <= SMALL.budget
    assert got['be_chunks_per_s'] > 0


def test_with_the_agent_a_quiet_lc_vm_holds_no_cpu_and_be_soaks():
    got = demo.run_phase('lc-quiet', 0.0, 'with', SMALL)
    assert got['lc_p99_us'] is None and got['lc_qos_met'] is None
    assert got['lc_cpus'] == 0              # parked
    assert got['be_cpus'] > SMALL.budget / 2
    assert demo.agent_config(SMALL).be_policy == 'soak'


def test_the_table_has_both_managers_per_phase():
    results = []
    for phase, load in demo.PHASES:
        for manager in demo.MANAGERS:
            results.append({
                'phase': phase, 'manager': manager, 'load': load,
                'lc_p99_us': (300.0 if manager == 'with' else 9000.0)
                if load else None,
                'qos_p99_us': 500.0,
                'lc_qos_met': (manager == 'with') if load else None,
                'lc_cpus': 16 if manager == 'without' else 2,
                'be_chunks_per_s': 4000.0, 'be_cpus': 12.0})
    results[-1] = {'phase': 'lc-quiet', 'manager': 'with', 'load': 0.0,
                   'error': 'timeout: 600 s'}
    text = demo.table({'conditions': 'cores=8', 'results': results})
    lines = text.splitlines()
    assert 'QoS target p99 <= 500 us' in ' '.join(lines[:3])
    light = next(line for line in lines if line.startswith('lc-light'))
    assert light.split() == ['lc-light', '20%', '9000', 'us', 'MISSED',
                             '16', 'CPUs', '4000/s', '300', 'us', 'met',
                             '2', 'CPUs', '4000/s']
    quiet = next(line for line in lines if line.startswith('lc-quiet'))
    assert quiet.split()[:5] == ['lc-quiet', '0%', '-', '16', 'CPUs']
    assert 'error: timeout: 600 s' in quiet


def test_the_verdict_reads_the_loaded_phases():
    def result(phase, manager, met, cpus, work):
        return {'phase': phase, 'manager': manager, 'load': 0.2,
                'lc_qos_met': met, 'lc_cpus': cpus,
                'be_chunks_per_s': work}
    out = {'results': [result('lc-light', 'without', False, 16, 4000.0),
                       result('lc-light', 'with', True, 2, 3000.0),
                       result('lc-busy', 'without', False, 16, 3000.0),
                       result('lc-busy', 'with', True, 8, 750.0),
                       result('lc-quiet', 'without', None, 16, 5000.0),
                       result('lc-quiet', 'with', None, 0, 4600.0)]}
    assert demo.verdict(out) == (
        'Memcached in lc-light missed its target without ufo-agent and met '
        'it with it, on 2 CPUs of its own, the BE VM keeping 75 % of its '
        'work; in lc-busy missed its target without ufo-agent and met it '
        'with it, on 8 CPUs of its own, the BE VM keeping 25 % of its '
        'work.')
    failed = {'results': [{'phase': 'lc-light', 'manager': 'with',
                           'error': 'crashed: boom'}]}
    assert demo.verdict(failed) == ('The simulator gave no answer: '
                                    'lc-light with: crashed: boom.')
