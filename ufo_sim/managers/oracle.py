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
"""

import math

from ufo_sim.managers import cell as cell_mod
from ufo_sim.managers import scenario
from ufo_sim.managers import search

NAME = 'oracle'


def max_cores(cell, smt):
    return [math.ceil(scenario.profile(v.profile).vcpus / smt)
            for v in cell.vms]


def run_isolated(cell, settings, counts, emulator, salt=NAME,
                 coordinate=True):
    limits = max_cores(cell, settings.smt)
    scene = scenario.build(cell, settings, cell.seed(settings.seed, salt),
                           cores=sum(limits) + settings.cores)
    scenario.apply_isolated(scene, counts, emulator, coordinate)
    return scenario.measure(scene, settings.warmup, settings.measure)


def evaluate(cell, settings):
    limits = max_cores(cell, settings.smt)
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
    if window is None or best[0] > settings.cores:
        p99 = window.p99_us if window else (math.inf,) * n
        return cell_mod.CellResult(
            NAME, cell.key, None, False, p99,
            {'best': best and [best[0], list(best[1]), best[2]],
             'sim_seconds': sim_seconds})
    total, counts, emulator = best
    return cell_mod.CellResult(
        NAME, cell.key, total * settings.smt, True, window.p99_us,
        {'vm_cores': list(counts), 'emulator_cores': emulator,
         'sim_seconds': sim_seconds})
