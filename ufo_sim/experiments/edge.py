"""The Oracle's allocations read with the controller's rules.

``ufo-sim edge GRID.json`` takes every cell the Oracle meets in a saved
grid run and measures its allocation and the one-core neighbours as
fixed allocations (:mod:`~ufo_sim.experiments.allocation`: the Oracle's
own trial, and what the agent would observe there). It then reads each
pool with the controller's thresholds (its defaults, with the grid's
``--ufo-option`` overrides):

* a VM's pool at the Oracle's count ``c``: the PCU band grows it (PCU
  above ``pcu_high``), the SF rule grows it (PCU at least ``pcu_low``
  and SF(c)/SF(c+1) below ``1 - sf_threshold``), or it is held;
* the emulator pool at the Oracle's size: above ``emulator_util_high``
  it grows;
* a one-core-smaller neighbour that misses QoS (the VM's own, or any
  VM's for the emulator pool): a rule that reads "grow" there stops the
  step down onto it; one that does not lets the controller miss QoS.

A rule that grows a pool at the Oracle's size costs cores against the
Oracle; one that lets a step down onto a miss costs QoS. Beside the
verdicts, each signal's values at the Oracle's sizes and at the smaller
neighbours that miss, and the fewest errors any single threshold on that
signal makes between the two: a signal no threshold separates cannot
tell a controller where the edge is, whatever its threshold.

Last, UFO's CPUs in the grid against a floor under the Oracle's: its
CPUs plus the cores the rules add to the pools they grow at its size,
each by the rule's own step and no VM past its flavor's cores, what the
rules ask for at the Oracle's
allocation. UFO above the floor holds more than its rules ask for
there; the floor over the Oracle is what the rules cost. (It is no
bound on every allocation that keeps to the rules: another allocation
as small as the Oracle's might; the search does not look for one.)

Signals of a pool of ``s`` cores, each against the same pool with one
core more (``s + 1``): for a VM, PCU and ``sf_ratio`` = SF(s)/SF(s+1);
for the emulator pool, its utilization, its threads' run delay per
second of their CPU time (``wait``; the host sees it in
``/proc/<tid>/schedstat``), and ``guest_sf_ratio``, the smallest of the
VMs' SF(s)/SF(s+1).
"""

import dataclasses

from ufo_agent.controller import config as controller_config
from ufo_sim.experiments import allocation
from ufo_sim.experiments import parallel
from ufo_sim.managers import cell as cell_mod
from ufo_sim.managers import scenario

NAME = 'edge'

# Signals, and whether a larger value means "short of cores".
VM_SIGNALS = (('pcu', True), ('sf_ratio', False))
EMULATOR_SIGNALS = (('util', True), ('wait', True),
                    ('guest_sf_ratio', False))


def settings_of(grid_json):
    """The :class:`~ufo_sim.managers.cell.Settings` a grid run used."""
    values = dict(grid_json['settings'])
    for name in ('ufo_config', 'vcpus', 'host_options', 'profile_options'):
        values[name] = tuple(tuple(pair) for pair in values.get(name, ()))
    return cell_mod.Settings(**values)


def controller_of(settings):
    """The controller's settings the grid's UFO ran with."""
    return controller_config.ControllerConfig(**dict(settings.ufo_config))


def oracle_cells(grid_json):
    """[(cell key, VM core counts, emulator cores)] the Oracle meets.

    Cells where the Oracle keeps some VM's emulator threads on that VM's
    own cores are left out: the emulator pool's neighbours are another
    space there. So are mirrors (the same VMs in another order, told
    from the cell the grid simulated): that cell is read once, with the
    seed it ran with.
    """
    found = []
    for result in grid_json['results']:
        detail = result.get('detail') or {}
        if result['manager'] != 'oracle' or not result['qos_met'] or \
                detail.get('emulator_home') or 'mirror_of' in detail:
            continue
        found.append((result['cell'], tuple(detail['vm_cores']),
                      detail['emulator_cores']))
    return found


