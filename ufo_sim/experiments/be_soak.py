"""BE soak mode against UFO's idle pool (issue 15, item 2).

Each cell is an LC pair of the grid plus one best-effort VM (the BE
profile of the calibration's BE rows), all managed by the real agent
(the BE VM as ``vm_class='be'``), once per BE policy:

* ``idle-pool``: UFO parks BE guests in the idle pool;
* ``soak``: the BE guest's vCPU threads are SCHED_IDLE (cgroup v2
  ``cpu.idle``) and may run on every managed CPU but the emulator
  pool's, taking only what the LC pools leave idle (Eunomia's idea).

Per cell and policy: the BE VM's throughput (work chunks per real
second, and the CPUs it kept busy) and each LC VM's p99 and QoS verdict
over the judged window. Soak needs the agent's ``[controller]
be_policy`` option (``ControllerConfig.be_policy``); without it only the
idle pool runs and the report says so.
"""

import dataclasses

from ufo_agent.controller import config as controller_config
from ufo_sim import engine
from ufo_sim.experiments import grid as grid_mod
from ufo_sim.experiments import parallel
from ufo_sim.managers import scenario
from ufo_sim.managers import ufo as ufo_mod
from ufo_sim import profiles

POLICIES = ('idle-pool', 'soak')
BE_NAME = 'be'
BE_VCPUS = 8
QUICK_LOADS = (0.2, 0.5)
UNSUPPORTED = ('soak needs the agent\'s BE soak support: '
               'ControllerConfig has no be_policy field ([controller] '
               'be_policy); only the idle pool was run')


def soak_supported():
    """Whether this agent's ControllerConfig knows ``be_policy``."""
    return 'be_policy' in {
        f.name for f in dataclasses.fields(controller_config.ControllerConfig)}


def config_of(settings, policy):
    """The controller's configuration for ``policy``.

    ValueError if ``policy`` is soak and the agent cannot do it.
    """
    values = dict(settings.ufo_config)
    if soak_supported():
        values['be_policy'] = policy
    elif policy != 'idle-pool':
        raise ValueError(UNSUPPORTED)
    return controller_config.ControllerConfig(**values)


def cells(loads, mix_list=None):
    """The LC pairs' cells, one per pair of loads up to symmetry."""
    return [cell for mix in mix_list or grid_mod.mixes()
            for cell in grid_mod.cells_of(mix, loads)
            if grid_mod.canonical(cell)[0] == cell]


def run_cell(cell, settings, policy):
    """One cell under one BE policy; a dict of what was measured."""
    lc = scenario.build(cell, settings, cell.seed(settings.seed, ufo_mod.NAME))
    host = lc.host
    be = host.add_vm(BE_NAME, BE_VCPUS, profiles.BE(BE_VCPUS))
    managed = scenario.Scene(host, lc.vms + [be],
                             lc.profiles + [profiles.BE(BE_VCPUS)],
                             lc.rps + [0.0], lc.vcpus + [BE_VCPUS])
    agent = ufo_mod.UfoAgent(managed, config_of(settings, policy),
                             vm_class=['lc'] * len(lc.vms) + ['be'])
    start = {}
    control = scenario.ticking_agent(agent, settings, host, be, start)
    window, held = scenario.run_feedback(lc, settings, agent.held_cpus,
                                         control)
    if 'be' not in start:          # nothing to settle: judged from 0
        start['be'] = engine.VmCounters(
            *([0] * len(dataclasses.fields(engine.VmCounters))))
    end = host.counters(be)
    sim_seconds = settings.judge * settings.tick
    real_seconds = sim_seconds / engine.TIME_SCALE
    plan = agent.agent.last_plan
    return {
        'cell': cell.key, 'policy': policy,
        'be_chunks_per_s': (end.requests_done -
                            start['be'].requests_done) / real_seconds,
        'be_cpus': (end.vcpu_cpu_ns - start['be'].vcpu_cpu_ns) /
        (sim_seconds * 1e9),
        'be_cores_in_plan': len(plan.vms[be].cpus) if plan else None,
        'lc': [{'profile': v.profile, 'load': v.load, 'p99_us': p99,
                'qos_p99_us': prof.qos_p99_us, 'qos_met': ok}
               for v, p99, prof, ok in zip(cell.vms, window.p99_us,
                                           lc.profiles, window.ok)],
        'lc_qos_met': window.all_ok,
        'cpus_held_max': max(held) if held else None,
    }


def _task(task):
    cell, settings, policy = task
    return run_cell(cell, settings, policy)


def _pct(new, old):
    if old is None or new is None or not old:
        return None
    return 100.0 * (new - old) / old


