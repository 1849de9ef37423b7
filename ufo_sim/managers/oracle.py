"""Oracle: the fewest cores meeting QoS, by search (the bound for UFO).

The allocation space is UFO's: each VM on its own cores with as many
vCPUs online as it has CPUs, and one shared emulator pool. For each
emulator pool size the smallest core count of every VM is bisected; VMs
on disjoint cores are judged in the same simulation, since one's QoS at
a given count barely depends on the other's count (only through the
shared emulator pool, whose load does not depend on vCPU cores). The
best total is then confirmed in one joint run as long as the window a
feedback manager (UFO, DynIso) is judged on (``judge`` intervals), not
the search's ``measure`` seconds: near the edge of QoS a short run
passes on luck, and the search keeps the cheapest allocation that did.
While the confirmation fails, one core is added to each failing VM or
to the emulator pool, whichever passes with fewer cores. Each trial
runs on a host large enough to lay out any candidate; the budget is
applied to the result.

It is a heuristic, not an exhaustive search, and that keeps it tractable
for any number of VMs: the joint space of N VMs' core counts and the
pool size grows as (cores per VM)^N x pool sizes, while this search runs
about ``1 + log2(cores per VM)`` trials per pool size whatever N is
(every VM is bisected in the same trials), tries pool sizes from one
core up only while the total shrinks and one core per VM on that pool
could still beat the best total, and each failed confirmation
adds one core (two runs as long as the judged window). What it can
miss: an allocation in which a VM does better because another got more
(they share only the emulator pool), and a pool size past the first
that stops helping.

``oracle-wide`` searches a larger space than UFO's: each VM's emulator
threads run either in the shared pool or on that VM's own cores (with
every VM's on its own cores, there is no shared pool). The same search
runs once for each choice of the VMs that keep their emulator threads
at home (2^N choices), so it costs that many times the Oracle's. It
measures what a controller able to place emulator threads per VM could
save. Its searches include the Oracle's, trial for trial (same seeds).
"""

import itertools
import math

from ufo_sim.managers import cell as cell_mod
from ufo_sim.managers import scenario
from ufo_sim.managers import search

NAME = 'oracle'
WIDE_NAME = 'oracle-wide'


def isolated_scene(cell, settings, counts, emulator,
                   salt=cell_mod.HOST_SALT, coordinate=True, home=()):
    """The host of one trial, pinned, not run yet."""
    limits = scenario.flavor_cores(cell, settings)
    cores = scenario.fit_cores(settings, sum(limits) + settings.cores,
                               max(settings.cores, sum(counts) + emulator))
    scene = scenario.build(cell, settings, cell.seed(settings.seed, salt),
                           cores=cores)
    scenario.apply_isolated(scene, counts, emulator, coordinate, home)
    return scene


def run_isolated(cell, settings, counts, emulator,
                 salt=cell_mod.HOST_SALT, coordinate=True, home=()):
    """Run one trial; ``home``: VMs whose emulator threads stay home."""
    scene = isolated_scene(cell, settings, counts, emulator, salt,
                           coordinate, home)
    return scenario.measure(scene, settings.warmup, settings.measure,
                            settings.tick)


def evaluate(cell, settings):
    return _evaluate(NAME, cell, settings, [()])


def evaluate_wide(cell, settings):
    n = len(cell.vms)
    return _evaluate(WIDE_NAME, cell, settings,
                     [home for k in range(n + 1)
                      for home in itertools.combinations(range(n), k)])


def _evaluate(name, cell, settings, placements):
    """Search each placement, then confirm the best allocation found.

    A placement is a tuple of the VMs whose emulator threads run on
    their own cores.
    """
    limits = scenario.flavor_cores(cell, settings)
    n = len(cell.vms)
    sim_seconds = 0.0

    def run(counts, emulator, home, within=settings):
        nonlocal sim_seconds
        sim_seconds += within.warmup + within.measure
        return run_isolated(cell, within, list(counts), emulator, home=home)

    # The allocation found is judged as long as the feedback managers:
    # a 60-second trial at the edge of QoS passes on luck.
    judged = scenario.judged(settings)

    def confirm(counts, emulator, home):
        return run(counts, emulator, home, judged)

    best = None          # (total, counts, emulator, home)
    for home in placements:
        # With every VM's emulator threads at home the pool is empty.
        pools = [0] if len(home) == n else range(1, settings.cores - n + 1)
        previous_total = math.inf
        for emulator in pools:
            # Every VM needs a core: no count here can beat the best.
            if best is not None and n + emulator >= best[0]:
                break
            counts = search.min_feasible_each(
                [1] * n, limits,
                lambda c, e=emulator, h=home: run(c, e, h).ok)
            if None in counts:
                continue
            total = sum(counts) + emulator
            if best is None or total < best[0]:
                best = (total, counts, emulator, home)
            # A bigger pool helps only while it lets the VMs shrink.
            if total >= previous_total:
                break
            previous_total = total
    window = None
    if best is not None:
        total, counts, emulator, home = best
        window = confirm(counts, emulator, home)
        while not window.all_ok:
            # One core more, for each failing VM or for the pool: the
            # one that passes with the fewest cores, else the one with
            # the most VMs passing; on a tie the VMs' (the old rule).
            grow = [i for i in range(n)
                    if not window.ok[i] and counts[i] < limits[i]]
            options = []
            if grow:
                options.append(([c + (i in grow) for i, c in
                                 enumerate(counts)], emulator, home))
            # Every emulator thread into the pool, which grows.
            options.append((list(counts), emulator + 1, ()))
            options = [o for o in options
                       if sum(o[0]) + o[1] <= settings.cores * 2]
            if not options:
                window = None
                break
            tried = [(o, confirm(*o)) for o in options]
            (counts, emulator, home), window = min(
                tried, key=lambda t: (not t[1].all_ok,
                                      sum(t[0][0]) + t[0][1],
                                      -sum(t[1].ok)))
        if window is not None:
            best = (sum(counts) + emulator, counts, emulator, home)
    # Judged: the confirmed allocation, even when over the budget.
    stats = scenario.held_stats(best and best[0] * settings.smt,
                                window.ticks if window else ())
    if window is None or best[0] > settings.cores:
        p99 = window.p99_us if window else (math.inf,) * n
        return cell_mod.CellResult(
            name, cell.key, None, False, p99,
            {'best': best and [best[0], list(best[1]), best[2]],
             'sim_seconds': sim_seconds}, **stats)
    total, counts, emulator, home = best
    return cell_mod.CellResult(
        name, cell.key, total * settings.smt, True, window.p99_us,
        {'vm_cores': list(counts), 'emulator_cores': emulator,
         'emulator_home': list(home),
         'sim_seconds': sim_seconds}, **stats)