def neighbours(counts, emulator, budget_cores):
    """{label: (counts, emulator)}: the Oracle's and its one-core steps.

    ``vmI-`` / ``vmI+`` change VM I's pool, ``emu-`` / ``emu+`` the
    emulator pool. A step off the host, or to an empty emulator pool
    (its threads would move to the VMs' cores: another space), is left
    out.
    """
    found = {'oracle': (tuple(counts), emulator)}
    for i in range(len(counts)):
        for sign, step in (('-', -1), ('+', 1)):
            moved = list(counts)
            moved[i] += step
            found['vm%d%s' % (i, sign)] = (tuple(moved), emulator)
    found['emu-'] = (tuple(counts), emulator - 1)
    found['emu+'] = (tuple(counts), emulator + 1)
    return {label: (c, e) for label, (c, e) in found.items()
            if min(c) >= 1 and e >= 1 and sum(c) + e <= budget_cores}


def _met(result):
    return all(vm.qos_met for vm in result.vms)


def _vm_reading(config, result, larger, i):
    """Signals and the rules' verdict for VM ``i`` of ``result``."""
    vm = result.vms[i]
    signals = {'pcu': vm.pcu, 'sf_ratio': None}
    if larger is not None:
        signals['sf_ratio'] = vm.sf / max(larger.vms[i].sf, 1e-9)
    if vm.pcu > config.pcu_high:
        rule = 'pcu'
    elif vm.pcu >= config.pcu_low and signals['sf_ratio'] is not None \
            and signals['sf_ratio'] < 1.0 - config.sf_threshold:
        rule = 'sf'
    else:
        rule = None
    return {'cores': vm.cores, 'met': vm.qos_met, 'grown_by': rule,
            'signals': signals}


def _emulator_reading(config, result, larger):
    signals = {'util': result.emulator_util, 'wait': result.emulator_wait,
               'guest_sf_ratio': None}
    if larger is not None:
        signals['guest_sf_ratio'] = min(
            vm.sf / max(big.sf, 1e-9)
            for vm, big in zip(result.vms, larger.vms))
    rule = 'util' if result.emulator_util > config.emulator_util_high \
        else None
    return {'cores': result.emulator, 'met': _met(result), 'grown_by': rule,
            'signals': signals}


def read_cell(key, measured, config):
    """The rows of one cell from its measured neighbours.

    ``measured`` maps the labels of :func:`neighbours` to
    :class:`~ufo_sim.experiments.allocation.AllocationResult`. Each row
    is one pool at one size: ``at`` is ``oracle`` or ``smaller``. None
    when the Oracle's allocation, measured again, misses QoS (a cell at
    the edge of its own trial's noise says nothing about the rules).
    """
    oracle = measured['oracle']
    if not _met(oracle):
        return None
    rows = []
    for i in range(len(oracle.vms)):
        at_oracle = _vm_reading(config, oracle, measured.get('vm%d+' % i),
                                i)
        rows.append(dict(at_oracle, pool='vm%d' % i, at='oracle'))
        smaller = measured.get('vm%d-' % i)
        if smaller is not None:
            rows.append(dict(_vm_reading(config, smaller, oracle, i),
                             pool='vm%d' % i, at='smaller'))
    rows.append(dict(_emulator_reading(config, oracle,
                                       measured.get('emu+')),
                     pool='emulator', at='oracle'))
    if 'emu-' in measured:
        rows.append(dict(_emulator_reading(config, measured['emu-'],
                                           oracle),
                         pool='emulator', at='smaller'))
    return {'cell': key, 'rows': rows}


def separation(fits, short, larger_is_short):
    """(threshold, errors): the best single cut between two samples.

    A value counts as short of cores at or above the threshold (below
    it when ``larger_is_short`` is false); errors are values of ``fits``
    read as short plus values of ``short`` read as fitting.
    """
    if not fits and not short:
        return None, 0
    sign = 1.0 if larger_is_short else -1.0
    fits = sorted(sign * v for v in fits)
    short = sorted(sign * v for v in short)
    best = (float('inf'), len(short))    # nothing read as short
    for cut in fits + short:
        errors = sum(v >= cut for v in fits) + sum(v < cut for v in short)
        if errors < best[1]:
            best = (cut, errors)
    cut, errors = best
    return (sign * cut if cut != float('inf') else None), errors


def _kind(row):
    return 'emulator' if row['pool'] == 'emulator' else 'vm'


