"""The grid's headline figures, computed from per-cell results.

Definitions (the results page quotes them):

* a cell is *QoS-feasible* for a manager when every VM met its p99
  target with an allocation inside the budget (16 CPUs);
* ``ufo_vs_dyniso_core_saving_avg`` / ``_max``: over the cells feasible
  for both UFO and DynIso, the mean and the largest of
  ``100 x (DynIso CPUs - UFO CPUs) / DynIso CPUs`` (negative when UFO
  holds more);
* ``ufo_over_oracle_cores``: over the cells feasible for both UFO and the
  Oracle, the mean of ``UFO CPUs - Oracle CPUs`` (logical CPUs);
* ``<manager>_qos_feasible_cells_pct``: feasible cells / all cells x 100.

Results are plain dicts (``CellResult.to_json()``), so a summary can be
recomputed from a saved JSON file.
"""

RESULT_KEYS = ('ufo_vs_dyniso_core_saving_avg',
               'ufo_vs_dyniso_core_saving_max', 'ufo_over_oracle_cores',
               'ufo_qos_feasible_cells_pct', 'dyniso_qos_feasible_cells_pct')


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


def figures(results, budget_cpus, cells=None):
    """The RESULT figures over ``cells`` (default: every cell seen)."""
    table = index(results)
    if cells is None:
        cells = sorted({r['cell'] for r in results})
    ufo, dyn, orc = (table.get(m, {}) for m in ('ufo', 'dyniso', 'oracle'))
    savings = [100.0 * (dyn[c]['cpus'] - ufo[c]['cpus']) / dyn[c]['cpus']
               for c in both_feasible(table, 'ufo', 'dyniso', cells,
                                      budget_cpus)]
    excess = [ufo[c]['cpus'] - orc[c]['cpus']
              for c in both_feasible(table, 'ufo', 'oracle', cells,
                                     budget_cpus)]
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
        'errors': sum(1 for r in results if r['cell'] in set(cells) and
                      'error' in r['detail']),
    }


def result_line(values):
    return 'RESULT ' + ' '.join('%s=%.2f' % (k, values[k])
                                for k in RESULT_KEYS)
