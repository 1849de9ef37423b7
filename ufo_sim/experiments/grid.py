"""Co-location grids (paper Fig. 12, 13 and Appendix C.1).

For every pair of LC profiles (or any mix of profiles, one VM each),
each VM at 10-100 % of its profile's max load, every manager answers:
how many CPUs, and is QoS met. A mix of N VMs has len(loads)^N cells.
Cells run in a process pool. Each cell runs on ``settings.seeds``
seeds (``seed``, ``seed + 1``, ...), and on a given seed every manager
runs it on the same host seed
(:meth:`~ufo_sim.managers.cell.Cell.host_seed`), derived from the cell
and the seed alone, so results do not depend on scheduling or worker
count; the grid reports one result per manager and cell holding every
seed's (:func:`combine`). VMs of the same profile are interchangeable:
of the cells that differ only in which of them runs which load, only
the one with their loads in ascending order is simulated (in a pair,
the cell (a, b) is the cell (b, a) with the VMs renamed).
"""

import dataclasses
import itertools
import json
import math
import time

from ufo_sim.experiments import parallel
from ufo_sim.managers import cell as cell_mod
from ufo_sim.managers import registry
from ufo_sim.managers import scenario

APPS = ('memcached', 'nginx', 'mysql')
# Managers whose results depend on UFO's code and options.
UFO_MANAGERS = ('ufo', 'ufo-host-only')
FULL_LOADS = tuple(round(0.1 * i, 1) for i in range(1, 11))
QUICK_LOADS = (0.2, 0.5, 0.8, 1.0)


def mixes(apps=APPS):
    return list(itertools.combinations_with_replacement(apps, 2))


def mix_name(mix):
    return '+'.join(mix)


def cells_of(mix, loads):
    """Every combination of ``loads``, one per VM of ``mix``."""
    return [cell_mod.Cell(tuple(cell_mod.VmLoad(app, x)
                                for app, x in zip(mix, combo)))
            for combo in itertools.product(loads, repeat=len(mix))]


def canonical(cell):
    """The cell simulated for ``cell``, and where each of its VMs went.

    Returns (cell with the loads of same-profile VMs in ascending order,
    ``order``) with ``cell.vms[i] == canonical.vms[order[i]]``.
    """
    vms, order = list(cell.vms), list(range(len(cell.vms)))
    for app in sorted({v.profile for v in cell.vms}):
        slots = [i for i, v in enumerate(cell.vms) if v.profile == app]
        ranked = sorted(slots, key=lambda i: (cell.vms[i].load, i))
        for slot, i in zip(slots, ranked):
            vms[slot] = cell.vms[i]
            order[i] = slot
    return cell_mod.Cell(tuple(vms)), order


def _run(task):
    name, cell, settings = task
    started = time.monotonic()
    result = registry.evaluate(name, cell, settings).to_json()
    result['seed'] = settings.seed
    return result, time.monotonic() - started


def _over_target(p99, target):
    if p99 is None or not math.isfinite(p99):
        return math.inf
    return p99 / target


def _mean(values):
    return sum(values) / len(values)


_PER_SEED = ('seed', 'cpus', 'qos_met', 'p99_us', 'p99_over_target',
             'cpus_mean', 'cpus_max', 'qos_violation_s')


