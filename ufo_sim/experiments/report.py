"""Turn a finished grid into its JSON summary, tables and figures."""

import os

from ufo_sim.experiments import grid as grid_mod
from ufo_sim.experiments import mal as mal_mod
from ufo_sim.experiments import summary
from ufo_sim.managers import cell as cell_mod


def _budget(settings):
    return settings['cores'] * settings['smt']


def grid_report(data, out, plots=True):
    """Summarized grid.json content; writes one heatmap PNG per pair.

    ``data`` is a grid's grid.json content without its summaries.
    """
    data = summarize(data)
    if plots:
        for name in data['mixes']:
            mix = tuple(name.split('+'))
            if len(mix) != 2:
                continue         # a heatmap has two axes
            heatmap(data, mix, os.path.join(out, 'grid-%s.png' % name))
    return data


def summarize(data):
    """Add the summaries and the RESULT line to grid.json content."""
    budget = _budget(data['settings'])
    table = summary.index(data['results'])
    cells = {}
    for name in data['mixes']:
        mix = tuple(name.split('+'))
        cells[name] = [c.key for c in grid_mod.cells_of(mix, data['loads'])]
    everything = [key for name in data['mixes'] for key in cells[name]]
    data['summary'] = summary.figures(data['results'], budget, everything)
    data['per_mix'] = {}
    for name in data['mixes']:
        per = summary.figures(data['results'], budget, cells[name])
        per['feasible_pct'] = {
            m: summary.feasible_pct(table, m, cells[name], budget)
            for m in data['managers']}
        data['per_mix'][name] = per
    data['summary'].update(summary.by_mix(data['per_mix']))
    data['yardstick_line'] = summary.yardstick_line(data['summary'])
    data['result_line'] = summary.result_line(data['summary'])
    data['conditions'] = conditions_line(data)
    return data


def conditions_line(data):
    """What produced a grid, printed above its RESULT line."""
    settings = cell_mod.Settings(**{
        k: tuple(tuple(pair) for pair in v) if isinstance(v, list) else v
        for k, v in data['settings'].items()})
    return 'conditions: mixes=%s loads=%s managers=%s %s' % (
        ','.join(data['mixes']), ','.join('%g' % x for x in data['loads']),
        ','.join(data['managers']), settings.describe())


def heatmap(data, mix, path):
    """Draw one pair's heatmaps from grid.json content."""
    from ufo_sim.experiments import plots
    budget = _budget(data['settings'])
    table = summary.index(data['results'])

    def value(manager, a, b):
        key = cell_mod.Cell((cell_mod.VmLoad(mix[0], a),
                             cell_mod.VmLoad(mix[1], b))).key
        r = table.get(manager, {}).get(key)
        if r is None or r['cpus'] is None:
            return None, False
        # Static pinning may meet QoS above the budget: show its cost.
        return r['cpus'], bool(r['qos_met'])

    plots.heatmaps(path, '%s: host CPUs to meet QoS (budget %d)'
                   % (grid_mod.mix_name(mix), budget),
                   data['loads'], data['managers'], value, budget)


def _fmt(x, spec='%.1f'):
    if x is None or x != x:
        return '-'
    return spec % x


def grid_table(data):
    width = max([20] + [len(m) for m in data['per_mix']])
    lines = ['%-*s %8s %8s %8s %8s %8s  %s' % (
        width, 'mix', 'default', 'dyniso', 'static', 'ufo', 'oracle',
        'saving avg/max vs DynIso, UFO-Oracle')]
    for mix, per in data['per_mix'].items():
        pct = per['feasible_pct']
        lines.append('%-*s %8s %8s %8s %8s %8s  %s/%s, %s' % (
            width, mix, *(_fmt(pct.get(m), '%.0f%%') for m in (
                'default', 'dyniso', 'static', 'ufo', 'oracle')),
            _fmt(per['ufo_vs_dyniso_core_saving_avg']),
            _fmt(per['ufo_vs_dyniso_core_saving_max']),
            _fmt(per['ufo_over_oracle_cores'], '%.2f')))
    lines.append('(columns: %% of cells meeting QoS within %d CPUs)'
                 % _budget(data['settings']))
    totals = data['summary']
    lines.append('%-13s %10s %10s %12s   (all %d cells, judged window)' % (
        'manager', 'CPUs mean', 'CPUs max', 'QoS viol. s', totals['cells']))
    for m in data['managers']:
        lines.append('%-13s %10s %10s %12s' % (
            m, _fmt(totals.get(m + '_cpus_mean_avg')),
            _fmt(totals.get(m + '_cpus_max_max'), '%.0f'),
            _fmt(totals.get(m + '_qos_violation_s_avg'), '%.2f')))
    lines.append('UFO/Oracle CPUs %s; saving vs DynIso over the %d cells '
                 'all three meet: UFO %s%%, Oracle %s%%' % (
                     _fmt(totals['ufo_over_oracle_ratio'], '%.2f'),
                     totals['cells_compared_all_three'],
                     _fmt(totals['ufo_vs_dyniso_core_saving_avg_common']),
                     _fmt(totals['oracle_vs_dyniso_core_saving_avg'])))
    if 'host_only_over_oracle_ratio' in totals:
        lines.append('host-only UFO (no guest module): meets QoS in %s%% of '
                     'the cells; host-only/Oracle CPUs %s, host-only/UFO '
                     'CPUs %s, saving vs DynIso %s%%' % (
                         _fmt(totals['host_only_qos_feasible_cells_pct']),
                         _fmt(totals['host_only_over_oracle_ratio'], '%.2f'),
                         _fmt(totals['host_only_over_ufo_ratio'], '%.2f'),
                         _fmt(totals['host_only_vs_dyniso_core_saving_avg'])))
    if 'oracle_wide_over_oracle_ratio' in totals:
        lines.append('wide Oracle (emulator threads on a VM\'s own cores '
                     'allowed): meets QoS in %s%% of the cells; wide/Oracle '
                     'CPUs %s, UFO/wide CPUs %s' % (
                         _fmt(totals['oracle_wide_qos_feasible_cells_pct']),
                         _fmt(totals['oracle_wide_over_oracle_ratio'],
                              '%.2f'),
                         _fmt(totals['ufo_over_oracle_wide_ratio'], '%.2f')))
    if 'oracle_met_cells' in totals:
        lines.append(yardstick_table(totals))
    if data['summary']['errors']:
        lines.append('%d runs gave no result (see "error" in grid.json)'
                     % data['summary']['errors'])
    return '\n'.join(lines)


