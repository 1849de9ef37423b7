"""Decomposition of UFO's mechanisms (paper section 6.3, Fig. 15).

One VM with a large flavor (16 vCPUs, as the paper) gets P host CPUs in
four ways, and the highest load meeting QoS is searched for each:

* ``default``: all threads share the P CPUs, all vCPUs online;
* ``vcpu``: as default, but #vCPUs online == P (UFO-vCPU);
* ``emulator``: emulator threads on their own cores inside P, all vCPUs
  online on the rest (UFO-emulator);
* ``combined``: emulator isolated and #vCPUs online == the vCPU CPUs.

The emulator pool is 1 or 2 cores, whichever serves more load. Load is
searched in 5 % steps of the profile's max load, up to 200 %.
"""


from ufo_sim.experiments import parallel
from ufo_sim.managers import cell as cell_mod
from ufo_sim.managers import scenario
from ufo_sim.managers import search

VARIANTS = ('default', 'vcpu', 'emulator', 'combined')
STEP = 0.05
STEPS = 40


def _feasible(app, cpus, variant, emulator, load, settings, vcpus):
    cell = cell_mod.Cell((cell_mod.VmLoad(app, load),))
    smt = settings.smt
    cores = cpus // smt
    scene = scenario.build(cell, settings, cell.seed(
        settings.seed, 'decompose-%s-%d-%d' % (variant, cpus, emulator)),
        cores=cores, vcpus=vcpus)
    isolate = variant in ('emulator', 'combined')
    scenario.apply_isolated(
        scene, [cores - emulator if isolate else cores],
        emulator if isolate else 0,
        coordinate=variant in ('vcpu', 'combined'))
    return scenario.measure(scene, settings.warmup, settings.measure).all_ok


def max_load(app, cpus, variant, emulator, settings, vcpus):
    """The highest load (fraction of max) meeting QoS, 0 if none.

    The search doubles the load from 5 % until QoS fails, then bisects
    below: no trial runs far past the saturation point, where a
    simulation spends its time on requests that will never finish.
    """
    seen = {}

    def fails(step):
        if step not in seen:
            seen[step] = not _feasible(app, cpus, variant, emulator,
                                       step * STEP, settings, vcpus)
        return seen[step]
    lo, hi = 1, 1
    while not fails(hi):
        if hi == STEPS:
            return STEPS * STEP
        lo, hi = hi + 1, min(STEPS, 2 * hi)
    first_fail = search.min_feasible(lo, hi, fails)
    return round((first_fail - 1) * STEP, 2)


def _task(args):
    app, cpus, variant, settings, vcpus = args
    if variant in ('emulator', 'combined'):
        options = [e for e in (1, 2) if e < cpus // settings.smt]
        if not options:
            return args[:3], 0.0
        return args[:3], max(max_load(app, cpus, variant, e, settings,
                                      vcpus) for e in options)
    return args[:3], max_load(app, cpus, variant, 0, settings, vcpus)


def run(settings, apps, cpu_counts, vcpus=16, processes=2, timeout=600.0):
    tasks = [(app, cpus, variant, settings, vcpus)
             for app in apps for cpus in cpu_counts for variant in VARIANTS]
    loads = {}
    outcomes = parallel.run(_task, tasks, processes, timeout)
    for task, (status, value) in zip(tasks, outcomes):
        app, cpus, variant = task[:3]
        # A search that gave no answer (engine stuck) has no value.
        load = value[1] if status == parallel.OK else None
        loads.setdefault(app, {}).setdefault(variant, {})[str(cpus)] = load
    gains = {}
    for variant in ('vcpu', 'emulator', 'combined'):
        ratios = [100.0 * (loads[a][variant][str(p)] -
                           loads[a]['default'][str(p)]) /
                  loads[a]['default'][str(p)]
                  for a in apps for p in cpu_counts
                  if loads[a]['default'][str(p)] and
                  loads[a][variant][str(p)] is not None]
        gains[variant] = sum(ratios) / len(ratios) if ratios else None
    return {'vcpus': vcpus, 'cpu_counts': list(cpu_counts), 'apps': apps,
            'max_load': loads, 'gain_over_default_pct': gains}


def plot(out, directory):
    import os
    from ufo_sim.experiments import plots
    for app, by_variant in out['max_load'].items():
        counts = out['cpu_counts']
        plots.lines(
            os.path.join(directory, 'decompose-%s.png' % app),
            '%s (%d vCPUs): max load under QoS' % (app, out['vcpus']),
            'host CPUs', 'max load (fraction of profile max)',
            {v: (counts, [by_variant[v][str(p)] for p in counts])
             for v in VARIANTS})


def table(out):
    lines = ['%-10s %-9s %s' % ('app', 'variant', ' '.join(
        '%5s' % p for p in out['cpu_counts']))]
    for app, by_variant in out['max_load'].items():
        for v in VARIANTS:
            lines.append('%-10s %-9s %s' % (app, v, ' '.join(
                '%5s' % ('-' if by_variant[v][str(p)] is None else
                         '%.2f' % by_variant[v][str(p)])
                for p in out['cpu_counts'])))
    for v, g in out['gain_over_default_pct'].items():
        lines.append('mean gain of %s over default: %s' % (
            v, '-' if g is None else '%.1f%%' % g))
    return '\n'.join(lines)
