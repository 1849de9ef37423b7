"""2-VM co-location grids (paper Fig. 12, 13 and Appendix C.1).

For every pair of LC profiles, each VM at 10-100 % of its profile's max
load, every manager answers: how many CPUs, and is QoS met. Cells run in
a process pool; each (cell, manager) has its own seed derived from the
base seed, so results do not depend on scheduling or worker count. In a
mix of two identical profiles the cell (a, b) is the cell (b, a) with the
VMs renamed, so only one of the two is simulated.
"""

import dataclasses
import itertools
import math
import time

from ufo_sim.experiments import parallel
from ufo_sim.managers import cell as cell_mod
from ufo_sim.managers import registry

APPS = ('memcached', 'nginx', 'mysql')
FULL_LOADS = tuple(round(0.1 * i, 1) for i in range(1, 11))
QUICK_LOADS = (0.2, 0.5, 0.8, 1.0)


def mixes(apps=APPS):
    return list(itertools.combinations_with_replacement(apps, 2))


def mix_name(mix):
    return '+'.join(mix)


def cells_of(mix, loads):
    return [cell_mod.Cell((cell_mod.VmLoad(mix[0], a),
                           cell_mod.VmLoad(mix[1], b)))
            for a in loads for b in loads]


def _mirror(cell):
    return cell_mod.Cell(tuple(reversed(cell.vms)))


def _is_mirror(mix, cell):
    """True for the cells simulated as their mirror image."""
    return mix[0] == mix[1] and cell.vms[0].load > cell.vms[1].load


def _run(task):
    name, cell, settings = task
    started = time.monotonic()
    result = registry.evaluate(name, cell, settings).to_json()
    return result, time.monotonic() - started


def _mirrored(result, cell):
    out = dict(result)
    out['cell'] = cell.key
    out['p99_us'] = list(reversed(result['p99_us']))
    detail = {'mirror_of': result['cell']}
    for key, value in result['detail'].items():
        detail[key] = list(reversed(value)) if key in (
            'vm_cores', 'online') else value
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
                'loads': list(self.loads),
                'mixes': [mix_name(m) for m in self.mixes],
                'managers': list(self.managers),
                'wall_seconds': self.wall_seconds,
                'timing': self.timing,
                'results': self.results}


def _failed(name, cell, status, why):
    """The result of a run that gave none: QoS not shown to be met."""
    return cell_mod.CellResult(name, cell.key, None, False,
                               (math.inf,) * len(cell.vms),
                               {'error': '%s: %s' % (status, why)}).to_json()


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
            if _is_mirror(mix, cell):
                mirrors.append(cell)
                continue
            for name in managers:
                tasks.append((name, cell, settings))
    # The feedback managers and the Oracle take longest: start them first.
    slow = {'ufo': 0, 'oracle': 1, 'dyniso': 2}
    tasks.sort(key=lambda t: (slow.get(t[0], 3), t[1].key))
    started = time.monotonic()
    results, timing = [], {name: [0, 0.0] for name in managers}

    def collect(index, status, value):
        name, cell, _ = tasks[index]
        if status == parallel.OK:
            result, seconds = value
        else:
            result, seconds = _failed(name, cell, status, value), 0.0
        results.append(result)
        timing[name][0] += 1
        timing[name][1] += seconds
        _report(progress, len(results), len(tasks), started)

    parallel.run(_run, tasks, processes, timeout, collect)
    by_key = {(r['manager'], r['cell']): r for r in results}
    for cell in mirrors:
        for name in managers:
            source = by_key[(name, _mirror(cell).key)]
            results.append(_mirrored(source, cell))
    results.sort(key=lambda r: (r['cell'], r['manager']))
    timing = {k: [n, round(t, 2)] for k, (n, t) in timing.items()}
    return Grid(settings, tuple(loads), list(mix_list), list(managers),
                results, round(time.monotonic() - started, 1), timing)


def _report(stream, done, total, started):
    if stream is None:
        return
    if done == total or done % 10 == 0:
        stream.write('grid: %d/%d runs, %.0f s\n'
                     % (done, total, time.monotonic() - started))
        stream.flush()
