"""The README demo's scenario on the paper's host (``ufo-sim demo``).

``ufo-demo`` runs a latency-critical guest beside a best-effort batch
guest and an idle one on the two cores of the machine it runs on, under
TCG. Here the same three guests run on the simulated host of the
paper's evaluation (8 cores, 16 CPUs): Memcached (8 vCPUs) at a light
and a busy load and quiet, beside a BE VM with a vCPU per host CPU (16)
and an idle VM (8 vCPUs), each phase once without ufo-agent (Nova's
shared policy: every thread floats over every core) and once with the
real agent as the demo configures it (``be_policy = soak``). Per phase:
the LC VM's p99 against its QoS target, the CPUs of its own, and the BE
VM's work. The demo prints it beside a run of its own that shows no
difference.
"""

import dataclasses
import textwrap

from ufo_agent.controller import config as controller_config
from ufo_sim import engine
from ufo_sim.experiments import parallel
from ufo_sim.managers import cell as cell_mod
from ufo_sim.managers import scenario
from ufo_sim.managers import ufo as ufo_mod
from ufo_sim import profiles

LC_PROFILE = 'memcached'
#: The demo's phases: name and the LC VM's load (fraction of its peak).
PHASES = (('lc-light', 0.2), ('lc-busy', 0.8), ('lc-quiet', 0.0))
MANAGERS = ('without', 'with')
IDLE_VCPUS = 8
#: The settling of ``be-soak --quick``: the agent's 20 s, then 6 judged.
QUICK = dict(converge=20, judge=6)


def scene_of(load, settings):
    """(the LC VM's scene, the scene with every VM, the BE VM).

    Both managers get the same scene: the same seed for the same load.
    """
    cell = cell_mod.Cell((cell_mod.VmLoad(LC_PROFILE, load),))
    lc = scenario.build(cell, settings, cell.seed(settings.seed, 'demo'))
    host = lc.host
    be_vcpus = settings.budget
    be_profile = profiles.BE(be_vcpus)
    be = host.add_vm('be', be_vcpus, be_profile)
    idle_profile = scenario.profile(LC_PROFILE, settings)
    idle = host.add_vm('idle', IDLE_VCPUS, idle_profile, rps=0.0)
    every = scenario.Scene(host, lc.vms + [be, idle],
                           lc.profiles + [be_profile, idle_profile],
                           lc.rps + [0.0, 0.0],
                           lc.vcpus + [be_vcpus, IDLE_VCPUS])
    return lc, every, be


def agent_config(settings):
    """The controller as ufo-demo runs it on a host of this size."""
    values = dict(settings.ufo_config)
    values.setdefault('be_policy', 'soak')
    return controller_config.ControllerConfig(**values)


def run_phase(phase, load, manager, settings):
    """One phase under one manager: a dict of what was measured."""
    lc, every, be = scene_of(load, settings)
    host = lc.host
    seconds = settings.judge * settings.tick
    start = {}
    if manager == 'without':
        # Nova's shared policy: every thread on every CPU, all online.
        cpus = scenario.cpus_of(lc.cores)
        scenario.apply_static(every, [lc.cores] * len(every.vms),
                              [lc.cores] * len(every.vms),
                              [None] * len(every.vms))
        host.advance(settings.converge * settings.tick)
        start['be'] = host.counters(be)
        window = scenario.measure(lc, 0.0, seconds)
        lc_cpus = len(cpus)
    else:
        agent = ufo_mod.UfoAgent(every, agent_config(settings),
                                 vm_class=['lc', 'be', 'auto'])
        control = scenario.ticking_agent(agent, settings, host, be, start)
        window, _ = scenario.run_feedback(lc, settings, agent.held_cpus,
                                          control)
        plan = agent.agent.last_plan
        vm = plan.vms[lc.vms[0]]
        lc_cpus = len(vm.cpus) if vm.cores else 0
    end = host.counters(be)
    real = seconds / engine.TIME_SCALE
    loaded = load > 0
    return {
        'phase': phase, 'manager': manager, 'load': load,
        # Latencies are simulated microseconds: real ones are
        # TIME_SCALE times shorter.
        'lc_p99_us': (window.p99_us[0] / engine.TIME_SCALE
                      if loaded else None),
        'qos_p99_us': lc.profiles[0].qos_p99_us / engine.TIME_SCALE,
        'lc_qos_met': window.ok[0] if loaded else None,
        'lc_cpus': lc_cpus,
        'be_chunks_per_s': (end.requests_done -
                            start['be'].requests_done) / real,
        'be_cpus': (end.vcpu_cpu_ns - start['be'].vcpu_cpu_ns) /
        (seconds * 1e9),
    }


