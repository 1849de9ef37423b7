"""The ufo-sim command on tiny experiments."""

import json
import os
import pkgutil
import re

import pytest

from ufo_sim import cmd
from ufo_sim import commands
from ufo_sim.commands import common
from ufo_sim.managers import ufo

RESULT = re.compile(
    r'^RESULT ufo_vs_dyniso_core_saving_avg=(-?[0-9.]+|nan) '
    r'ufo_vs_dyniso_core_saving_max=(-?[0-9.]+|nan) '
    r'ufo_over_oracle_cores=(-?[0-9.]+|nan) '
    r'ufo_qos_feasible_cells_pct=([0-9.]+) '
    r'dyniso_qos_feasible_cells_pct=([0-9.]+) '
    r'ufo_over_oracle_ratio=([0-9.]+|nan) '
    r'oracle_vs_dyniso_core_saving_avg=(-?[0-9.]+|nan) '
    r'ufo_vs_dyniso_core_saving_avg_common=(-?[0-9.]+|nan)'
    r'( [a-z]+_cpus_(mean_avg|max_max)=([0-9.]+|nan))*$')
# One load, a few ticks: a grid run to compare with another.
SHORT = ('--no-plots', '--loads', '0.2', '--converge', '3', '--judge', '2',
         '--processes', '1', '--seeds', '1')
TINY = ['--loads', '0.1,0.3', '--apps', 'memcached', '--converge', '8',
        '--judge', '2', '--warmup', '2', '--measure', '8']


def _grid(tmp_path, capsys, *extra):
    out = str(tmp_path / 'out')
    assert cmd.main(['grid', '--out', out] + TINY + list(extra)) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    with open(os.path.join(out, 'grid.json')) as f:
        return lines, json.load(f), out


def test_grid_prints_the_yardstick_and_the_result_line_last(
        tmp_path, capsys):
    lines, data, out = _grid(tmp_path, capsys, '--processes', '2')
    assert RESULT.match(lines[-1]), lines[-1]
    assert sum(1 for line in lines if line.startswith('RESULT')) == 2
    assert lines[-1] == data['result_line']
    assert lines[-2] == data['conditions']
    assert lines[-3] == data['yardstick_line']
    assert lines[-3].startswith('RESULT seeds_per_cell=3.00 ')
    assert 'seeds=3' in lines[-2].split()
    assert 'ufo_cpus_mean_avg=' in lines[-1]
    # 2 x 2 cells of memcached+memcached, every manager, mirrored cell
    # (0.3, 0.1) included; three seeds each.
    assert len(data['results']) == 4 * 5
    assert all(len(r['seeds']) == 3 for r in data['results'])
    assert data['timing']['ufo'][0] == 3 * 3
    assert data['summary']['cells'] == 4
    pct = float(RESULT.match(lines[-1]).group(4))
    ufo_ok = sum(1 for r in data['results']
                 if r['manager'] == 'ufo' and r['qos_met'] and
                 r['cpus'] <= 16)
    assert pct == 100.0 * ufo_ok / 4
    assert os.path.getsize(os.path.join(
        out, 'grid-memcached+memcached.png')) > 1000


def test_grid_is_deterministic_under_a_seed(tmp_path, capsys):
    # On any number of workers: test_parallel.py.
    short = ('--no-plots', '--managers', 'dyniso,ufo,default', '--loads',
             '0.2', '--converge', '3', '--judge', '2', '--seeds', '2')
    _, first, _ = _grid(tmp_path / 'a', capsys, *short)
    _, second, _ = _grid(tmp_path / 'b', capsys, *short)
    assert first['results'] == second['results']
    _, third, _ = _grid(tmp_path / 'c', capsys, '--seed', '5', *short)
    assert third['results'] != first['results']


def test_grid_keeps_other_managers_from_a_saved_run_of_the_same_grid(
        tmp_path, capsys):
    _, whole, out = _grid(tmp_path / 'a', capsys, '--managers',
                          'dyniso,ufo,default', *SHORT)
    saved = os.path.join(out, 'grid.json')
    _, again, _ = _grid(tmp_path / 'b', capsys, '--managers', 'ufo',
                        '--ufo-option', 'pcu_high=0.9', '--keep-from',
                        saved, *SHORT)
    assert again['managers'] == ['dyniso', 'ufo', 'default']
    assert [r for r in again['results'] if r['manager'] != 'ufo'] == [
        r for r in whole['results'] if r['manager'] != 'ufo']
    assert set(again['timing']) == {'dyniso', 'ufo', 'default'}
    assert again['settings']['ufo_config'] == [['pcu_high', 0.9]]
    assert 'dyniso_cpus_mean_avg=' in again['result_line']
    # Another grid, and a UFO manager not run again: refused before
    # anything runs, naming the option.
    for refused in (['--managers', 'ufo', '--seed', '9'],
                    ['--managers', 'dyniso']):
        with pytest.raises(SystemExit):
            cmd.main(['grid', '--out', str(tmp_path / 'c'), '--keep-from',
                      saved] + TINY + list(SHORT) + refused)
        assert '--keep-from' in capsys.readouterr().err
    assert not os.path.exists(str(tmp_path / 'c' / 'grid.json'))


