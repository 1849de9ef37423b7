"""The held-out grid protocol as one set of ``ufo-sim grid`` runs.

A controller change is judged on grids nobody tuned on (sim-results,
"Held-out protocol for controller changes"): other seeds and loads, a
three-VM mix, other flavors and host sizes, and the model's parameters
at 0.7 and 1.3 times their calibrated values. :data:`PROTOCOL` names
those runs (H1-H9) and the two tuning grids; :func:`run` runs any of
them and keeps, per run, every cell's result and the grid's figures;
:func:`compare` pairs a set with a baseline set, run by run and cell by
cell: which cells UFO meets or misses that it did not, and which
Oracle-met cells it misses.

The Oracle's answer does not depend on UFO's options, so a set may take
the Oracle's results from a baseline set of the same runs
(``oracle_from``) instead of searching again; and a grid run earlier
with ``ufo-sim grid`` may be taken into a set as it is (``saved``),
once it is checked to be the protocol's grid of that name.
"""

import dataclasses
import json
import math

from ufo_sim.engine import spec as spec_mod
from ufo_sim.experiments import grid as grid_mod
from ufo_sim.experiments import report
from ufo_sim.experiments import summary
from ufo_sim.managers import cell as cell_mod

HELD_OUT_LOADS = (0.3, 0.6, 0.9)
# What a set keeps of a result's detail: enough for the figures and for
# ``ufo-sim edge`` on a grid.json rebuilt with reused Oracle results.
_DETAIL_KEPT = ('vm_cores', 'emulator_cores', 'emulator_home', 'mirror_of',
                'error')
# Whose results a set keeps (the figures are computed from them all).
_MANAGERS_KEPT = ('ufo', 'oracle', 'oracle-wide')


@dataclasses.dataclass(frozen=True)
class SetRun:
    """One grid of the protocol: what it varies and the grid's options."""

    name: str
    what: str
    loads: tuple = HELD_OUT_LOADS
    mixes: tuple = None             # None: the six pairs
    seed: int = 1
    seeds: int = 3                  # seeds per cell, from ``seed`` up
    cores: int = 8
    smt: int = 2
    vcpus: tuple = ()
    host_options: tuple = ()
    quick: bool = False             # the quick grid's shorter settling
    tuning: bool = False            # a grid changes may be tuned on

    def settings(self, ufo_config=()):
        """The :class:`~ufo_sim.managers.cell.Settings` of this grid."""
        extra = {'converge': 20, 'judge': 6} if self.quick else {}
        return cell_mod.Settings(cores=self.cores, smt=self.smt,
                                 seed=self.seed, seeds=self.seeds,
                                 vcpus=self.vcpus,
                                 host_options=self.host_options,
                                 ufo_config=tuple(ufo_config), **extra)

    def mix_list(self):
        return [tuple(m.split('+')) for m in self.mixes] if self.mixes \
            else grid_mod.mixes()

    def first_cells(self):
        """One cell of each mix: enough to check that a host builds."""
        return [grid_mod.cells_of(m, self.loads[:1])[0]
                for m in self.mix_list()]


# The model's parameters varied by H9, each group at 0.7 and 1.3 times its
# calibrated value; for the SMT slowdowns, their excess over 1.
_H9_GROUPS = (
    ('cache_refill', ('cache_refill',), 'cache_refill'),
    ('cache_same_group', ('cache_same_group',), 'cache_same_group'),
    ('cold_slowdown', ('cold_slowdown',), 'cold_slowdown'),
    ('smt', ('smt_slowdown', 'smt_cross_slowdown', 'smt_emu_slowdown'),
     "the three SMT slowdowns' excess over 1"),
    ('emu_wakeup+irq_inject', ('emu_wakeup', 'irq_inject'),
     'emu_wakeup and irq_inject'),
    ('lock_spin', ('lock_spin',), 'lock_spin'),
    ('migration_cost', ('migration_cost',), 'migration_cost'),
    ('guest_migration_cost', ('guest_migration_cost',),
     'guest_migration_cost'),
)
_H9_FACTORS = (0.7, 1.3)


def _h9_runs():
    runs = []
    for label, fields, what in _H9_GROUPS:
        for factor in _H9_FACTORS:
            options = []
            for name in fields:
                value = getattr(spec_mod.HostSpec, name)
                if name.startswith('smt_'):
                    value = 1.0 + (value - 1.0) * factor
                else:
                    value *= factor
                options.append((name, round(value, 12)))
            runs.append(SetRun(
                'H9-%s-x%g' % (label, factor),
                '%s at %g times the calibrated value' % (what, factor),
                mixes=('memcached+memcached', 'nginx+mysql'),
                host_options=tuple(options)))
    return runs


