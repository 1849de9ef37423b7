"""The grid's headline figures, computed from per-cell results.

Definitions (the results page quotes them):

* a cell is *QoS-feasible* for a manager when every VM met its p99
  target with an allocation inside the budget (cores x SMT, 16 CPUs by
  default); a manager's CPUs in a cell are its ``cpus`` (the most held
  in the judged window);
* ``ufo_vs_dyniso_core_saving_avg`` / ``_max``: over the cells feasible
  for both UFO and DynIso, the mean and the largest of
  ``100 x (DynIso CPUs - UFO CPUs) / DynIso CPUs`` (negative when UFO
  holds more);
* ``ufo_over_oracle_cores``: over the cells feasible for both UFO and the
  Oracle, the mean of ``UFO CPUs - Oracle CPUs`` (logical CPUs);
  ``ufo_over_oracle_ratio``: over the same cells, the mean of
  ``UFO CPUs / Oracle CPUs`` (1 is optimal);
* ``<manager>_qos_feasible_cells_pct``: feasible cells / all cells x 100;
* ``oracle_vs_dyniso_core_saving_avg`` and
  ``ufo_vs_dyniso_core_saving_avg_common``: the saving as defined above,
  of the Oracle and of UFO, both over the *common* cells, feasible for
  UFO, DynIso and the Oracle alike (``cells_compared_all_three``), so
  the two can be set side by side (UFO's saving over its own cells,
  ``ufo_vs_dyniso_core_saving_avg``, is usually over more cells);
* ``<manager>_cpus_mean_avg`` and ``<manager>_cpus_max_max``: over every
  cell where the manager was judged, feasible or not, the mean of its
  mean CPUs held in the judged window and the largest it held there;
  ``<manager>_qos_violation_s_avg``: the mean seconds of QoS violation in
  that window (see :class:`~ufo_sim.managers.cell.CellResult`).

* with ``ufo-host-only`` (the agent with no guest module) among the
  managers, the same figures for it: ``host_only_over_oracle_ratio``,
  ``host_only_qos_feasible_cells_pct``,
  ``host_only_vs_dyniso_core_saving_avg`` (over the cells it and DynIso
  meet) and ``host_only_over_ufo_ratio`` (mean of host-only CPUs / UFO
  CPUs over the cells both meet), so that it stands beside UFO.

* with ``oracle-wide`` (the Oracle over the larger space where a VM's
  emulator threads may run on its own cores) among the managers:
  ``oracle_wide_qos_feasible_cells_pct``,
  ``oracle_wide_over_oracle_ratio`` (mean of its CPUs / the Oracle's
  over the cells both meet) and ``ufo_over_oracle_wide_ratio``.

The yardstick (:func:`yardstick`, :data:`YARDSTICK_KEYS`) sets UFO
beside the Oracle cell by cell, on results that hold every seed of a
cell (each manager on the same seeds; a cell is met when it is met on
every seed, see :func:`ufo_sim.experiments.grid.combine`):

* ``seeds_per_cell``: the fewest seeds any UFO or Oracle result holds;
* ``oracle_met_cells``, ``ufo_met_cells``: cells each meets within the
  budget; ``both_met_cells``, ``oracle_only_cells``, ``ufo_only_cells``,
  ``neither_met_cells``: the four classes of cells;
* ``ufo_recall_pct``: ``100 x both_met_cells / oracle_met_cells``, the
  share of the cells the Oracle shows feasible that UFO meets;
* ``both_met_ufo_over_oracle_ratio``: the mean of ``UFO CPUs / Oracle
  CPUs`` over the cells both meet (``ufo_over_oracle_ratio``);
* ``oracle_only_ufo_p99_over_target_median`` / ``_max``: the size of
  UFO's miss in each cell only the Oracle meets, its worst p99 over
  target (over the VMs and seeds; infinity for a VM that served
  nothing; at most 1 when it missed by not serving its load, or met
  QoS only over the budget); each cell's is in ``oracle_only_misses``;
* ``neither_ufo_cpus_avg``, ``neither_ufo_violation_s_avg``: in the
  cells neither meets, UFO's mean CPUs held and mean seconds of QoS
  violation in the judged window; ``neither_oracle_cpus_avg``: the
  Oracle's confirmed allocation there, over the budget or not (the
  cells where it found none are left out);
* ``paper_saving_avg`` (22) and ``paper_saving_max`` (50): the paper's
  cores saved against DynIso (section 6.2), beside
  ``ufo_vs_dyniso_core_saving_avg`` and ``_max``; with results of more
  than one mix (:func:`by_mix`), ``ufo_vs_dyniso_saving_mix_avg`` the
  mean of the mixes' averages and ``ufo_vs_dyniso_saving_avg.MIX`` each
  mix's.

Results are plain dicts (``CellResult.to_json()``), so a summary can be
recomputed from a saved JSON file.
"""