def yardstick_table(totals):
    """UFO beside the Oracle, in words (:func:`summary.yardstick`)."""
    lines = ['UFO beside the Oracle (%d seeds per cell, each manager on the '
             'same): the Oracle meets %d cells, UFO %d of them (recall '
             '%s%%) and %d it does not; neither meets %d' % (
                 totals['seeds_per_cell'], totals['oracle_met_cells'],
                 totals['both_met_cells'], _fmt(totals['ufo_recall_pct']),
                 totals['ufo_only_cells'], totals['neither_met_cells']),
             'UFO/Oracle CPUs over the %d cells both meet: %s' % (
                 totals['both_met_cells'],
                 _fmt(totals['both_met_ufo_over_oracle_ratio'], '%.2f'))]
    misses = totals.get('oracle_only_misses') or {}
    if misses:
        lines.append('UFO\'s misses where the Oracle meets (worst p99 / '
                     'target): ' + ', '.join(
                         '%s %s' % (c, _fmt(v, '%.2f'))
                         for c, v in sorted(misses.items())))
    if totals['neither_met_cells']:
        lines.append('where neither meets: UFO %s CPUs and %s s of QoS '
                     'violation, the Oracle %s CPUs (over the budget)' % (
                         _fmt(totals['neither_ufo_cpus_avg']),
                         _fmt(totals['neither_ufo_violation_s_avg'], '%.2f'),
                         _fmt(totals['neither_oracle_cpus_avg'])))
    saving = sorted((k.split('.', 1)[1], v) for k, v in totals.items()
                    if k.startswith('ufo_vs_dyniso_saving_avg.'))
    lines.append('cores saved against DynIso: %s%% on average over the '
                 'cells (%s%% over the mixes: %s), at most %s%%; the paper '
                 '%g%% on average, at most %g%%' % (
                     _fmt(totals['ufo_vs_dyniso_core_saving_avg']),
                     _fmt(totals.get('ufo_vs_dyniso_saving_mix_avg')),
                     ', '.join('%s %s' % (m, _fmt(v)) for m, v in saving),
                     _fmt(totals['ufo_vs_dyniso_core_saving_max']),
                     totals['paper_saving_avg'],
                     totals['paper_saving_max']))
    return '\n'.join(lines)


def mal_report(data, out, plots=True):
    budget = _budget(data['settings'])
    smt = data['settings']['smt']
    counts = list(range(smt, budget + 1, smt))
    managers = [m for m in data['managers'] if m != 'static']
    per_mix = {}
    gains = []
    for name in data['mixes']:
        mix = tuple(name.split('+'))
        cells = [c.key for c in grid_mod.cells_of(mix, data['loads'])]
        curves = {m: mal_mod.mal(data['results'], m, cells, counts, budget)
                  for m in managers}
        entry = {m: {str(p): v for p, v in curve.items()}
                 for m, curve in curves.items()}
        if 'ufo' in curves and 'dyniso' in curves:
            avg, top = mal_mod.gain(curves['ufo'], curves['dyniso'])
            entry['ufo_vs_dyniso_mal_gain_avg'] = avg
            entry['ufo_vs_dyniso_mal_gain_max'] = top
            if avg is not None:
                gains.append((avg, top))
        per_mix[name] = entry
        if plots:
            from ufo_sim.experiments import plots as plots_mod
            plots_mod.lines(
                os.path.join(out, 'mal-%s.png' % name),
                '%s: maximum aggregated load' % name, 'host CPUs',
                'MAL (% of max load, summed)',
                {plots_mod.MANAGER_LABELS.get(m, m):
                 (counts, [curves[m][p] for p in counts]) for m in managers})
    overall = {}
    if gains:
        overall = {'ufo_vs_dyniso_mal_gain_avg':
                   sum(g[0] for g in gains) / len(gains),
                   'ufo_vs_dyniso_mal_gain_max': max(g[1] for g in gains)}
    return {'cpu_counts': counts, 'per_mix': per_mix, 'overall': overall}


def mal_table(out):
    lines = []
    for mix, entry in out['per_mix'].items():
        lines.append(mix)
        for m, curve in entry.items():
            if isinstance(curve, dict):
                lines.append('  %-8s %s' % (m, ' '.join(
                    '%3s' % (v if v is not None else '-')
                    for v in curve.values())))
        lines.append('  UFO vs DynIso MAL gain avg/max: %s/%s %%' % (
            _fmt(entry.get('ufo_vs_dyniso_mal_gain_avg')),
            _fmt(entry.get('ufo_vs_dyniso_mal_gain_max'))))
    lines.append('CPU counts: %s' % out['cpu_counts'])
    if out['overall']:
        lines.append('overall UFO vs DynIso MAL gain avg %.1f%%, max %.1f%%'
                     % (out['overall']['ufo_vs_dyniso_mal_gain_avg'],
                        out['overall']['ufo_vs_dyniso_mal_gain_max']))
    return '\n'.join(lines)