PROTOCOL = (
    SetRun('quick', 'the quick grid (tuning set)',
           loads=grid_mod.QUICK_LOADS, quick=True, tuning=True),
    SetRun('full-memcached', 'the full Memcached grid (tuning set)',
           loads=grid_mod.FULL_LOADS, mixes=('memcached+memcached',),
           tuning=True),
    # Three seeds per cell each, none shared between H1-H3.
    SetRun('H1', 'seeds 2-4, loads 30/60/90', seed=2),
    SetRun('H2', 'seeds 5-7', seed=5),
    SetRun('H3', 'seeds 8-10', seed=8),
    SetRun('H4', 'a three-VM mix', mixes=('memcached+nginx+mysql',)),
    SetRun('H5', '4-vCPU flavors', vcpus=(('*', 4),)),
    SetRun('H6', '16-vCPU flavors', vcpus=(('*', 16),), loads=(0.3, 0.6)),
    SetRun('H7', 'a 12-core host', cores=12),
    SetRun('H8', 'SMT off, 16 cores', smt=1, cores=16),
) + tuple(_h9_runs())
BY_NAME = {r.name: r for r in PROTOCOL}
HELD_OUT = tuple(r.name for r in PROTOCOL if not r.tuning)


def _kept(result):
    detail = {k: v for k, v in result['detail'].items() if k in _DETAIL_KEPT}
    p99 = [round(x, 1) if x is not None and math.isfinite(x) else None
           for x in result['p99_us']]
    return dict(result, detail=detail, p99_us=p99)


def _oracle_of(base, protocol_run):
    """The Oracle's results of ``protocol_run`` in ``base``, or None.

    Only from a record of the same grid (settings apart from UFO's
    options, loads, mixes) that has them.
    """
    for rec in (base or {}).get('runs', ()):
        if rec['name'] == protocol_run.name and \
                'oracle' in rec['managers'] and \
                _same_grid(protocol_run, rec['settings'], rec['loads'],
                           rec['mixes']):
            return [r for r in rec['results'] if r['manager'] == 'oracle']
    return None


def _plain(value):
    """Tuples as lists, as JSON gives them back."""
    return json.loads(json.dumps(value))


def oracle_met_misses(results, budget):
    """Cells the Oracle meets within ``budget`` CPUs and UFO does not."""
    table = summary.index(results)
    ufo, oracle = table.get('ufo', {}), table.get('oracle', {})
    return sorted(c for c, r in oracle.items()
                  if summary.feasible(r, budget) and c in ufo and
                  not summary.feasible(ufo[c], budget))


def met_cells(results, manager, budget):
    """Cells ``manager`` meets within ``budget`` CPUs."""
    return sorted(c for c, r in summary.index(results).get(manager,
                                                           {}).items()
                  if summary.feasible(r, budget))


def _same_grid(protocol_run, settings, loads, mixes):
    """Saved settings, loads and mixes are ``protocol_run``'s grid's."""
    return grid_mod.identity(settings, loads, mixes) == grid_mod.identity(
        protocol_run.settings(), protocol_run.loads, protocol_run.mix_list())


def record_of(protocol_run, data, oracle_reused=False):
    """The set's record of one grid from its grid.json content."""
    budget = data['settings']['cores'] * data['settings']['smt']
    return {
        'name': protocol_run.name, 'what': protocol_run.what,
        'settings': _plain(data['settings']), 'loads': data['loads'],
        'mixes': data['mixes'], 'managers': data['managers'],
        'oracle_reused': oracle_reused,
        'conditions': data['conditions'],
        'result_line': data['result_line'],
        'yardstick_line': data.get('yardstick_line') or
        summary.yardstick_line(data['summary']),
        'summary': data['summary'],
        'met': {m: len(met_cells(data['results'], m, budget))
                for m in data['managers']},
        'oracle_met_ufo_missed': oracle_met_misses(data['results'], budget),
        'wall_seconds': data['wall_seconds'],
        'results': _plain([_kept(r) for r in data['results']
                           if r['manager'] in _MANAGERS_KEPT]),
    }