def combine(rows, targets):
    """One manager's result for a cell from its result on each seed.

    ``rows`` are the results of one manager and cell, one per seed;
    ``targets`` the p99 target of each VM. QoS is met when it is met on
    every seed; ``cpus`` is the mean over the seeds (None when a seed
    has none); ``p99_us`` and ``p99_over_target`` (p99 / target, infinity
    for a VM that served nothing) are each VM's worst over the seeds;
    ``cpus_max`` is the largest held, ``cpus_mean`` and
    ``qos_violation_s`` are means over the seeds. ``detail`` is the first
    seed's, with every seed's error; ``seeds`` keeps each seed's
    figures.
    """
    rows = sorted(rows, key=lambda r: r.get('seed', 0))
    per_seed = []
    for r in rows:
        ratio = [_over_target(p, t) for p, t in zip(r['p99_us'], targets)]
        per_seed.append(dict({k: r.get(k) for k in _PER_SEED},
                             p99_over_target=ratio))
    cpus = [r['cpus'] for r in rows]

    def known(key):
        return [r[key] for r in rows if r.get(key) is not None]

    def worst(key):
        return [max(values, key=lambda v: math.inf if v is None else v)
                for values in zip(*(s[key] for s in per_seed))]
    out = dict(rows[0])
    out.pop('seed', None)
    errors = ['seed %s: %s' % (r.get('seed'), r['detail']['error'])
              for r in rows if 'error' in r['detail']]
    if errors:
        out['detail'] = dict(out['detail'], error='; '.join(errors))
    out.update(
        qos_met=all(r['qos_met'] for r in rows),
        cpus=None if None in cpus else _mean(cpus),
        p99_us=worst('p99_us'), p99_over_target=worst('p99_over_target'),
        cpus_max=max(known('cpus_max')) if known('cpus_max') else None,
        cpus_mean=_mean(known('cpus_mean')) if known('cpus_mean') else None,
        qos_violation_s=_mean(known('qos_violation_s'))
        if known('qos_violation_s') else None,
        seeds=per_seed)
    return out


def targets_of(cell, settings):
    """The p99 target of each VM of ``cell``."""
    return [scenario.profile(v.profile, settings).qos_p99_us
            for v in cell.vms]


def _mirrored(result, cell, order):
    """``result`` of the canonical cell, told of ``cell`` (VMs moved)."""
    def moved(values):
        return [values[j] for j in order]
    out = dict(result)
    out['cell'] = cell.key
    out['p99_us'] = moved(result['p99_us'])
    detail = {'mirror_of': result['cell']}
    for key, value in result['detail'].items():
        detail[key] = moved(value) if key in ('vm_cores', 'online') \
            else value
    out['detail'] = detail
    return out


@dataclasses.dataclass
class Grid:
    """A finished grid: settings, loads, mixes and every result."""

    settings: cell_mod.Settings
    loads: tuple
    mixes: list
    managers: list
    results: list
    wall_seconds: float
    timing: dict          # manager -> (simulated cells, worker seconds)

    def cells(self, mix=None):
        chosen = [mix] if mix else self.mixes
        return [c.key for m in chosen for c in cells_of(m, self.loads)]

    def to_json(self):
        return {'settings': dataclasses.asdict(self.settings),
                'host': dataclasses.asdict(
                    scenario.host_spec(self.settings)),
                'loads': list(self.loads),
                'mixes': [mix_name(m) for m in self.mixes],
                'managers': list(self.managers),
                'wall_seconds': self.wall_seconds,
                'timing': self.timing,
                'results': self.results}


def _failed(name, cell, settings, status, why):
    """The result of a run that gave none: QoS not shown to be met."""
    return dict(cell_mod.CellResult(
        name, cell.key, None, False, (math.inf,) * len(cell.vms),
        {'error': '%s: %s' % (status, why)}).to_json(), seed=settings.seed)


