"""``ufo-sim edge``: the Oracle's allocations read with the rules."""

import dataclasses
import json
import math
import os

import pytest

from ufo_agent.controller import config as controller_config
from ufo_sim import cmd
from ufo_sim.experiments import allocation
from ufo_sim.experiments import edge
from ufo_sim.managers import cell as cell_mod
from ufo_sim import profiles

CONFIG = controller_config.ControllerConfig()


def _vm(cores, pcu, sf, met=True):
    return allocation.VmResult(
        profile='nginx', load=0.5, cores=cores, util_pct=pcu * 200 * cores,
        pcu=pcu, sf=sf, p99_us=1.0 if met else 3.0, qos_p99_us=2.0,
        qos_met=met, emulator_wait=0.1)


def _alloc(vms, emulator, util, wait=0.5):
    return allocation.AllocationResult(
        counts=tuple(vm.cores for vm in vms), emulator=emulator,
        cpus=2 * (sum(vm.cores for vm in vms) + emulator),
        emulator_util=util, emulator_wait=wait, vms=tuple(vms))


def test_cell_from_key_reads_what_key_writes():
    cell = cell_mod.Cell((cell_mod.VmLoad('nginx', 0.5),
                          cell_mod.VmLoad('mysql', 0.2)))
    assert cell_mod.Cell.from_key(cell.key) == cell
    for bad in ('nginx', 'nginx@', '@50', 'nginx@0', 'nginx@50+'):
        with pytest.raises(ValueError):
            cell_mod.Cell.from_key(bad)


def test_separation_finds_the_cut_with_fewest_errors_either_way():
    assert edge.separation([0.5, 0.7, 0.9], [0.95, 1.0], True) == (0.95, 0)
    # 0.96 among the fits: no cut is clean.
    assert edge.separation([0.5, 0.96], [0.95, 1.0], True) == (0.95, 1)
    # Smaller is short (an SF ratio): short at or below the cut.
    assert edge.separation([0.6, 0.8], [0.1, 0.5], False) == (0.5, 0)
    # Nothing read as short is best when every short value sits lowest.
    assert edge.separation([0.9], [0.1], True) == (None, 1)


def test_neighbours_stay_on_the_host_and_off_an_empty_pool():
    assert edge.neighbours((1, 3), 1, budget_cores=6) == {
        'oracle': ((1, 3), 1), 'vm0+': ((2, 3), 1), 'vm1-': ((1, 2), 1),
        'vm1+': ((1, 4), 1), 'emu+': ((1, 3), 2)}
    assert edge.neighbours((1, 3), 1, budget_cores=5) == {
        'oracle': ((1, 3), 1), 'vm1-': ((1, 2), 1)}
    assert edge.neighbours((2, 2), 2, 8)['emu-'] == ((2, 2), 1)