def run_one(protocol_run, managers, ufo_config=(), processes=2,
            timeout=600.0, oracle=None, progress=None):
    """One grid of the protocol: (grid.json content, set record).

    ``oracle`` is the Oracle's results of the same grid to reuse (see
    :func:`_oracle_of`); the Oracle is then not run again.
    """
    settings = protocol_run.settings(ufo_config)
    mixes = protocol_run.mix_list()
    simulate = [m for m in managers if m != 'oracle' or oracle is None]
    grid = grid_mod.run(settings, protocol_run.loads, simulate, mixes,
                        processes=processes, progress=progress,
                        timeout=timeout)
    data = grid.to_json()
    data['managers'] = list(managers)
    reused = oracle is not None and 'oracle' in managers
    if reused:
        data['results'] = sorted(data['results'] + list(oracle),
                                 key=lambda r: (r['cell'], r['manager']))
    data = report.summarize(data)
    return data, record_of(protocol_run, data, reused)


def check_saved(saved, ufo_config=()):
    """ValueError unless each saved grid is its name's, with these options."""
    for name, data in saved.items():
        protocol_run = BY_NAME[name]
        if not _same_grid(protocol_run, data['settings'], data['loads'],
                          data['mixes']):
            raise ValueError('%s: saved grid is not %s (%s)' % (
                name, protocol_run.what, data.get('conditions')))
        if _plain(data['settings']['ufo_config']) != _plain(ufo_config):
            raise ValueError('%s: saved grid ran UFO with options %s, this '
                             'set with %s' % (
                                 name, data['settings']['ufo_config'],
                                 _plain(ufo_config)))


def run(names, managers=('ufo', 'oracle'), ufo_config=(), processes=2,
        timeout=600.0, oracle_from=None, on_grid=None, progress=None,
        saved=None):
    """The grids named ``names``; the set's content.

    ``oracle_from`` is a baseline set whose Oracle results are reused
    where it holds the same grid; ``on_grid(name, data)`` gets each
    grid's full grid.json content as it finishes. ``saved`` maps more
    names to grid.json content of earlier ``ufo-sim grid`` runs, taken
    as they are; ValueError if one is another grid or was run with
    other UFO options. Records are in the protocol's order.
    """
    check_saved(saved or {}, ufo_config)
    records = {name: record_of(BY_NAME[name], data)
               for name, data in (saved or {}).items()}
    for name in names:
        protocol_run = BY_NAME[name]
        oracle = _oracle_of(oracle_from, protocol_run) \
            if 'oracle' in managers else None
        data, records[name] = run_one(protocol_run, managers, ufo_config,
                                      processes, timeout, oracle, progress)
        if on_grid is not None:
            on_grid(name, data)
    order = [r.name for r in PROTOCOL]
    return {'managers': list(managers),
            'ufo_config': _plain(list(ufo_config)),
            'runs': [records[n] for n in sorted(
                records, key=lambda n: order.index(n) if n in order
                else len(order))]}


def dump(grid_set, path):
    """Write a set as JSON, one result per line (diffs stay short).

    ``grid_set`` must hold JSON values only (no NaN or infinity).
    """
    def line(indent, key, value, comma=','):
        return '%s%s: %s%s' % (indent, json.dumps(key),
                               json.dumps(value, sort_keys=True), comma)

    head = {k: v for k, v in grid_set.items() if k != 'runs'}
    lines = ['{'] + [line(' ', k, head[k]) for k in sorted(head)]
    lines.append(' "runs": [')
    for n, rec in enumerate(grid_set['runs']):
        body = {k: v for k, v in rec.items() if k != 'results'}
        lines.append('  {')
        lines += [line('   ', k, body[k]) for k in sorted(body)]
        lines.append('   "results": [')
        rows = ['    ' + json.dumps(r, sort_keys=True)
                for r in rec['results']]
        lines.append(',\n'.join(rows))
        lines.append('   ]')
        lines.append('  }' + (',' if n + 1 < len(grid_set['runs']) else ''))
    lines += [' ]', '}']
    with open(path, 'w') as f:
        f.write('\n'.join(lines) + '\n')


def _by_name(grid_set):
    return {rec['name']: rec for rec in grid_set['runs']}