def test_mal_reads_a_grid(tmp_path, capsys):
    _, data, out = _grid(tmp_path, capsys, '--processes', '1',
                         '--no-plots', '--seeds', '1')
    assert cmd.main(['mal', '--grid', os.path.join(out, 'grid.json'),
                     '--out', out]) == 0
    with open(os.path.join(out, 'mal.json')) as f:
        mal = json.load(f)
    # The Oracle's curve: this short grid is too short for UFO to settle.
    curve = mal['per_mix']['memcached+memcached']['oracle']
    values = [curve[k] for k in sorted(curve, key=int)
              if curve[k] is not None]
    assert values
    # MAL never drops as CPUs are added.
    assert values == sorted(values)
    assert os.path.exists(os.path.join(out, 'mal-memcached+memcached.png'))


def test_ufo_options_reach_the_controller(capsys):
    args = cmd.parser().parse_args(
        ['grid', '--ufo-option', 'sf_threshold=0.2', '--ufo-option',
         'emulator_util_low=0.4'])
    settings = common.settings(args)
    config = ufo.config_of(settings)
    assert (config.sf_threshold, config.emulator_util_low) == (0.2, 0.4)
    with pytest.raises(SystemExit):
        cmd.parser().parse_args(['grid', '--ufo-option', 'nope=1'])
    assert 'NAME=VALUE' in capsys.readouterr().err


def test_an_unknown_manager_is_refused_by_name(capsys):
    args = cmd.parser().parse_args(['grid', '--managers',
                                    'ufo,oracle-wide'])
    assert args.managers == 'ufo,oracle-wide'
    with pytest.raises(SystemExit):
        cmd.parser().parse_args(['grid', '--managers', 'ufo,orcale'])
    err = capsys.readouterr().err
    assert "--managers: 'orcale': not one of" in err and 'oracle-wide' in err


def test_dynamic_and_decompose_run_small(tmp_path, capsys):
    out = str(tmp_path)
    assert cmd.main(['dynamic', '--scale', '0.03', '--out', out]) == 0
    with open(os.path.join(out, 'dynamic.json')) as f:
        dyn = json.load(f)
    assert dyn['errors'] == {}
    assert set(dyn['results']) == {'default', 'dyniso', 'ufo'}
    ufo_run = dyn['results']['ufo']
    assert ufo_run['seconds'] == 8
    assert len(ufo_run['trace']['held_cpus']) == 8
    # Each VM's load steps, and the table's step columns.
    assert {'load_steps', 'step_violation_s_max', 'step_reaction_s_mean',
            'bursts_moved_cores'} <= set(ufo_run['vms']['nginx'])
    assert 'worst' in capsys.readouterr().out
    # UFO's trace says what its controller did each second.
    assert len(ufo_run['trace']['emulator_cpus']) == 8
    assert all(c >= 2 for c in ufo_run['trace']['emulator_cpus'][1:])
    decisions = [d for second in ufo_run['trace']['decisions']
                 for d in second]
    assert any(d.startswith(('nginx start', 'mysql start',
                             'memcached start')) for d in decisions), \
        decisions
    # Default replays what UFO's VM pools held.
    ufo_cores = [sum(v[s] for v in ufo_run['trace']['vm_cpus']) // 2
                 for s in range(8)]
    default_cpus = dyn['results']['default']['trace']['held_cpus']
    assert default_cpus == [2 * max(1, c) for c in ufo_cores]
    assert os.path.exists(os.path.join(out, 'dynamic-nginx-p99.png'))

    assert cmd.main(['decompose', '--apps', 'memcached', '--cpus', '8',
                     '--measure', '5', '--warmup', '1', '--out', out]) == 0
    with open(os.path.join(out, 'decompose.json')) as f:
        dec = json.load(f)
    loads = dec['max_load']['memcached']
    assert set(loads) == {'default', 'vcpu', 'emulator', 'combined'}
    assert all(0.0 <= loads[v]['8'] <= 2.0 for v in loads)
    assert 'mean gain of combined' in capsys.readouterr().out


