"""Dynamic load with nothing learned beforehand (paper 6.2, Fig. 14).

Three 8-vCPU VMs share the 16-CPU host (``Settings`` may change the
host, the VM sizes and the host options), each with one load pattern (in
% of its profile's max load, times ``load_scale``, on a 270 s timeline
that ``scale`` stretches):

* Nginx, diurnal: 20, 40, 60, 80, 100, 80, 60, 40, 20, 30 s per step;
* MySQL, sub-second bursts: 15 %, with 1 s bursts to 20, 40 and 80 % at
  45, 100 and 160 s;
* Memcached, longer bursts: 10 %, with bursts to 80 % over 130-135 s
  (5 s) and 187-202 s (15 s).

As in the paper, emulator interference is taken out of the comparison:
Default and DynIso run emulator threads on two extra cores outside the
budget. UFO manages the budget cores itself (its emulator pool comes
out of them). Default gets, each second, as many shared cores as UFO's
VM pools held (the paper's "same #pCPUs"); DynIso runs its own loop.

Time is counted in control intervals of one real second (``tick``
simulated seconds, see :mod:`ufo_sim.managers.cell`). Per VM and
manager: *violation seconds* (seconds whose p99 exceeds QoS or whose
load was not served) and, per load rise, the *reaction time*
(seconds until the VM's cores grew) and the *recovery time* (seconds
until a second met QoS again).
"""

import dataclasses
import math
import os

from ufo_sim.experiments import parallel
from ufo_sim.managers import cell as cell_mod
from ufo_sim.managers import dyniso as dyniso_mod
from ufo_sim.managers import scenario
from ufo_sim.managers import ufo as ufo_mod

DURATION = 270.0
EMULATOR_CORES = 2
# The paper's Fig. 14 host (§6.2): "Initially, each VM is given 8 pCPUs"
# and the emulator pool is kept "large enough"; the pool gets the 8
# logical CPUs that §5.2's max-load layout gives emulator threads.
PAPER_EMULATOR_CPUS = 8
# A rise that lasts at most this long is a burst (the paper's MySQL
# pattern): no manager should move cores for it. One that lasts longer
# is a step, which may need cores within a few seconds.
BURST_SECONDS = 2
# How long after a burst's end a core change still counts as its doing:
# the controller's settle time.
SETTLE_SECONDS = 3
# A step that misses QoS in its first seconds, before a manager that
# waits for two samples can move, needed more cores: its reaction counts.
SHORT_SECONDS = 2
# Not a manager: every VM on its flavor's cores throughout (the
# reference of the Fig. 14 calibration row).
FLAVOR = 'flavor'


