"""A set of ``ufo-sim dynamic`` runs of UFO, summed, and two sets paired.

One dynamic run says little about a controller change: once a run's
trajectory diverges, a VM at the QoS edge on a full host misses or meets
it by chance for seconds at a time. The held-out protocol of
:doc:`sim-method` therefore judges a change on a set of runs (seeds,
load scales, host sizes), UFO only, and compares it with a baseline set
of the same runs, run by run and load step by load step (:func:`compare`),
so that a change that wins a step in every run is told from one that
moves sums by the noise of a few diverged runs.
"""

import dataclasses
import math

from ufo_sim.experiments import dynamic
from ufo_sim.experiments import parallel

# The sixteen runs of the protocol: (seed, load scale, cores).
PROTOCOL_RUNS = (
    (1, 1.0, 8), (2, 1.0, 8), (1, 0.8, 8), (1, 1.2, 8), (1, 1.0, 10),
    (1, 1.0, 12), (3, 1.0, 8), (4, 1.0, 8), (2, 0.8, 8), (3, 0.8, 8),
    (2, 1.2, 8), (3, 1.2, 8), (1, 1.0, 14), (2, 1.0, 14), (1, 0.8, 10),
    (2, 0.8, 10))
# The controller issue's target: violation seconds in one load step.
STEP_TARGET_S = 3


def run(settings, runs=PROTOCOL_RUNS, scale=1.0, processes=2,
        timeout=3600.0):
    """Each (seed, load scale, cores) of ``runs`` with UFO; a summary."""
    jobs = [(dataclasses.replace(settings, seed=seed, cores=cores),
             scale, load_scale) for seed, load_scale, cores in runs]
    records, errors = [], []
    for (seed, load_scale, cores), (status, value) in zip(
            runs, parallel.run(_job, jobs, processes, timeout)):
        if status == parallel.OK:
            records.append(value)
        else:
            errors.append('seed %d, load scale %g, %d cores: %s: %s'
                          % (seed, load_scale, cores, status, value))
    # Seed and host size are the runs'; every other setting is shared.
    shared = [w for w in settings.describe().split()
              if not w.startswith(('seed=', 'cores=', 'budget_cpus='))]
    return {'conditions': 'conditions: scale=%g runs=%s %s' % (
                scale, ','.join('%d/%g/%d' % r for r in runs),
                ' '.join(shared)),
            'runs': records, 'errors': errors,
            'summary': summarize(records)}


def _job(job):
    settings, scale, load_scale = job
    return record(settings, load_scale,
                  dynamic._simulate('ufo', settings, scale, load_scale))


def record(settings, load_scale, result):
    """What the protocol keeps of one run (no per-second trace)."""
    vms = {}
    for i, (app, _) in enumerate(dynamic.PATTERNS):
        v = result['vms'][app]
        cpus = result['trace']['vm_cpus'][i]
        vms[app] = {
            'violation_seconds': v['violation_seconds'],
            'step_violation_s': [st['violation_s'] for st in v['load_steps']],
            'bursts_moved_cores': v['bursts_moved_cores'],
            'core_changes': sum(1 for a, b in zip(cpus, cpus[1:]) if a != b),
        }
    return {'seed': settings.seed, 'load_scale': load_scale,
            'cores': settings.cores,
            'mean_held_cpus': result['mean_held_cpus'], 'vms': vms}


def summarize(records):
    """Sums over the runs, per application and over all of them."""
    apps = {}
    for app, _ in dynamic.PATTERNS:
        vms = [r['vms'][app] for r in records]
        apps[app] = {
            'violation_seconds': sum(v['violation_seconds'] for v in vms),
            'step_violation_s': sum(sum(v['step_violation_s'])
                                    for v in vms),
            'steps_over_target': sum(1 for v in vms
                                     for s in v['step_violation_s']
                                     if s > STEP_TARGET_S),
            'bursts_moved_cores': sum(v['bursts_moved_cores'] for v in vms),
            'core_changes': sum(v['core_changes'] for v in vms),
        }
    return {'runs': len(records), 'apps': apps,
            'step_violation_s': sum(a['step_violation_s']
                                    for a in apps.values()),
            'steps_over_target': sum(a['steps_over_target']
                                     for a in apps.values()),
            'bursts_moved_cores': sum(a['bursts_moved_cores']
                                      for a in apps.values()),
            'mean_held_cpus_sum': sum(r['mean_held_cpus'] for r in records)}


def run_key(rec):
    """(seed, load scale, cores) of one run's record."""
    return (rec['seed'], rec['load_scale'], rec['cores'])