import math

RESULT_KEYS = ('ufo_vs_dyniso_core_saving_avg',
               'ufo_vs_dyniso_core_saving_max', 'ufo_over_oracle_cores',
               'ufo_qos_feasible_cells_pct', 'dyniso_qos_feasible_cells_pct',
               'ufo_over_oracle_ratio', 'oracle_vs_dyniso_core_saving_avg',
               'ufo_vs_dyniso_core_saving_avg_common')
# Per manager, after RESULT_KEYS, for the managers that ran.
MANAGER_KEYS = ('cpus_mean_avg', 'cpus_max_max')
MANAGER_ORDER = ('default', 'dyniso', 'static', 'ufo', 'ufo-host-only',
                 'oracle', 'oracle-wide')
HOST_ONLY = 'ufo-host-only'
HOST_ONLY_KEYS = ('host_only_over_oracle_ratio',
                  'host_only_qos_feasible_cells_pct',
                  'host_only_vs_dyniso_core_saving_avg',
                  'host_only_over_ufo_ratio')
WIDE = 'oracle-wide'
YARDSTICK_KEYS = ('seeds_per_cell', 'oracle_met_cells', 'ufo_met_cells',
                  'both_met_cells', 'oracle_only_cells', 'ufo_only_cells',
                  'neither_met_cells', 'ufo_recall_pct',
                  'both_met_ufo_over_oracle_ratio',
                  'oracle_only_ufo_p99_over_target_median',
                  'oracle_only_ufo_p99_over_target_max',
                  'neither_ufo_cpus_avg', 'neither_ufo_violation_s_avg',
                  'neither_oracle_cpus_avg',
                  'ufo_vs_dyniso_core_saving_avg',
                  'ufo_vs_dyniso_core_saving_max',
                  'paper_saving_avg', 'paper_saving_max')
# Cores saved against DynIso, paper section 6.2 (Fig. 12): 22 % on
# average, up to 50 %.
PAPER_SAVING_AVG = 22.0
PAPER_SAVING_MAX = 50.0
WIDE_KEYS = ('oracle_wide_qos_feasible_cells_pct',
             'oracle_wide_over_oracle_ratio', 'ufo_over_oracle_wide_ratio')


def feasible(result, budget_cpus):
    return bool(result['qos_met'] and result['cpus'] is not None and
                result['cpus'] <= budget_cpus)


def index(results):
    """{manager: {cell key: result}}."""
    table = {}
    for r in results:
        table.setdefault(r['manager'], {})[r['cell']] = r
    return table


def _mean(values):
    return sum(values) / len(values) if values else float('nan')


def feasible_pct(table, manager, cells, budget_cpus):
    rows = table.get(manager, {})
    if not cells or not rows:
        return float('nan')
    ok = sum(1 for c in cells if c in rows and
             feasible(rows[c], budget_cpus))
    return 100.0 * ok / len(cells)


def both_feasible(table, a, b, cells, budget_cpus):
    ra, rb = table.get(a, {}), table.get(b, {})
    return [c for c in cells if c in ra and c in rb and
            feasible(ra[c], budget_cpus) and feasible(rb[c], budget_cpus)]


def _saving(table, manager, c):
    dyn = table['dyniso'][c]['cpus']
    return 100.0 * (dyn - table[manager][c]['cpus']) / dyn


def managers_of(results):
    """Managers with results, in the order the tables show them."""
    seen = {r['manager'] for r in results}
    return [m for m in MANAGER_ORDER if m in seen] + sorted(
        seen - set(MANAGER_ORDER))


