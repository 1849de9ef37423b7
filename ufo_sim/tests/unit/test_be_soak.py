"""The be-soak experiment: BE guests in the idle pool or soaking."""

import json
import os

import numpy as np
import pytest

from ufo_sim import cmd
from ufo_sim import driver as sim_driver
from ufo_sim.experiments import be_soak
from ufo_sim.managers import cell as cell_mod
from ufo_sim.managers import scenario
from ufo_sim import profiles

TINY = cell_mod.Settings(converge=3, judge=2)
PAIR = cell_mod.Cell((cell_mod.VmLoad('memcached', 0.2),
                      cell_mod.VmLoad('nginx', 0.2)))


def _static_soak(soak, seconds=20.0):
    """Two LC VMs on their own cores, a BE VM parked or soaking.

    What the agent's soak plan asks of the driver, done by hand: the BE
    VM's vCPUs SCHED_IDLE, on every CPU but the emulator pool's.
    Returns (BE chunks done, LC p99s in us).
    """
    scene = scenario.build(PAIR, TINY, 5)
    host = scene.host
    be = host.add_vm('be', 8, profiles.BE(8))
    driver = sim_driver.SimDriver(host)
    for vm, n in zip(scene.vms, scene.vcpus):
        driver.add(vm, n)
    driver.add(be, 8, vm_class='be')
    # Cores 0-1 and 2-3 for the LC VMs, 4 for the emulators, 5-7 idle.
    scenario.apply_isolated(scene, [2, 2], 1)
    emulator = {8, 9}
    idle_pool = set(range(10, 16))
    driver.pin_emulator(be, emulator)
    if soak:
        driver.set_vcpus_idle(be, True)
        driver.pin_vcpus(be, driver.all_cpus - emulator)
    else:
        driver.pin_vcpus(be, idle_pool)
    host.advance(5.0)
    scenario.drain(scene)
    done = host.counters(be).requests_done
    host.advance(seconds)
    host.check()
    p99 = [float(np.percentile(host.take_latencies(vm), 99))
           for vm in scene.vms]
    return host.counters(be).requests_done - done, p99


def test_soaking_be_gains_throughput_and_lc_keeps_qos():
    parked, parked_p99 = _static_soak(False)
    soaked, soaked_p99 = _static_soak(True)
    assert soaked > 1.1 * parked
    for p99, prof in zip(soaked_p99, (profiles.MEMCACHED, profiles.NGINX)):
        assert p99 <= prof.qos_p99_us


def test_config_of_asks_the_agent_for_the_policy():
    assert be_soak.config_of(TINY, 'idle-pool') is not None
    if be_soak.soak_supported():
        assert be_soak.config_of(TINY, 'soak').be_policy == 'soak'
    else:
        with pytest.raises(ValueError, match='be_policy'):
            be_soak.config_of(TINY, 'soak')


def test_run_cell_measures_be_and_each_lc_vm():
    result = be_soak.run_cell(PAIR, TINY, 'idle-pool')
    assert result['be_chunks_per_s'] > 0
    assert result['be_cpus'] > 0
    assert [v['profile'] for v in result['lc']] == ['memcached', 'nginx']
    assert all(v['p99_us'] > 0 for v in result['lc'])


def _result(cell, policy, be, p99s, ok=True):
    return {'cell': cell, 'policy': policy, 'be_chunks_per_s': be,
            'be_cpus': be / 100.0, 'lc_qos_met': ok,
            'lc': [{'profile': 'x', 'p99_us': p, 'qos_met': ok}
                   for p in p99s]}


def test_summarize_compares_the_policies_cell_by_cell():
    out = be_soak.summarize([
        _result('a', 'idle-pool', 100.0, [10.0, 20.0]),
        _result('a', 'soak', 150.0, [11.0, 22.0]),
        _result('b', 'idle-pool', 200.0, [10.0, 10.0]),
        _result('b', 'soak', 200.0, [10.0, 12.0], ok=False)], True)
    assert out['be_throughput_gain_pct_avg'] == pytest.approx(25.0)
    assert out['lc_p99_change_pct_avg'] == pytest.approx(10.0)
    assert out['lc_p99_change_pct_median'] == pytest.approx(10.0)
    assert out['lc_qos_cells_idle_pool'] == 2
    assert out['lc_qos_cells_soak'] == 1
    line = be_soak.result_line(out)
    assert line == ('RESULT be_throughput_gain_pct_avg=25.0 '
                    'lc_p99_change_pct_avg=10.0 lc_qos_cells_idle_pool=2 '
                    'lc_qos_cells_soak=1')


def test_be_soak_command_ends_with_the_result_line(tmp_path, capsys):
    out = str(tmp_path / 'out')
    rc = cmd.main(['be-soak', '--out', out, '--pairs', 'memcached+nginx',
                   '--loads', '0.2', '--converge', '3', '--judge', '2',
                   '--processes', '1'])
    captured = capsys.readouterr()
    lines = captured.out.strip().splitlines()
    assert lines[-1].startswith('RESULT be_throughput_gain_pct_avg=')
    with open(os.path.join(out, 'be-soak.json')) as f:
        data = json.load(f)
    assert data['result_line'] == lines[-1]
    if be_soak.soak_supported():
        assert rc == 0
        assert {r['policy'] for r in data['results']} == set(
            be_soak.POLICIES)
    else:
        # Said plainly, and not passed off as a result.
        assert rc == 1
        assert 'be_policy' in captured.err
        assert 'lc_qos_cells_soak=n/a' in lines[-1]