def compare(base, new):
    """``new`` against ``base`` (two outputs of :func:`run`), paired.

    Both must hold the same runs. Per application and load step (by its
    place on the timeline): in how many runs the step's violation seconds
    fell and rose, their sums, and the two-sided sign test's p of the
    split (runs where they are equal say nothing).
    """
    a = {run_key(r): r for r in base['runs']}
    b = {run_key(r): r for r in new['runs']}
    if set(a) != set(b):
        raise ValueError('the two sets hold different runs: %s only in the '
                         'first, %s only in the second' % (
                             sorted(set(a) - set(b)),
                             sorted(set(b) - set(a))))
    steps = []
    for app, _ in dynamic.PATTERNS:
        count = max(len(r['vms'][app]['step_violation_s'])
                    for r in a.values())
        for i in range(count):
            pairs = [(a[k]['vms'][app]['step_violation_s'][i],
                      b[k]['vms'][app]['step_violation_s'][i])
                     for k in sorted(a)
                     if i < len(a[k]['vms'][app]['step_violation_s'])]
            better = sum(1 for x, y in pairs if y < x)
            worse = sum(1 for x, y in pairs if y > x)
            steps.append({'app': app, 'step': i, 'runs': len(pairs),
                          'better': better, 'worse': worse,
                          'base_s': sum(x for x, _ in pairs),
                          'new_s': sum(y for _, y in pairs),
                          'sign_test_p': sign_test(better, worse)})
    return {'runs': len(a), 'base': summarize(list(a.values())),
            'new': summarize(list(b.values())), 'steps': steps}


def sign_test(better, worse):
    """Two-sided sign test: the chance of a split this uneven, or more."""
    n = better + worse
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, k) for k in range(min(better, worse) + 1))
    return min(1.0, 2.0 * tail / 2.0 ** n)


def table(out):
    """Per application, summed over the runs, as text."""
    s = out['summary']
    row = '%-10s %8s %8s %10s %8s %8s'
    lines = [out['conditions'], '%d runs' % s['runs'], row % (
        'app', 'viol s', 'step s', 'steps>%ds' % STEP_TARGET_S,
        'bursts', 'moves')]
    lines.append(row % ('', '', '', '', 'moved', ''))
    for app, _ in dynamic.PATTERNS:
        v = s['apps'][app]
        lines.append(row % (app, v['violation_seconds'],
                            v['step_violation_s'], v['steps_over_target'],
                            v['bursts_moved_cores'], v['core_changes']))
    lines.append('mean CPUs held, summed over the runs: %.2f'
                 % s['mean_held_cpus_sum'])
    lines += ['no result: %s' % e for e in out['errors']]
    lines.append(result_line(s))
    return '\n'.join(lines)


def result_line(summary):
    fields = []
    for app, _ in dynamic.PATTERNS:
        v = summary['apps'][app]
        fields += ['%s_violation_s=%d' % (app, v['violation_seconds']),
                   '%s_step_s=%d' % (app, v['step_violation_s'])]
    fields += ['step_s=%d' % summary['step_violation_s'],
               'steps_over_%ds=%d' % (STEP_TARGET_S,
                                      summary['steps_over_target']),
               'bursts_moved=%d' % summary['bursts_moved_cores'],
               'cpus_held_mean_sum=%.2f' % summary['mean_held_cpus_sum']]
    return 'RESULT runs=%d %s' % (summary['runs'], ' '.join(fields))


def compare_table(cmp):
    """The paired comparison, as text, with a RESULT line."""
    row = '%-10s %5s %7s %7s %9s %9s %8s'
    lines = ['%d runs, paired' % cmp['runs'], row % (
        'app', 'step', 'better', 'worse', 'base s', 'new s', 'sign p')]
    for st in cmp['steps']:
        lines.append(row % (st['app'], st['step'] + 1, st['better'],
                            st['worse'], st['base_s'], st['new_s'],
                            '%.3g' % st['sign_test_p']))
    base, new = cmp['base'], cmp['new']
    for app, _ in dynamic.PATTERNS:
        x, y = base['apps'][app], new['apps'][app]
        lines.append('%-10s violation s %d -> %d, load steps %d -> %d'
                     % (app, x['violation_seconds'], y['violation_seconds'],
                        x['step_violation_s'], y['step_violation_s']))
    lines.append(
        'RESULT runs=%d step_s_base=%d step_s_new=%d steps_over_%ds_base=%d '
        'steps_over_%ds_new=%d bursts_moved_new=%d '
        'cpus_held_mean_sum_base=%.2f cpus_held_mean_sum_new=%.2f' % (
            cmp['runs'], base['step_violation_s'], new['step_violation_s'],
            STEP_TARGET_S, base['steps_over_target'], STEP_TARGET_S,
            new['steps_over_target'], new['bursts_moved_cores'],
            base['mean_held_cpus_sum'], new['mean_held_cpus_sum']))
    return '\n'.join(lines)