def summarize(cells):
    """Counts per pool kind and each signal's separation."""
    rows = [row for cell in cells for row in cell['rows']]
    summary = {}
    for kind, signals in (('vm', VM_SIGNALS),
                          ('emulator', EMULATOR_SIGNALS)):
        at_oracle = [r for r in rows if _kind(r) == kind and
                     r['at'] == 'oracle']
        missing = [r for r in rows if _kind(r) == kind and
                   r['at'] == 'smaller' and not r['met']]
        grown = {}
        for row in at_oracle:
            if row['grown_by']:
                grown[row['grown_by']] = grown.get(row['grown_by'], 0) + 1
        stopped = {}
        for row in missing:
            rule = row['grown_by'] or 'none'
            stopped[rule] = stopped.get(rule, 0) + 1
        cuts = {}
        for name, larger_is_short in signals:
            fits = [r['signals'][name] for r in at_oracle
                    if r['signals'][name] is not None]
            short = [r['signals'][name] for r in missing
                     if r['signals'][name] is not None]
            cut, errors = separation(fits, short, larger_is_short)
            cuts[name] = {'fits': _spread(fits), 'short': _spread(short),
                          'threshold': cut, 'errors': errors,
                          'of': len(fits) + len(short)}
        summary[kind] = {'at_oracle': len(at_oracle),
                         'grown_at_oracle': grown,
                         'smaller_missing': len(missing),
                         'smaller_missing_stopped_by': stopped,
                         'signals': cuts}
    return summary


def rule_step(row, config, most):
    """Cores the rule that grows ``row``'s pool adds (0: none grows it).

    As the controller steps, up to ``most`` cores (a VM's flavor, the
    host's for the emulator pool): the PCU band to the fewest cores at
    or under ``pcu_high``, the emulator pool to the fewest under
    ``emulator_util_low`` (Algorithm 1), the SF rule one core. Busy time
    is spread over more cores as the controller projects it.
    """
    cores, rule = row['cores'], row['grown_by']
    if not rule or cores >= most:
        return 0
    if rule not in ('pcu', 'util'):
        return 1
    if rule == 'pcu':       # the band's top is inside the band
        busy, mark, top_fits = (row['signals']['pcu'] * cores,
                                config.pcu_high, True)
    else:
        busy, mark, top_fits = (row['signals']['util'] * cores,
                                config.emulator_util_low, False)

    def fits(target):
        value = busy / target
        return value < mark or (top_fits and value == mark)

    target = cores + 1
    while target < most and not fits(target):
        target += 1
    return target - cores


def _rules_grow(cell, config, settings):
    """Cores the rules add to ``cell``'s pools at the Oracle's size."""
    flavor = scenario.flavor_cores(cell_mod.Cell.from_key(cell['cell']),
                                   settings)
    most = {'vm%d' % i: cores for i, cores in enumerate(flavor)}
    return sum(rule_step(row, config, most.get(row['pool'], settings.cores))
               for row in cell['rows'] if row['at'] == 'oracle')


def rule_floor(grid_json, cells):
    """UFO's CPUs against the floor the rules put under the Oracle's.

    A cell's floor is the Oracle's CPUs plus the cores the controller's
    rules add to its pools at the Oracle's size (:func:`rule_step`).
    Over the cells UFO and the Oracle both meet and this run read (a
    mirror reads as the cell the grid simulated): the mean of UFO's CPUs
    over the floor, and the cells where UFO holds more than its floor.
    """
    settings = settings_of(grid_json)
    config, smt = controller_of(settings), settings.smt
    grown = {cell['cell']: _rules_grow(cell, config, settings)
             for cell in cells}
    by_cell = {}
    for result in grid_json['results']:
        by_cell.setdefault(result['cell'], {})[result['manager']] = result
    ratios, above, unread = [], [], []
    for key, found in sorted(by_cell.items()):
        ufo, oracle = found.get('ufo'), found.get('oracle')
        if not (ufo and oracle and ufo['qos_met'] and oracle['qos_met']):
            continue
        read_as = (oracle.get('detail') or {}).get('mirror_of', key)
        if read_as not in grown:
            unread.append(key)
            continue
        floor = oracle['cpus_mean'] + smt * grown[read_as]
        ratios.append(ufo['cpus_mean'] / floor)
        if ufo['cpus_mean'] > floor:
            above.append({'cell': key, 'ufo': ufo['cpus_mean'],
                          'oracle': oracle['cpus_mean'], 'floor': floor})
    return {'cells': len(ratios),
            'ufo_over_floor': (sum(ratios) / len(ratios) if ratios
                               else None),
            'above_floor': above, 'unread': unread}