def test_rules_read_at_the_oracles_size_and_one_core_smaller():
    oracle = _alloc([_vm(2, 0.85, 1000), _vm(3, 0.60, 500)], 2, 0.90)
    measured = {
        'oracle': oracle,
        # One core more: VM 1's SF grows by half, so the SF rule fires.
        'vm0+': _alloc([_vm(3, 0.57, 1050), _vm(3, 0.60, 500)], 2, 0.9),
        'vm1+': _alloc([_vm(2, 0.85, 1000), _vm(4, 0.45, 1000)], 2, 0.9),
        # One core fewer: VM 0 saturates and misses; VM 1 misses with a
        # PCU under the band and an SF the rule does not read as short.
        'vm0-': _alloc([_vm(1, 1.00, 10, met=False), _vm(3, 0.6, 500)],
                       2, 0.9),
        'vm1-': _alloc([_vm(2, 0.85, 1000), _vm(2, 0.75, 450, met=False)],
                       2, 0.9),
        'emu-': _alloc([_vm(2, 0.85, 600, met=False), _vm(3, 0.6, 500)],
                       1, 1.0, wait=3.0),
    }
    rows = edge.read_cell('nginx@50+nginx@50', measured, CONFIG)['rows']
    by = {(r['pool'], r['at']): r for r in rows}
    assert by['vm0', 'oracle']['grown_by'] == 'pcu'
    assert by['vm1', 'oracle']['grown_by'] == 'sf'
    assert by['vm1', 'oracle']['signals']['sf_ratio'] == pytest.approx(0.5)
    assert by['vm0', 'smaller']['grown_by'] == 'pcu'
    assert not by['vm0', 'smaller']['met']
    assert by['vm1', 'smaller']['grown_by'] is None
    assert by['vm1', 'smaller']['signals']['sf_ratio'] == pytest.approx(0.9)
    assert by['emulator', 'oracle']['grown_by'] == 'util'
    assert by['emulator', 'oracle']['signals']['guest_sf_ratio'] is None
    emu = by['emulator', 'smaller']
    assert (emu['cores'], emu['met'], emu['grown_by']) == (1, False, 'util')
    assert emu['signals']['guest_sf_ratio'] == pytest.approx(0.6)

    summary = edge.summarize([{'cell': 'x', 'rows': rows}])
    assert summary['vm']['grown_at_oracle'] == {'pcu': 1, 'sf': 1}
    assert summary['vm']['smaller_missing_stopped_by'] == {'pcu': 1,
                                                           'none': 1}
    assert summary['emulator']['smaller_missing'] == 1

    # The Oracle's own allocation missing QoS again says nothing.
    measured['oracle'] = _alloc([_vm(2, 0.85, 1000, met=False),
                                 _vm(3, 0.6, 500)], 2, 0.9)
    assert edge.read_cell('nginx@50+nginx@50', measured, CONFIG) is None


def _grid_json(settings, cell, vm_cores, emulator):
    return {'settings': dataclasses.asdict(settings), 'results': [
        {'manager': 'oracle', 'cell': cell, 'qos_met': True,
         'cpus_mean': 2.0 * (sum(vm_cores) + emulator),
         'detail': {'vm_cores': vm_cores, 'emulator_cores': emulator,
                    'emulator_home': []}},
        {'manager': 'ufo', 'cell': cell, 'qos_met': True, 'cpus_mean': 22.0,
         'detail': {'vm_cores': [4, 4], 'emulator_cores': 3}}]}


def _row(pool, cores, rule, **signals):
    return {'pool': pool, 'at': 'oracle', 'cores': cores, 'grown_by': rule,
            'signals': signals}


def _reading(cell, rows):
    """An edge reading of ``cell`` with these rows at the Oracle's size."""
    return {'cell': cell, 'rows': rows + [
        {'pool': 'vm0', 'at': 'smaller', 'cores': 1, 'grown_by': 'pcu',
         'signals': {'pcu': 1.0}}]}


def test_each_rule_adds_the_cores_of_its_own_step():
    def step(row, config):
        return edge.rule_step(row, config, 8)

    # The PCU band: to the fewest cores at or under 80 %.
    assert step(_row('vm0', 2, 'pcu', pcu=0.85), CONFIG) == 1
    assert step(_row('vm0', 2, 'pcu', pcu=1.0), CONFIG) == 1   # 2.0 / 3
    assert step(_row('vm0', 3, 'pcu', pcu=1.0), CONFIG) == 1   # 3.0 / 4
    assert step(_row('vm0', 1, 'pcu', pcu=1.0), CONFIG) == 1
    assert step(_row('vm0', 4, 'pcu', pcu=0.99), CONFIG) == 1
    assert step(_row('vm0', 5, 'pcu', pcu=0.99), CONFIG) == 2  # 4.95 / 7
    # The emulator pool: to the fewest under 60 % (Algorithm 1).
    assert step(_row('emulator', 2, 'util', util=0.96), CONFIG) == 2
    assert step(_row('emulator', 2, 'util', util=0.85), CONFIG) == 1
    assert step(_row('emulator', 1, 'util', util=0.95), CONFIG) == 1
    # The SF rule: one core; no rule: none.
    assert step(_row('vm1', 2, 'sf', pcu=0.7), CONFIG) == 1
    assert step(_row('vm1', 2, None, pcu=0.7), CONFIG) == 0
    # No further than the host, whatever the marks.
    nowhere = dataclasses.replace(CONFIG, emulator_util_low=0.0)
    assert step(_row('emulator', 2, 'util', util=0.9), nowhere) == 6
    # A pool already at its most cores (a VM at its flavor's) stays.
    assert edge.rule_step(_row('vm0', 4, 'pcu', pcu=0.99), CONFIG, 4) == 0
    assert edge.rule_step(_row('vm0', 4, 'sf', pcu=0.7), CONFIG, 4) == 0
    assert edge.rule_step(_row('vm0', 3, 'pcu', pcu=1.0), CONFIG, 4) == 1