def held(table, manager, cells):
    """Per-manager figures of the judged windows over ``cells``."""
    rows = [table[manager][c] for c in cells if c in table.get(manager, {})]

    def values(key):
        return [r[key] for r in rows if r.get(key) is not None]
    top = values('cpus_max')
    return {'cpus_mean_avg': _mean(values('cpus_mean')),
            'cpus_max_max': max(top) if top else float('nan'),
            'qos_violation_s_avg': _mean(values('qos_violation_s'))}


def ratio_over(table, a, b, cells, budget_cpus):
    """Mean of ``a`` CPUs / ``b`` CPUs over the cells both meet."""
    return _mean([table[a][c]['cpus'] / table[b][c]['cpus']
                  for c in both_feasible(table, a, b, cells, budget_cpus)])


def host_only(table, cells, budget_cpus):
    """The host-only agent's figures (:data:`HOST_ONLY_KEYS`)."""
    if HOST_ONLY not in table:
        return {}
    return {
        'host_only_over_oracle_ratio': ratio_over(
            table, HOST_ONLY, 'oracle', cells, budget_cpus),
        'host_only_qos_feasible_cells_pct': feasible_pct(
            table, HOST_ONLY, cells, budget_cpus),
        'host_only_vs_dyniso_core_saving_avg': _mean(
            [_saving(table, HOST_ONLY, c) for c in both_feasible(
                table, HOST_ONLY, 'dyniso', cells, budget_cpus)]),
        'host_only_over_ufo_ratio': ratio_over(
            table, HOST_ONLY, 'ufo', cells, budget_cpus),
    }


def oracle_wide(table, cells, budget_cpus):
    """The wide Oracle's figures (:data:`WIDE_KEYS`)."""
    if WIDE not in table:
        return {}
    return {
        'oracle_wide_qos_feasible_cells_pct': feasible_pct(
            table, WIDE, cells, budget_cpus),
        'oracle_wide_over_oracle_ratio': ratio_over(
            table, WIDE, 'oracle', cells, budget_cpus),
        'ufo_over_oracle_wide_ratio': ratio_over(
            table, 'ufo', WIDE, cells, budget_cpus),
    }


def figures(results, budget_cpus, cells=None):
    """The RESULT figures over ``cells`` (default: every cell seen)."""
    table = index(results)
    if cells is None:
        cells = sorted({r['cell'] for r in results})
    ufo, orc = (table.get(m, {}) for m in ('ufo', 'oracle'))
    savings = [_saving(table, 'ufo', c)
               for c in both_feasible(table, 'ufo', 'dyniso', cells,
                                      budget_cpus)]
    with_oracle = both_feasible(table, 'ufo', 'oracle', cells, budget_cpus)
    excess = [ufo[c]['cpus'] - orc[c]['cpus'] for c in with_oracle]
    ratio = [ufo[c]['cpus'] / orc[c]['cpus'] for c in with_oracle]
    common = [c for c in with_oracle
              if c in both_feasible(table, 'ufo', 'dyniso', [c],
                                    budget_cpus)]
    per_manager = {}
    for m in managers_of(results):
        for key, value in held(table, m, cells).items():
            per_manager['%s_%s' % (m, key)] = value
    return {
        'ufo_vs_dyniso_core_saving_avg': _mean(savings),
        'ufo_vs_dyniso_core_saving_max': max(savings) if savings
        else float('nan'),
        'ufo_over_oracle_cores': _mean(excess),
        'ufo_qos_feasible_cells_pct': feasible_pct(table, 'ufo', cells,
                                                   budget_cpus),
        'dyniso_qos_feasible_cells_pct': feasible_pct(table, 'dyniso',
                                                      cells, budget_cpus),
        'cells': len(cells),
        'cells_compared_with_dyniso': len(savings),
        'cells_compared_with_oracle': len(excess),
        'ufo_over_oracle_ratio': _mean(ratio),
        'oracle_vs_dyniso_core_saving_avg': _mean(
            [_saving(table, 'oracle', c) for c in common]),
        'ufo_vs_dyniso_core_saving_avg_common': _mean(
            [_saving(table, 'ufo', c) for c in common]),
        'cells_compared_all_three': len(common),
        'errors': sum(1 for r in results if r['cell'] in set(cells) and
                      'error' in r['detail']),
        **host_only(table, cells, budget_cpus),
        **oracle_wide(table, cells, budget_cpus),
        **yardstick(table, cells, budget_cpus),
        **per_manager,
    }