def _spread(values):
    if not values:
        return None
    ordered = sorted(values)
    return {'min': ordered[0], 'median': ordered[len(ordered) // 2],
            'max': ordered[-1]}


def _measure_cell(task):
    key, counts, emulator, settings = task
    cell = cell_mod.Cell.from_key(key)
    steps = neighbours(counts, emulator, settings.cores)
    measured = {label: allocation.measure(cell, settings, c, e)
                for label, (c, e) in steps.items()}
    return read_cell(key, measured, controller_of(settings))


def run(grid_json, processes=2, timeout=600.0):
    """Measure and read every Oracle-met cell of a saved grid run."""
    settings = settings_of(grid_json)
    tasks = [(key, counts, emulator, settings)
             for key, counts, emulator in oracle_cells(grid_json)]
    done = parallel.run(_measure_cell, tasks, processes, timeout)
    cells, lost, remeasured_miss = [], [], []
    for task, (status, value) in zip(tasks, done):
        if status != parallel.OK:
            lost.append('%s: %s %s' % (task[0], status, value or ''))
        elif value is None:
            remeasured_miss.append(task[0])
        else:
            cells.append(value)
    return {'conditions': settings.describe(),
            'controller': dataclasses.asdict(controller_of(settings)),
            'cells': cells, 'lost': lost,
            'oracle_missed_when_remeasured': remeasured_miss,
            'summary': summarize(cells),
            'rule_floor': rule_floor(grid_json, cells)}


def table(out):
    """The summary as text."""
    lines = ['conditions: %s' % out['conditions'],
             '%d cells the Oracle meets read; %d left out because the '
             "Oracle's allocation missed QoS when measured again%s"
             % (len(out['cells']),
                len(out['oracle_missed_when_remeasured']),
                '; %d lost' % len(out['lost']) if out['lost'] else '')]
    for kind, label in (('vm', 'VM pools'), ('emulator', 'emulator pool')):
        s = out['summary'][kind]
        grown = ', '.join('%s %d' % item for item in
                          sorted(s['grown_at_oracle'].items())) or 'none'
        stopped = ', '.join('%s %d' % item for item in
                            sorted(s['smaller_missing_stopped_by'].items()))
        lines.append('%s: at the Oracle\'s size %d, grown there by %s; '
                     'one core smaller and missing QoS %d, read there as '
                     'short by %s' % (label, s['at_oracle'], grown,
                                      s['smaller_missing'],
                                      stopped or 'none'))
        lines.append('  %-15s %-22s %-22s %s' % (
            'signal', "at the Oracle's size", 'one smaller, missing',
            'best single threshold'))
        for name, cut in s['signals'].items():
            lines.append('  %-15s %-22s %-22s %s' % (
                name, _range(cut['fits']), _range(cut['short']),
                'none' if cut['threshold'] is None else
                '%.3f: %d errors of %d' % (cut['threshold'], cut['errors'],
                                           cut['of'])))
    floor = out['rule_floor']
    if floor['cells']:
        above = ''.join('; %s %g > %g' % (a['cell'], a['ufo'], a['floor'])
                        for a in floor['above_floor'])
        unread = (' (%d more not read)' % len(floor['unread'])
                  if floor['unread'] else '')
        lines.append("UFO against the Oracle's CPUs plus what the rules "
                     'add there, over %d cells both meet: '
                     'above it in %d%s%s'
                     % (floor['cells'], len(floor['above_floor']), above,
                        unread))
        lines.append('RESULT edge_ufo_over_rule_floor_ratio=%.3f '
                     'edge_cells_above_rule_floor=%d edge_floor_cells=%d'
                     % (floor['ufo_over_floor'], len(floor['above_floor']),
                        floor['cells']))
    return '\n'.join(lines)


def _range(spread):
    if spread is None:
        return '-'
    return '%.2f / %.2f / %.2f' % (spread['min'], spread['median'],
                                   spread['max'])