def compare(base, new):
    """``new`` against ``base``, run by run, for the runs both hold.

    Raises ValueError when a run of the same name is another grid in the
    two (other settings apart from UFO's options, loads or mixes).
    """
    a, b = _by_name(base), _by_name(new)
    rows = []
    for name in [r['name'] for r in new['runs'] if r['name'] in a]:
        old, now = a[name], b[name]
        if grid_mod.identity(old['settings'], old['loads'],
                             old['mixes']) != \
                grid_mod.identity(now['settings'], now['loads'],
                                  now['mixes']):
            raise ValueError('run %s is another grid in the two sets: %s / '
                             '%s' % (name, old['conditions'],
                                     now['conditions']))
        budget = now['settings']['cores'] * now['settings']['smt']
        was = set(met_cells(old['results'], 'ufo', budget))
        now_met = set(met_cells(now['results'], 'ufo', budget))
        rows.append({
            'name': name,
            'ufo_met': (len(was), len(now_met)),
            'lost': sorted(was - now_met), 'gained': sorted(now_met - was),
            'ratio': (old['summary'].get('ufo_over_oracle_ratio'),
                      now['summary'].get('ufo_over_oracle_ratio')),
            'misses': (len(old['oracle_met_ufo_missed']),
                       len(now['oracle_met_ufo_missed'])),
            'misses_added': sorted(set(now['oracle_met_ufo_missed']) -
                                   set(old['oracle_met_ufo_missed'])),
        })
    return {'runs': rows,
            'only_in_base': sorted(set(a) - set(b)),
            'only_in_new': sorted(set(b) - set(a)),
            'cells_lost': sum(len(r['lost']) for r in rows),
            'cells_gained': sum(len(r['gained']) for r in rows),
            'misses_added': sum(len(r['misses_added']) for r in rows)}


def _num(value, spec='%.3f'):
    return '-' if value is None else spec % value


def table(grid_set):
    """One line per run, then each run's RESULT line."""
    lines = ['%-30s %-10s %-8s %s' % ('run', 'UFO/Oracle', 'met',
                                      'Oracle-met cells UFO misses')]
    for rec in grid_set['runs']:
        met = ' '.join('%s %d' % (m, rec['met'][m])
                       for m in rec['managers'])
        lines.append('%-30s %-10s %-8s %d %s' % (
            rec['name'], _num(rec['summary'].get('ufo_over_oracle_ratio')),
            met, len(rec['oracle_met_ufo_missed']),
            ' '.join(rec['oracle_met_ufo_missed'])))
    for rec in grid_set['runs']:
        for key in ('yardstick_line', 'result_line'):
            if rec.get(key):
                lines.append('RESULT run=%s %s' % (
                    rec['name'], rec[key][len('RESULT '):]))
    totals = recall(grid_set)
    if totals['oracle_met_cells']:
        lines.append('RESULT grid_set_oracle_met_cells=%d '
                     'grid_set_both_met_cells=%d grid_set_ufo_recall_pct=%.2f'
                     % (totals['oracle_met_cells'], totals['both_met_cells'],
                        totals['ufo_recall_pct']))
    return '\n'.join(lines)


def recall(grid_set):
    """Cells the Oracle meets and UFO meets of them, over every run."""
    oracle = both = 0
    for rec in grid_set['runs']:
        budget = rec['settings']['cores'] * rec['settings']['smt']
        met = set(met_cells(rec['results'], 'oracle', budget))
        oracle += len(met)
        both += len(met & set(met_cells(rec['results'], 'ufo', budget)))
    return {'oracle_met_cells': oracle, 'both_met_cells': both,
            'ufo_recall_pct': 100.0 * both / oracle if oracle
            else float('nan')}


def compare_table(comparison):
    """The comparison as text, with a closing RESULT line."""
    lines = ['%-30s %-10s %-14s %-10s %s' % (
        'run', 'UFO met', 'UFO/Oracle', 'misses', 'cells lost / gained / '
        'Oracle-met misses added')]
    for row in comparison['runs']:
        lines.append('%-30s %-10s %-14s %-10s %s / %s / %s' % (
            row['name'], '%d -> %d' % row['ufo_met'],
            '%s -> %s' % (_num(row['ratio'][0]), _num(row['ratio'][1])),
            '%d -> %d' % row['misses'],
            ' '.join(row['lost']) or '-', ' '.join(row['gained']) or '-',
            ' '.join(row['misses_added']) or '-'))
    for label, key in (('only in the baseline', 'only_in_base'),
                       ('only in the new set', 'only_in_new')):
        if comparison[key]:
            lines.append('%s: %s' % (label, ' '.join(comparison[key])))
    lines.append('RESULT grid_set_cells_lost=%d grid_set_cells_gained=%d '
                 'grid_set_oracle_met_misses_added=%d' % (
                     comparison['cells_lost'], comparison['cells_gained'],
                     comparison['misses_added']))
    return '\n'.join(lines)