def test_allocation_is_the_oracles_trial_with_what_the_agent_sees(
        tmp_path, capsys):
    from ufo_sim.experiments import allocation
    from ufo_sim.managers import cell as cell_mod
    from ufo_sim.managers import oracle
    out = str(tmp_path)
    assert cmd.main(['allocation', '--out', out, '--measure', '20',
                     '--cell', 'nginx@50+mysql@20', '2,1/1', '3,1/1',
                     '2,1/2']) == 0
    text = capsys.readouterr().out
    assert text.startswith('cell nginx@50+mysql@20\n')
    assert 'emu wait' in text.splitlines()[1]
    with open(os.path.join(out, 'allocation.json')) as f:
        data = json.load(f)
    first, second, roomy = data['allocations']
    assert (first['counts'], first['emulator'], first['cpus']) == (
        [2, 1], 1, 8)
    cell = cell_mod.Cell((cell_mod.VmLoad('nginx', 0.5),
                          cell_mod.VmLoad('mysql', 0.2)))
    settings = cell_mod.Settings(measure=20.0)
    window = oracle.run_isolated(cell, settings, [2, 1], 1)
    assert [vm['p99_us'] for vm in first['vms']] == list(window.p99_us)
    assert [vm['qos_met'] for vm in first['vms']] == list(window.ok)
    nginx2, nginx3 = first['vms'][0], second['vms'][0]
    assert nginx2['pcu'] == pytest.approx(nginx2['util_pct'] / 400.0)
    assert nginx3['pcu'] == pytest.approx(nginx3['util_pct'] / 600.0)
    # The same load, busier on fewer cores; more switches on more cores.
    assert 0 < nginx3['util_pct'] < nginx2['util_pct'] < 400.0
    assert 0 < nginx2['sf'] < nginx3['sf']
    # One emulator core for both guests' I/O: its threads queue for it.
    assert first['emulator_wait'] > 2 * roomy['emulator_wait'] > 0
    for vm, roomier in zip(first['vms'], roomy['vms']):
        assert vm['emulator_wait'] > roomier['emulator_wait'] > 0
    assert allocation.parse('3,1/0') == ((3, 1), 0)
    for bad in ('3,1', '0,1/1', 'a/1', '2,1/-1'):
        with pytest.raises(ValueError):
            allocation.parse(bad)
    with pytest.raises(SystemExit):
        cmd.main(['allocation', '--cell', 'nginx@50', '2,1/1'])
    assert 'core counts for' in capsys.readouterr().err


def test_every_command_module_is_registered_once():
    found = {m.name for m in pkgutil.iter_modules(commands.__path__)
             if m.name != 'common'}
    registered = [c.__name__.rsplit('.', 1)[1] for c in cmd.COMMANDS]
    assert sorted(registered) == sorted(found)
    for command in cmd.COMMANDS:
        assert callable(command.add_parser) and callable(command.run)
    # Each adds the subcommand named after its module.
    assert cmd.parser().parse_args(['dynamic-diff', 'a', 'b']).func is \
        commands.dynamic_diff.run


def test_qos_target_reaches_ufo_and_keeps_the_other_managers(
        tmp_path, capsys):
    _, black_box, out = _grid(tmp_path / 'a', capsys, '--managers',
                              'dyniso,ufo', *SHORT)
    _, qos, _ = _grid(tmp_path / 'b', capsys, '--managers', 'ufo',
                      '--qos-target', '--keep-from',
                      os.path.join(out, 'grid.json'), *SHORT)
    assert qos['settings']['qos_target'] is True
    assert 'qos_target=on' in qos['conditions']
    assert 'qos_target' not in black_box['conditions']
    # UFO's mode changes no other manager's result.
    assert [r for r in qos['results'] if r['manager'] == 'dyniso'] == [
        r for r in black_box['results'] if r['manager'] == 'dyniso']

    assert cmd.main(['dynamic', '--scale', '0.03', '--managers', 'ufo',
                     '--qos-target', '--no-plots', '--processes', '1',
                     '--out', str(tmp_path / 'd')]) == 0
    with open(str(tmp_path / 'd' / 'dynamic.json')) as f:
        dyn = json.load(f)
    decisions = [d for second in dyn['results']['ufo']['trace']['decisions']
                 for d in second]
    assert any('target' in d for d in decisions), decisions