def _median(values):
    ordered = sorted(values)
    if not ordered:
        return float('nan')
    mid = len(ordered) // 2
    if len(ordered) % 2:
        return ordered[mid]
    return (ordered[mid - 1] + ordered[mid]) / 2


def miss_size(result):
    """The worst p99 over target of a result, infinity when unknown."""
    ratios = result.get('p99_over_target') or [None]
    return max(math.inf if r is None else r for r in ratios)


def yardstick(table, cells, budget_cpus):
    """UFO beside the Oracle, cell by cell (:data:`YARDSTICK_KEYS`).

    Empty unless both ran.
    """
    if 'ufo' not in table or 'oracle' not in table:
        return {}
    ufo, orc = table['ufo'], table['oracle']
    cells = [c for c in cells if c in ufo and c in orc]
    u_met = {c for c in cells if feasible(ufo[c], budget_cpus)}
    o_met = {c for c in cells if feasible(orc[c], budget_cpus)}
    neither = [c for c in cells if c not in u_met | o_met]
    misses = {c: miss_size(ufo[c]) for c in sorted(o_met - u_met)}
    seeds = [len(r.get('seeds') or [None])
             for r in [ufo[c] for c in cells] + [orc[c] for c in cells]]
    oracle_cpus = [orc[c]['cpus_mean'] for c in neither
                   if orc[c].get('cpus_mean') is not None]
    return {
        'seeds_per_cell': min(seeds) if seeds else 0,
        'oracle_met_cells': len(o_met), 'ufo_met_cells': len(u_met),
        'both_met_cells': len(u_met & o_met),
        'oracle_only_cells': len(o_met - u_met),
        'ufo_only_cells': len(u_met - o_met),
        'neither_met_cells': len(neither),
        'ufo_recall_pct': 100.0 * len(u_met & o_met) / len(o_met)
        if o_met else float('nan'),
        'both_met_ufo_over_oracle_ratio': ratio_over(
            table, 'ufo', 'oracle', cells, budget_cpus),
        'oracle_only_ufo_p99_over_target_median': _median(
            misses.values()),
        'oracle_only_ufo_p99_over_target_max': max(misses.values())
        if misses else float('nan'),
        'oracle_only_misses': misses,
        'neither_ufo_cpus_avg': _mean([
            ufo[c]['cpus_mean'] for c in neither
            if ufo[c].get('cpus_mean') is not None]),
        'neither_ufo_violation_s_avg': _mean([
            ufo[c]['qos_violation_s'] for c in neither
            if ufo[c].get('qos_violation_s') is not None]),
        'neither_oracle_cpus_avg': _mean(oracle_cpus),
        'paper_saving_avg': PAPER_SAVING_AVG,
        'paper_saving_max': PAPER_SAVING_MAX,
    }


def by_mix(per_mix):
    """The mixes' savings against DynIso: {key: value}.

    ``per_mix`` maps a mix's name to its :func:`figures`.
    """
    saving = {name: per['ufo_vs_dyniso_core_saving_avg']
              for name, per in per_mix.items()}
    known = [v for v in saving.values() if v == v]
    out = {'ufo_vs_dyniso_saving_mix_avg': _mean(known)}
    out.update(('ufo_vs_dyniso_saving_avg.%s' % name, value)
               for name, value in saving.items())
    return out


def yardstick_line(values):
    """The yardstick's RESULT line (the keys ``values`` has)."""
    keys = [k for k in YARDSTICK_KEYS if k in values]
    keys += sorted(k for k in values
                   if k.startswith('ufo_vs_dyniso_saving_'))
    return 'RESULT ' + ' '.join('%s=%.2f' % (k, values[k]) for k in keys)


def result_line(values):
    keys = list(RESULT_KEYS) + [k for k in HOST_ONLY_KEYS + WIDE_KEYS
                                if k in values]
    keys += ['%s_%s' % (m, k) for m in MANAGER_ORDER for k in MANAGER_KEYS
             if '%s_%s' % (m, k) in values]
    return 'RESULT ' + ' '.join('%s=%.2f' % (k, values[k]) for k in keys)