def _result(manager, cell, cpus, met=True, **detail):
    return {'manager': manager, 'cell': cell, 'qos_met': met,
            'cpus_mean': cpus, 'detail': detail}


def test_the_rule_floor_adds_a_core_per_pool_a_rule_grows():
    grid_json = {'settings': dataclasses.asdict(cell_mod.Settings()),
                 'results': [
        # The rules grow the pool and one VM: floor 6 + 2 x 2 = 10.
        _result('oracle', 'memcached@20+mysql@50', 6.0),
        _result('ufo', 'memcached@20+mysql@50', 10.0),
        # Its mirror reads as the cell simulated; UFO holds 12 there.
        _result('oracle', 'mysql@50+memcached@20', 6.0,
                mirror_of='memcached@20+mysql@50'),
        _result('ufo', 'mysql@50+memcached@20', 12.0),
        # No rule grows anything: the floor is the Oracle's 8.
        _result('oracle', 'nginx@20+nginx@20', 8.0),
        _result('ufo', 'nginx@20+nginx@20', 8.0),
        # Left out: UFO misses; the Oracle's cell was not read.
        _result('oracle', 'nginx@80+nginx@80', 14.0),
        _result('ufo', 'nginx@80+nginx@80', 16.0, met=False),
        _result('oracle', 'mysql@50+mysql@50', 12.0),
        _result('ufo', 'mysql@50+mysql@50', 16.0)]}
    cells = [_reading('memcached@20+mysql@50',
                      [_row('vm0', 1, None, pcu=0.6),
                       _row('vm1', 1, 'pcu', pcu=0.9),
                       _row('emulator', 1, 'util', util=0.9)]),
             _reading('nginx@20+nginx@20',
                      [_row('vm0', 1, None, pcu=0.6),
                       _row('vm1', 2, None, pcu=0.5),
                       _row('emulator', 1, None, util=0.5)])]
    floor = edge.rule_floor(grid_json, cells)
    assert floor['cells'] == 3
    assert floor['ufo_over_floor'] == pytest.approx((1.0 + 1.2 + 1.0) / 3)
    assert floor['above_floor'] == [{'cell': 'mysql@50+memcached@20',
                                     'ufo': 12.0, 'oracle': 6.0,
                                     'floor': 10.0}]
    assert floor['unread'] == ['mysql@50+mysql@50']
    # Without SMT a core is one CPU.
    grid_json['settings']['smt'] = 1
    assert edge.rule_floor(grid_json, cells)['above_floor'][0]['floor'] \
        == 8.0


def test_the_rule_floor_grows_no_vm_past_its_flavor():
    settings = cell_mod.Settings()
    full = math.ceil(settings.vcpus_of('mysql', profiles.MYSQL.vcpus) /
                     settings.smt)
    grid_json = {'settings': dataclasses.asdict(settings), 'results': [
        _result('oracle', 'nginx@20+mysql@90', 2.0 * (1 + full + 1)),
        _result('ufo', 'nginx@20+mysql@90', 2.0 * (1 + full + 1))]}
    cells = [_reading('nginx@20+mysql@90',
                      [_row('vm0', 1, None, pcu=0.6),
                       _row('vm1', full, 'pcu', pcu=0.99),
                       _row('emulator', 1, None, util=0.5)])]
    floor = edge.rule_floor(grid_json, cells)
    assert (floor['cells'], floor['ufo_over_floor']) == (1, 1.0)
    # Its flavor larger, the same reading would grow it.
    grid_json['settings']['vcpus'] = [['mysql', 2 * settings.smt * full]]
    assert edge.rule_floor(grid_json, cells)['ufo_over_floor'] < 1.0