def nginx_load(t):
    steps = (0.2, 0.4, 0.6, 0.8, 1.0, 0.8, 0.6, 0.4, 0.2)
    return steps[min(len(steps) - 1, int(t // 30.0))]


def mysql_load(t):
    for start, level in ((45, 0.2), (100, 0.4), (160, 0.8)):
        if start <= t < start + 1:
            return level
    return 0.15


def memcached_load(t):
    if 130 <= t < 135 or 187 <= t < 202:
        return 0.8
    return 0.1


PATTERNS = (('nginx', nginx_load), ('mysql', mysql_load),
            ('memcached', memcached_load))


def load_at(pattern, t, scale, load_scale=1.0):
    return pattern(t / scale) * load_scale


def rises(pattern, scale, seconds):
    """Seconds at which the load goes up."""
    out, prev = [], load_at(pattern, 0, scale)
    for s in range(1, seconds):
        now = load_at(pattern, s, scale)
        if now > prev + 1e-9:
            out.append(s)
        prev = now
    return out


def step_spans(pattern, scale, seconds):
    """(rise, end) per load rise: end is the next second the load moves."""
    spans = []
    for s in rises(pattern, scale, seconds):
        level = load_at(pattern, s, scale)
        end = next((t for t in range(s + 1, seconds)
                    if abs(load_at(pattern, t, scale) - level) > 1e-9),
                   seconds)
        spans.append((s, end))
    return spans


def first_cell(load_scale=1.0):
    """The three VMs at their loads at time 0."""
    return cell_mod.Cell(tuple(cell_mod.VmLoad(app, pattern(0.0) *
                                               load_scale)
                               for app, pattern in PATTERNS))


def paper_host(settings):
    """``settings`` on Fig. 14's host: every flavor plus an emulator pool.

    On the grids' 16 CPUs the three flavors and a pool do not fit: a VM
    starts below its flavor and a burst finds no core to grow into.
    """
    flavors = sum(scenario.flavor_cores(first_cell(), settings))
    pool = math.ceil(PAPER_EMULATOR_CPUS / settings.smt)
    return dataclasses.replace(settings, cores=flavors + pool)


def _scene(settings, extra, load_scale):
    cell = first_cell(load_scale)
    # The seed does not depend on load_scale: scaled runs stay comparable.
    seed = first_cell().seed(settings.seed, 'dynamic')
    return scenario.build(cell, settings, seed, cores=scenario.fit_cores(
        settings, settings.cores + extra))


def _flavor_layout(scene, settings, budget_cores, load_scale):
    """Each VM's vCPUs on its flavor's own cores, emulators on the rest.

    The layout UFO starts from on :func:`paper_host`, never moved: what
    a VM misses on it at a load, no controller could have spared it.
    Returns the CPUs each VM's vCPUs run on.
    """
    sizes = scenario.flavor_cores(first_cell(load_scale), settings)
    if sum(sizes) >= len(budget_cores):
        raise ValueError('%d cores hold no emulator pool beside flavors '
                         'of %s cores' % (len(budget_cores), sizes))
    own, start = [], 0
    for size in sizes:
        own.append(budget_cores[start:start + size])
        start += size
    pool = budget_cores[start:]
    scenario.apply_static(scene, own, [pool] * len(own),
                          [None] * len(own))
    return [len(cores) * settings.smt for cores in own]


def _simulate(manager, settings, scale, load_scale=1.0, replay=None):
    seconds = int(round(DURATION * scale))
    extra = 0 if manager in ('ufo', FLAVOR) else EMULATOR_CORES
    scene = _scene(settings, extra, load_scale)
    host = scene.host
    budget_cores = scene.cores[:settings.cores]
    emu_cores = scene.cores[settings.cores:settings.cores + extra]
    n = len(scene.vms)
    if manager == FLAVOR:
        flavor_cpus = _flavor_layout(scene, settings, budget_cores,
                                     load_scale)
    if manager == 'ufo':
        ctl = ufo_mod.UfoAgent(scene, ufo_mod.config_of(settings),
                               qos_target=settings.qos_target)
    elif manager == 'dyniso':
        ctl = dyniso_mod.DynIso(scene, settings.cores, settings.smt,
                                scenario.cpus_of(emu_cores))
    trace = {'load': [[] for _ in range(n)], 'p99_us': [[] for _ in range(n)],
             'ok': [[] for _ in range(n)], 'vm_cpus': [[] for _ in range(n)],
             'held_cpus': []}
    if manager == 'ufo':
        # What the controller did, to trace where violation seconds come
        # from: its emulator pool and its decisions, per second.
        trace['emulator_cpus'] = []
        trace['decisions'] = []
        app_of = {vm: PATTERNS[i][0] for i, vm in enumerate(scene.vms)}
    start = host.now
    for second in range(seconds):
        for i, (app, pattern) in enumerate(PATTERNS):
            rps = load_at(pattern, second, scale, load_scale) * \
                scene.profiles[i].max_rps
            scene.rps[i] = rps
            host.set_rps(scene.vms[i], rps)
        if manager == 'default':
            count = replay[second] if replay else settings.cores
            shared = budget_cores[:max(1, count)]
            scenario.apply_static(scene, [shared] * n, [emu_cores] * n,
                                  [None] * n)
            vm_cpus = [len(shared) * settings.smt] * n
            held = len(shared) * settings.smt
        elif manager == 'dyniso':
            vm_cpus = [c * settings.smt for c in ctl.counts()]
            held = sum(vm_cpus)
        elif manager == FLAVOR:
            vm_cpus = flavor_cpus
            held = settings.cores * settings.smt
        else:
            plan = ctl.agent.last_plan
            vm_cpus = [len(plan.vms[vm].cpus) if plan and
                       plan.vms[vm].cores else 0 for vm in scene.vms]
            held = ctl.held_cpus()
            trace['emulator_cpus'].append(
                len(plan.emulator_cpus) if plan else 0)
            trace['decisions'].append(
                ['%s %s %d->%d: %s' % (app_of.get(d.vm, d.vm), d.action,
                                       d.old, d.new, d.reason)
                 for d in plan.decisions] if plan else [])
        host.advance_to(start + (second + 1) * settings.tick)
        lat = [host.take_latencies(vm) for vm in scene.vms]
        window = scenario.judge(scene, lat, settings.tick)
        for i in range(n):
            trace['load'][i].append(load_at(PATTERNS[i][1], second, scale,
                                            load_scale))
            trace['p99_us'][i].append(window.p99_us[i])
            trace['ok'][i].append(window.ok[i])
            trace['vm_cpus'][i].append(vm_cpus[i])
        trace['held_cpus'].append(held)
        if manager == 'dyniso':
            ctl.step(second + 1.0, lat)
        elif manager == 'ufo':
            ctl.tick(lat)
    return _metrics(manager, scene, trace, scale, seconds, settings)


def step_record(start, end, ok, cpus, settle=SETTLE_SECONDS):
    """What happened in one load step, seconds ``start`` to ``end``.

    ``recovered_after_s``: seconds from the step's start to its first
    second that meets QoS (0: it never missed; the step's length: it
    never met); ``short``: QoS missed in the step's first
    ``SHORT_SECONDS``, before any manager could have moved cores for it
    (the step needed more);
    ``grew_after_s``: seconds until the VM's cores grew, counted only
    inside the step (None if they did not); ``cores_moved``: whether they
    changed at all from the step's start to ``settle`` seconds after its
    end, which a short burst should not cause.
    """
    last = min(len(cpus), end + settle + 1)
    return {
        'at': start,
        'seconds': end - start,
        'violation_s': sum(1 for t in range(start, end) if not ok[t]),
        'recovered_after_s': next((t - start for t in range(start, end)
                                   if ok[t]), end - start),
        'short': not all(ok[t] for t in range(
            start, min(end, start + SHORT_SECONDS))),
        'grew_after_s': next((t - start for t in range(start + 1, end + 1)
                              if t < len(cpus) and cpus[t] > cpus[start]),
                             None),
        'cores_moved': any(cpus[t] != cpus[start]
                           for t in range(start + 1, last)),
    }


def step_summary(steps, own_moves=True):
    """The controller issue's dynamic targets over one VM's load steps.

    ``own_moves`` False (Default, whose cores are UFO's replayed) leaves
    the figures about core moves out.
    """
    bursts = [st for st in steps if st['seconds'] <= BURST_SECONDS]
    short = [st for st in steps
             if st['seconds'] > BURST_SECONDS and st['short']]
    grown = [st['grew_after_s'] for st in short
             if st['grew_after_s'] is not None]
    return {
        'step_violation_s_max': max(
            (st['violation_s'] for st in steps), default=None),
        'step_reaction_s_mean': _mean(grown) if own_moves else None,
        'steps_short': len(short),
        'steps_grown': len(grown) if own_moves else None,
        'bursts': len(bursts),
        'bursts_moved_cores': sum(1 for st in bursts if st['cores_moved'])
        if own_moves else None,
    }


def _metrics(manager, scene, trace, scale, seconds, settings):
    vms = {}
    for i, (app, pattern) in enumerate(PATTERNS):
        ok, cpus = trace['ok'][i], trace['vm_cpus'][i]
        reaction, recovery = [], []
        steps = [step_record(s, end, ok, cpus)
                 for s, end in step_spans(pattern, scale, seconds)]
        for s in rises(pattern, scale, seconds):
            grew = next((t - s for t in range(s + 1, seconds)
                         if cpus[t] > cpus[s]), None)
            if manager not in ('default', FLAVOR) and grew is not None:
                reaction.append(grew)
            if not ok[s]:
                back = next((t - s for t in range(s, seconds) if ok[t]),
                            None)
                if back is not None:
                    recovery.append(back)
        vms[app] = dict({
            'qos_us': scene.profiles[i].qos_p99_us,
            'violation_seconds': sum(1 for x in ok if not x),
            'reaction_s_mean': _mean(reaction),
            'recovery_s_mean': _mean(recovery),
            'rises': len(rises(pattern, scale, seconds)),
            'load_steps': steps,
        }, **step_summary(steps,
                          own_moves=manager not in ('default', FLAVOR)))
    return {'manager': manager, 'seconds': seconds, 'vms': vms,
            'mean_held_cpus': sum(trace['held_cpus']) / seconds,
            'trace': trace}


def _mean(values):
    return sum(values) / len(values) if values else None


def _job(args):
    return _simulate(*args)


def replay_of(ufo_result, smt):
    """Default's shared cores per second: what UFO's VM pools held."""
    vm_cpus = ufo_result['trace']['vm_cpus']
    return [max(1, math.ceil(sum(v[s] for v in vm_cpus) / smt))
            for s in range(ufo_result['seconds'])]


def run(settings, scale=1.0, managers=('default', 'dyniso', 'ufo'),
        processes=2, timeout=3600.0, load_scale=1.0):
    first = [m for m in managers if m != 'default']
    if 'default' in managers and 'ufo' not in first:
        first.append('ufo')
    jobs = [(m, settings, scale, load_scale) for m in first]
    results = {}
    outcomes = parallel.run(_job, jobs, processes, timeout)
    for job, (status, value) in zip(jobs, outcomes):
        results[job[0]] = value if status == parallel.OK else {
            'manager': job[0], 'error': '%s: %s' % (status, value)}
    if 'default' in managers:
        if 'error' in results['ufo']:
            results['default'] = {'manager': 'default',
                                  'error': 'no UFO run to replay'}
        else:
            (status, value), = parallel.run(
                _job, [('default', settings, scale, load_scale,
                        replay_of(results['ufo'], settings.smt))], 1,
                timeout)
            results['default'] = value if status == parallel.OK else {
                'manager': 'default', 'error': '%s: %s' % (status, value)}
    return {'scale': scale, 'load_scale': load_scale,
            'settings': dataclasses.asdict(settings),
            'host': dataclasses.asdict(scenario.host_spec(settings)),
            'conditions': conditions_line(settings, scale, load_scale),
            'managers': [m for m in managers],
            'results': {m: results[m] for m in managers
                        if 'error' not in results[m]},
            'errors': {m: results[m]['error'] for m in managers
                       if 'error' in results[m]}}


def conditions_line(settings, scale, load_scale):
    """What produced a dynamic run, printed above its table."""
    return 'conditions: scale=%g load_scale=%g %s' % (
        scale, load_scale, settings.describe())


def plot(out, directory):
    from ufo_sim.experiments import plots
    for i, (app, _) in enumerate(PATTERNS):
        series = {}
        for m, r in out['results'].items():
            xs = list(range(r['seconds']))
            series['%s p99' % m] = (xs, [
                None if v is None or not math.isfinite(v) else v / 1000.0
                for v in r['trace']['p99_us'][i]])
        qos = next(iter(out['results'].values()))['vms'][app]['qos_us']
        plots.lines(os.path.join(directory, 'dynamic-%s-p99.png' % app),
                    '%s: p99 per second' % app, 'time (s)', 'p99 (ms)',
                    series, hlines=[(qos / 1000.0, 'QoS')])
        plots.lines(
            os.path.join(directory, 'dynamic-%s-cpus.png' % app),
            '%s: load and CPUs' % app, 'time (s)', 'CPUs / load x 10',
            dict([('%s CPUs' % m, (list(range(r['seconds'])),
                                   r['trace']['vm_cpus'][i]))
                  for m, r in out['results'].items()] +
                 [('load x 10', (list(range(r['seconds'])),
                                 [10 * x for x in r['trace']['load'][i]]))]))


def table(out):
    """Per VM and manager, as text.

    The step columns are the controller issue's targets: the most
    violation seconds in one load step; over the steps (not bursts) that
    missed QoS at their start, how many grew the VM within the step and
    how soon; the bursts after which cores moved.
    """
    row = '%-10s %-8s %7s %7s %7s %8s %8s %8s %9s %9s'
    lines = [out.get('conditions', ''), row % (
        'app', 'manager', 'viol s', 'worst', 'react s', 'step', 'grown/',
        'bursts', 'recover s', 'mean')]
    lines.append(row % ('', '', '', 'step s', '', 'react s', 'short',
                        'moved', '', 'CPUs'))
    for app, _ in PATTERNS:
        for m, r in out['results'].items():
            v = r['vms'][app]
            lines.append(row % (
                app, m, v['violation_seconds'],
                _fmt_int(v['step_violation_s_max']),
                _fmt(v['reaction_s_mean']), _fmt(v['step_reaction_s_mean']),
                _fmt_of(v['steps_grown'], v['steps_short']),
                _fmt_of(v['bursts_moved_cores'], v['bursts']),
                _fmt(v['recovery_s_mean']), '%.1f' % r['mean_held_cpus']))
    for m, why in out['errors'].items():
        lines.append('%s: no result (%s)' % (m, why))
    return '\n'.join(lines)


def _fmt(x):
    return '-' if x is None else '%.1f' % x


def _fmt_int(x):
    return '-' if x is None else '%d' % x


def _fmt_of(part, whole):
    return '-' if part is None else '%d/%d' % (part, whole)