def _task(task):
    return run_phase(*task)


def run(settings, processes=2, timeout=600.0):
    """Every phase under both managers; a JSON-ready dict."""
    tasks = [(phase, load, manager, settings)
             for phase, load in PHASES for manager in MANAGERS]
    results = []
    for (phase, load, manager, _), (status, value) in zip(
            tasks, parallel.run(_task, tasks, processes, timeout)):
        if status != parallel.OK:
            value = {'phase': phase, 'manager': manager, 'load': load,
                     'error': '%s: %s' % (status, value)}
        results.append(value)
    return {'conditions': settings.describe(), 'results': results,
            'settings': dataclasses.asdict(settings)}


# One manager's side of a row: LC p99 and verdict, its CPUs, BE's work.
_SIDE = '%-19s%9s%9s'


def _side(r):
    if r is None or 'error' in r:
        return '%-37s' % ('error: %s' % r['error'] if r else 'not run')
    p99 = ('%9.0f us %-6s' % (r['lc_p99_us'], 'met' if r['lc_qos_met']
                              else 'MISSED')
           if r['lc_p99_us'] is not None else '%9s' % '-')
    return _SIDE % (p99, '%d CPUs' % r['lc_cpus'],
                    '%.0f/s' % r['be_chunks_per_s'])


def table(out):
    """Both managers side by side, phase by phase."""
    by = {(r['phase'], r['manager']): r for r in out['results']}
    head = _SIDE % ('%12s %-6s' % ('lc p99', 'QoS'), 'lc CPUs', 'be work')
    qos = next((r['qos_p99_us'] for r in out['results']
                if 'qos_p99_us' in r), None)
    lines = textwrap.wrap(
        '%s beside a BE VM (a vCPU per host CPU) and an idle VM on the '
        'simulated paper host (%s); QoS target p99 <= %s us'
        % (LC_PROFILE, out['conditions'],
           '%.0f' % qos if qos is not None else '?'), 79)
    lines += ['%-16s%-39s%s' % ('phase   load', 'without ufo-agent',
                                'with ufo-agent'),
              '%-16s%s  %s' % ('', head, head)]
    for phase, load in PHASES:
        lines.append('%-10s%3.0f%%  %s  %s' % (
            phase, 100 * load, _side(by.get((phase, 'without'))),
            _side(by.get((phase, 'with')))))
    return '\n'.join(line.rstrip() for line in lines)


def verdict(out):
    """The answer in one sentence: QoS without and with the agent."""
    by = {(r['phase'], r['manager']): r for r in out['results']
          if 'error' not in r}
    parts = []
    for phase, load in PHASES:
        without, with_ = by.get((phase, 'without')), by.get((phase, 'with'))
        if not load or without is None or with_ is None:
            continue
        kept = (100.0 * with_['be_chunks_per_s'] /
                without['be_chunks_per_s']
                if without['be_chunks_per_s'] else None)
        parts.append('in %s %s its target without ufo-agent and %s it '
                     'with it, on %d CPUs of its own%s' % (
                         phase, 'met' if without['lc_qos_met'] else 'missed',
                         'met' if with_['lc_qos_met'] else 'missed',
                         with_['lc_cpus'],
                         ', the BE VM keeping %.0f %% of its work' % kept
                         if kept is not None else ''))
    if not parts:
        return 'The simulator gave no answer: %s.' % '; '.join(
            '%s %s: %s' % (r['phase'], r['manager'], r['error'])
            for r in out['results'] if 'error' in r)
    return '%s %s.' % (LC_PROFILE.capitalize(), '; '.join(parts))