def test_edge_reads_a_simulated_cell_once_not_its_mirror_or_misses():
    grid_json = _grid_json(cell_mod.Settings(), 'nginx@20+nginx@50',
                           [1, 2], 1)
    oracle = grid_json['results'][0]
    grid_json['results'] += [
        dict(oracle, cell='nginx@50+nginx@20', detail=dict(
            oracle['detail'], vm_cores=[2, 1],
            mirror_of='nginx@20+nginx@50')),
        dict(oracle, cell='nginx@80+nginx@80', qos_met=False),
        dict(oracle, cell='nginx@50+mysql@50', detail=dict(
            oracle['detail'], emulator_home=[1]))]
    assert edge.oracle_cells(grid_json) == [('nginx@20+nginx@50', (1, 2),
                                             1)]


def test_edge_measures_a_saved_grids_oracle_cells_with_its_settings(
        tmp_path, capsys):
    settings = cell_mod.Settings(warmup=2.0, measure=10.0, seed=3,
                                 ufo_config=(('pcu_high', 0.9),))
    grid_json = _grid_json(settings, 'memcached@20+memcached@20', [1, 1], 2)
    path = tmp_path / 'grid.json'
    path.write_text(json.dumps(grid_json))
    assert edge.settings_of(json.loads(path.read_text())) == settings
    out = str(tmp_path / 'out')
    assert cmd.main(['edge', '--out', out, '--processes', '1',
                     str(path)]) == 0
    text = capsys.readouterr().out
    assert 'seed=3' in text.splitlines()[0]
    with open(os.path.join(out, 'edge.json')) as f:
        data = json.load(f)
    assert data['controller']['pcu_high'] == 0.9
    assert len(data['cells']) == 1, data
    assert not data['lost'] and not data['oracle_missed_when_remeasured']
    rows = data['cells'][0]['rows']
    pools = sorted((r['pool'], r['at'], r['cores']) for r in rows)
    assert pools == [('emulator', 'oracle', 2), ('emulator', 'smaller', 1),
                     ('vm0', 'oracle', 1), ('vm1', 'oracle', 1)]
    emu = {r['at']: r['signals'] for r in rows if r['pool'] == 'emulator'}
    # The same emulator work on one core fewer: busier, waits longer.
    assert emu['smaller']['util'] > emu['oracle']['util']
    assert emu['smaller']['wait'] > emu['oracle']['wait']
    # UFO's 22 CPUs against the floor, as a RESULT line.
    floor = data['rule_floor']
    assert floor['cells'] == 1 and floor['above_floor'][0]['ufo'] == 22.0
    assert 'RESULT edge_ufo_over_rule_floor_ratio=' in text


def test_edge_refuses_a_file_that_is_not_a_grid_run(tmp_path, capsys):
    path = tmp_path / 'x.json'
    path.write_text('{"cells": []}')
    with pytest.raises(SystemExit):
        cmd.main(['edge', str(path)])
    assert 'not a saved ufo-sim grid run' in capsys.readouterr().err
    # A grid run without the Oracle has nothing to read.
    grid_json = _grid_json(cell_mod.Settings(), 'nginx@20+nginx@50',
                           [1, 2], 1)
    grid_json['results'] = grid_json['results'][1:]
    path.write_text(json.dumps(grid_json))
    with pytest.raises(SystemExit):
        cmd.main(['edge', str(path)])
    assert 'no Oracle results' in capsys.readouterr().err


def test_a_bad_cell_names_the_part_that_is_wrong(capsys):
    for text, part in (('nginx@50+mysql', "'mysql'"),
                       ('nginx@50+redis@20', "'redis': unknown profile")):
        with pytest.raises(SystemExit):
            cmd.main(['allocation', '--cell', text, '2,1/1'])
        assert part in capsys.readouterr().err