def run(settings, loads, managers, mix_list=None, processes=2,
        progress=None, timeout=600.0):
    """Run the grid; returns a :class:`Grid`.

    ``progress`` is a stream for a progress line every ten runs; a run
    past ``timeout`` seconds is killed and counted as an error.
    """
    mix_list = mix_list or mixes()
    tasks, mirrors = [], []
    for mix in mix_list:
        for cell in cells_of(mix, loads):
            if canonical(cell)[0] != cell:
                mirrors.append(cell)
                continue
            for name in managers:
                tasks += [(name, cell, s) for s in settings.each_seed()]
    # The feedback managers and the Oracle take longest: start them first.
    slow = {'oracle-wide': 0, 'ufo': 1, 'oracle': 2, 'dyniso': 3}
    tasks.sort(key=lambda t: (slow.get(t[0], 4), t[1].key))
    started = time.monotonic()
    results, timing = [], {name: [0, 0.0] for name in managers}

    def collect(index, status, value):
        name, cell, seeded = tasks[index]
        if status == parallel.OK:
            result, seconds = value
        else:
            result, seconds = _failed(name, cell, seeded, status,
                                      value), 0.0
        results.append(result)
        timing[name][0] += 1
        timing[name][1] += seconds
        _report(progress, len(results), len(tasks), started)

    parallel.run(_run, tasks, processes, timeout, collect)
    by_key = {(r['manager'], r['cell'], r['seed']): r for r in results}
    for cell in mirrors:
        source, order = canonical(cell)
        for name in managers:
            for seeded in settings.each_seed():
                results.append(_mirrored(
                    by_key[(name, source.key, seeded.seed)], cell, order))
    per_cell = {}
    for r in results:
        per_cell.setdefault((r['manager'], r['cell']), []).append(r)
    results = [combine(rows, targets_of(cell_mod.Cell.from_key(cell),
                                        settings))
               for (_, cell), rows in per_cell.items()]
    results.sort(key=lambda r: (r['cell'], r['manager']))
    timing = {k: [n, round(t, 2)] for k, (n, t) in timing.items()}
    return Grid(settings, tuple(loads), list(mix_list), list(managers),
                results, round(time.monotonic() - started, 1), timing)


def identity(settings, loads, mixes):
    """What makes a grid, as JSON gives it back.

    Its settings apart from UFO's options, its loads and its mixes by name.
    A setting a saved grid predates counts as its default.
    """
    def plain(value):
        return json.loads(json.dumps(dataclasses.asdict(value)
                                     if dataclasses.is_dataclass(value)
                                     else value))
    given = dict(plain(cell_mod.Settings()), **plain(settings))
    # UFO's mode, like its options, changes no other manager's result.
    return (dict(given, ufo_config=[], qos_target=False),
            json.loads(json.dumps(loads)),
            [m if isinstance(m, str) else mix_name(m) for m in mixes])


def check_kept(settings, loads, mixes, managers, saved):
    """The managers a run of ``managers`` keeps from ``saved``.

    ValueError if ``saved`` (grid.json content) is another grid (see
    :func:`identity`) or holds a UFO manager not in ``managers``.
    """
    if identity(settings, loads, mixes) != \
            identity(saved['settings'], saved['loads'], saved['mixes']):
        raise ValueError('the saved grid is another grid (%s)'
                         % saved.get('conditions', 'no conditions line'))
    kept = [m for m in saved['managers'] if m not in managers]
    stale = [m for m in kept if m in UFO_MANAGERS]
    if stale:
        raise ValueError('the saved grid holds %s, which depends on UFO: '
                         'run it too' % ', '.join(stale))
    return kept


def keep_from(data, saved):
    """grid.json content ``data`` with ``saved``'s other managers.

    ``saved`` is the content of an earlier run of the same grid (see
    :func:`identity`); its results of the managers ``data`` did not run
    are added, with their timing, in ``saved``'s order of managers.
    Only managers that are not UFO are taken: UFO's options and code
    change no other manager's result. ValueError if ``saved`` is another
    grid or holds a UFO manager ``data`` did not run.
    """
    kept = check_kept(data['settings'], data['loads'], data['mixes'],
                      data['managers'], saved)
    order = list(saved['managers']) + [
        m for m in data['managers'] if m not in saved['managers']]
    results = data['results'] + [r for r in saved['results']
                                 if r['manager'] in kept]
    timing = dict(data['timing'])
    timing.update({m: saved['timing'][m] for m in kept
                   if m in saved.get('timing', {})})
    return dict(data, managers=order, timing=timing,
                results=sorted(results,
                               key=lambda r: (r['cell'], r['manager'])))


def _report(stream, done, total, started):
    if stream is None:
        return
    if done == total or done % 10 == 0:
        stream.write('grid: %d/%d runs, %.0f s\n'
                     % (done, total, time.monotonic() - started))
        stream.flush()
