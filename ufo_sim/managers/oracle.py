"""Oracle: the fewest cores meeting QoS, by search (the bound for UFO).

The allocation space is UFO's: each VM on its own cores with as many
vCPUs online as it has CPUs, and one shared emulator pool. For each
emulator pool size the smallest core count of every VM is bisected; VMs
on disjoint cores are judged in the same simulation, since one's QoS at
a given count barely depends on the other's count (only through the
shared emulator pool, whose load does not depend on vCPU cores). The
best total is then confirmed in one joint run, growing the failing part
until it passes. Each trial runs on a host large enough to lay out any
candidate; the budget is applied to the result.

It is a heuristic, not an exhaustive search, and that keeps it tractable
for any number of VMs: the joint space of N VMs' core counts and the
pool size grows as (cores per VM)^N x pool sizes, while this search runs
about ``1 + log2(cores per VM)`` trials per pool size whatever N is
(every VM is bisected in the same trials), tries pool sizes from one
core up only while the total shrinks, and the confirmation grows one
core per failing VM and run. What it can miss: an allocation in which a
VM does better because another got more (they share only the emulator
pool), and a pool size past the first that stops helping.
"""

import math

from ufo_sim.managers import cell as cell_mod
from ufo_sim.managers import scenario
from ufo_sim.managers import search

NAME = 'oracle'


def isolated_scene(cell, settings, counts, emulator, salt=NAME,
                   coordinate=True):
    """The host of one trial, pinned, not run yet."""
    limits = scenario.flavor_cores(cell, settings)
    cores = scenario.fit_cores(settings, sum(limits) + settings.cores,
                               max(settings.cores, sum(counts) + emulator))
    scene = scenario.build(cell, settings, cell.seed(settings.seed, salt),
                           cores=cores)
    scenario.apply_isolated(scene, counts, emulator, coordinate)
    return scene


def run_isolated(cell, settings, counts, emulator, salt=NAME,
                 coordinate=True):
    scene = isolated_scene(cell, settings, counts, emulator, salt,
                           coordinate)
    return scenario.measure(scene, settings.warmup, settings.measure,
                            settings.tick)


def evaluate(cell, settings):
    limits = scenario.flavor_cores(cell, settings)
    n = len(cell.vms)
    trials = []

    def run(counts, emulator):
        window = run_isolated(cell, settings, list(counts), emulator)
        trials.append((tuple(counts), emulator, window.all_ok))
        return window

    best = None          # (total, counts, emulator)
    previous_total = math.inf
    for emulator in range(1, settings.cores - n + 1):
        counts = search.min_feasible_each(
            [1] * n, limits, lambda c: run(c, emulator).ok)
        if None in counts:
            continue
        total = sum(counts) + emulator
        if best is None or total < best[0]:
            best = (total, counts, emulator)
        # A bigger pool helps only while it lets the VMs shrink.
        if total >= previous_total:
            break
        previous_total = total
    window = None
    if best is not None:
        total, counts, emulator = best
        while True:
            window = run(counts, emulator)
            if window.all_ok:
                break
            grow = [i for i in range(n)
                    if not window.ok[i] and counts[i] < limits[i]]
            if grow:
                counts = list(counts)
                for i in grow:
                    counts[i] += 1
            else:
                emulator += 1
            if sum(counts) + emulator > settings.cores * 2:
                window = None
                break
        if window is not None:
            best = (sum(counts) + emulator, counts, emulator)
    sim_seconds = len(trials) * (settings.warmup + settings.measure)
    # Judged: the confirmed allocation, even when over the budget.
    stats = scenario.held_stats(best and best[0] * settings.smt,
                                window.ticks if window else ())
    if window is None or best[0] > settings.cores:
        p99 = window.p99_us if window else (math.inf,) * n
        return cell_mod.CellResult(
            NAME, cell.key, None, False, p99,
            {'best': best and [best[0], list(best[1]), best[2]],
             'sim_seconds': sim_seconds}, **stats)
    total, counts, emulator = best
    return cell_mod.CellResult(
        NAME, cell.key, total * settings.smt, True, window.p99_us,
        {'vm_cores': list(counts), 'emulator_cores': emulator,
         'sim_seconds': sim_seconds}, **stats)
