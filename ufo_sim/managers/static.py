"""Static Nova pinning: ``hw:cpu_policy=dedicated``, emulator shared.

Each VM gets dedicated host CPUs, one per vCPU, for its whole life; the
emulator threads of all VMs run on ``cpu_shared_set`` (one core here,
``hw:emulator_threads_policy=share``). Nothing is searched: the cost is
the flavors' vCPUs (in whole cores) plus the shared core, even when that
exceeds the budget (reported as ``over_budget``). QoS is judged on one
run as long as the feedback managers' judged window.

The engine pins a VM's vCPU threads as one set, so 1:1 pinning is
modelled as all vCPU threads of a VM on its dedicated CPUs: with as many
CPUs as threads and nothing else allowed there, the scheduler's idle-CPU
wake-up placement keeps them apart just as 1:1 pins would.
"""

from ufo_sim.managers import cell as cell_mod
from ufo_sim.managers import scenario

NAME = 'static'
SHARED_CORES = 1


def evaluate(cell, settings):
    need = scenario.flavor_cores(cell, settings)
    total = sum(need) + SHARED_CORES
    scene = scenario.build(cell, settings, cell.host_seed(settings.seed),
                           cores=scenario.fit_cores(
                               settings, max(total, settings.cores)))
    cores = scene.cores
    vcpu_cores, start = [], 0
    for count in need:
        vcpu_cores.append(cores[start:start + count])
        start += count
    shared = cores[start:start + SHARED_CORES]
    n = len(scene.vms)
    scenario.apply_static(scene, vcpu_cores, [shared] * n, [None] * n)
    judged = scenario.judged(settings)
    window = scenario.measure(scene, judged.warmup, judged.measure,
                              judged.tick)
    return cell_mod.CellResult(
        NAME, cell.key, total * settings.smt, window.all_ok, window.p99_us,
        {'over_budget': total > settings.cores,
         'sim_seconds': judged.warmup + judged.measure},
        **scenario.held_stats(total * settings.smt, window.ticks))