def _mean(values):
    values = [v for v in values if v is not None]
    return sum(values) / len(values) if values else None


def _median(values):
    values = sorted(v for v in values if v is not None)
    if not values:
        return None
    mid = len(values) // 2
    return values[mid] if len(values) % 2 else \
        (values[mid - 1] + values[mid]) / 2


def summarize(results, soak):
    """Per cell both policies side by side, and the averages."""
    by = {(r['cell'], r['policy']): r for r in results}
    keys = sorted({r['cell'] for r in results})
    rows, gains, changes = [], [], []
    qos = {p: 0 for p in POLICIES}
    for key in keys:
        row = {'cell': key}
        for policy in POLICIES:
            r = by.get((key, policy))
            row[policy] = r
            if r is not None and r.get('lc_qos_met'):
                qos[policy] += 1
        idle, soaked = row['idle-pool'], row['soak']
        if idle is not None and soaked is not None and \
                'error' not in idle and 'error' not in soaked:
            row['be_gain_pct'] = _pct(soaked['be_chunks_per_s'],
                                      idle['be_chunks_per_s'])
            row['lc_p99_change_pct'] = [
                _pct(s['p99_us'], i['p99_us'])
                for s, i in zip(soaked['lc'], idle['lc'])]
            gains.append(row['be_gain_pct'])
            changes.extend(row['lc_p99_change_pct'])
        rows.append(row)
    return {'soak_supported': soak, 'rows': rows,
            'be_throughput_gain_pct_avg': _mean(gains),
            'lc_p99_change_pct_avg': _mean(changes),
            # The mean follows the cells already past QoS, where a p99
            # moves by orders of magnitude; the median does not.
            'lc_p99_change_pct_median': _median(changes),
            'lc_qos_cells_idle_pool': qos['idle-pool'],
            'lc_qos_cells_soak': qos['soak'] if soak else None,
            'cells': len(keys)}


def run(settings, loads, mix_list=None, processes=2, timeout=600.0):
    """Every cell under each policy the agent supports."""
    soak = soak_supported()
    policies = POLICIES if soak else POLICIES[:1]
    tasks = [(cell, settings, policy) for cell in cells(loads, mix_list)
             for policy in policies]
    results = []
    for (cell, _, policy), (status, value) in zip(
            tasks, parallel.run(_task, tasks, processes, timeout)):
        if status != parallel.OK:
            value = {'cell': cell.key, 'policy': policy,
                     'error': '%s: %s' % (status, value),
                     'lc_qos_met': False}
        results.append(value)
    out = summarize(results, soak)
    out.update(conditions=settings.describe(), loads=list(loads),
               results=results)
    out['result_line'] = result_line(out)
    return out


def _fmt(value, spec='%.1f'):
    return 'n/a' if value is None else spec % value


def result_line(out):
    return ('RESULT be_throughput_gain_pct_avg=%s lc_p99_change_pct_avg=%s '
            'lc_qos_cells_idle_pool=%d lc_qos_cells_soak=%s' % (
                _fmt(out['be_throughput_gain_pct_avg']),
                _fmt(out['lc_p99_change_pct_avg']),
                out['lc_qos_cells_idle_pool'],
                _fmt(out['lc_qos_cells_soak'], '%d')))


def _side(r):
    if r is None:
        return 'not run'
    if 'error' in r:
        return 'error: %s' % r['error']
    lc = ' '.join('%s p99=%.0fus%s' % (v['profile'], v['p99_us'],
                                       '' if v['qos_met'] else ' QoS-miss')
                  for v in r['lc'])
    return 'BE %.0f chunks/s (%.2f CPUs)  %s' % (r['be_chunks_per_s'],
                                                 r['be_cpus'], lc)


def table(out):
    """Text report: per cell both policies, then the averages."""
    lines = ['conditions: %s' % out['conditions']]
    if not out['soak_supported']:
        lines.append('NOTE: ' + UNSUPPORTED)
    for row in out['rows']:
        lines.append(row['cell'])
        for policy in POLICIES:
            lines.append('  %-9s %s' % (policy, _side(row[policy])))
        if row.get('be_gain_pct') is not None:
            lines.append('  soak vs idle-pool: BE %+.1f%%, LC p99 %s' % (
                row['be_gain_pct'], ' '.join(
                    _fmt(c, '%+.1f%%') for c in row['lc_p99_change_pct'])))
    lines.append('LC p99 change, median over LC VMs and cells: %s'
                 % _fmt(out['lc_p99_change_pct_median'], '%+.1f%%'))
    lines.append(out['result_line'])
    return '\n'.join(lines)
