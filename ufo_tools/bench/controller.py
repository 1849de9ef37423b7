"""Time the controller's decision step (one tick) on synthetic samples."""

import gc
import math
import random
import resource
import statistics
import time

from ufo_agent.controller import Controller
from ufo_agent.controller import ControllerConfig
from ufo_agent.controller import HostTopology
from ufo_agent.controller import VmSample
from ufo_agent.controller import VmSpec


def add_arguments(parser):
    parser.add_argument('--vms', type=int, default=200,
                        help='number of guests (default 200)')
    parser.add_argument('--cores', type=int, default=128,
                        help='managed physical cores (default 128)')
    parser.add_argument('--threads-per-core', type=int, default=2,
                        help='SMT width (default 2)')
    parser.add_argument('--ticks', type=int, default=300,
                        help='timed ticks per repeat (default 300)')
    parser.add_argument('--warmup', type=int, default=60,
                        help='untimed ticks before each repeat (default 60)')
    parser.add_argument('--repeats', type=int, default=5,
                        help='repeats (default 5)')
    parser.add_argument('--seed', type=int, default=1)


class _Workload:
    """A host's worth of guests.

    LC services with drifting load, some best-effort batch jobs and some
    idle guests.
    """

    def __init__(self, n_vms, rnd):
        self.rnd = rnd
        self.vms = []
        for i in range(n_vms):
            kind = rnd.choices(['lc', 'be', 'idle'], [0.5, 0.2, 0.3])[0]
            vcpus = rnd.choice([2, 4, 4, 8])
            self.vms.append({
                'spec': VmSpec('vm-%04d' % i, vcpus,
                               'be' if kind == 'be' else 'lc'),
                'kind': kind, 'load': rnd.uniform(0.05, 0.5),
                'rate': rnd.uniform(2e3, 5e4), 'knee': rnd.uniform(2, 6)})

    def samples(self, plan):
        out = {}
        for vm in self.vms:
            spec = vm['spec']
            if vm['kind'] == 'idle':
                out[spec.uuid] = VmSample(0.2, 3.0)
                continue
            if self.rnd.random() < 0.02:
                vm['load'] = min(1.0, max(0.02, vm['load'] *
                                          self.rnd.uniform(0.5, 1.8)))
            pcpus = spec.vcpus
            if plan is not None and spec.uuid in plan.vms:
                pcpus = max(1, len(plan.vms[spec.uuid].cpus))
            load = vm['load'] * self.rnd.uniform(0.95, 1.05)
            util = min(load * 100.0 * spec.vcpus * 0.6, 92.0 * pcpus)
            if vm['kind'] == 'be':
                out[spec.uuid] = VmSample(util, util * 0.5)
                continue
            rho = util / (100.0 * pcpus)
            sf = 2.0 * vm['rate'] * load * (1.0 - rho ** vm['knee'])
            # Its NICs' traffic: a request in, an answer out.
            arrived = vm['rate'] * load
            served = arrived * self.rnd.uniform(0.95, 1.05)
            out[spec.uuid] = VmSample(
                util, max(sf, 0.0), packets_in=arrived, packets_out=served,
                bytes_in=arrived * 200.0, bytes_out=served * 1500.0)
        return out

    def emulator_busy(self, samples):
        return 0.05 * sum(s.util for s in samples.values())


def _one_repeat(args, seed):
    rnd = random.Random(seed)
    topology = HostTopology.uniform(args.cores, args.threads_per_core,
                                    numa_nodes=2 if args.cores >= 4 else 1)
    controller = Controller(topology, ControllerConfig())
    workload = _Workload(args.vms, rnd)
    for vm in workload.vms:
        controller.add_vm(vm['spec'])
    plan = None
    times = []
    overloaded = decisions = 0
    for tick in range(args.warmup + args.ticks):
        samples = workload.samples(plan)
        busy = workload.emulator_busy(samples)
        gc.disable()
        start = time.perf_counter()
        plan = controller.tick(float(tick), samples, busy)
        elapsed = time.perf_counter() - start
        gc.enable()
        if tick >= args.warmup:
            times.append(elapsed * 1000.0)
            overloaded += plan.overloaded
            decisions += len(plan.decisions)
    fitted = sum(vm.fitted_models for vm in plan.vms.values())
    return times, overloaded, fitted, plan, decisions


def run(args):
    print('ufo-bench controller: %d VMs on %d cores x %d threads, '
          '%d timed ticks x %d repeats'
          % (args.vms, args.cores, args.threads_per_core, args.ticks,
             args.repeats))
    medians, all_times = [], []
    for rep in range(args.repeats):
        times, overloaded, fitted, plan, decisions = _one_repeat(
            args, args.seed + rep)
        median = statistics.median(times)
        medians.append(median)
        all_times.extend(times)
        print('repeat %d: median %.3f ms  p95 %.3f ms  max %.3f ms  '
              '(decisions %d, overloaded ticks %d, fitted models %d, '
              'idle cores %d, emulator cores %d)'
              % (rep + 1, median, _pct(times, 95), max(times), decisions,
                 overloaded, fitted, len(plan.idle_cores),
                 len(plan.emulator_cores)))
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    print('median of repeat medians: %.3f ms; p95 over all ticks: %.3f ms; '
          'peak RSS %.1f MB' % (statistics.median(medians),
                                _pct(all_times, 95), rss_mb))
    print('RESULT median_tick_ms=%.3f vms=%d cores=%d'
          % (statistics.median(medians), args.vms, args.cores))
    return 0


def _pct(values, pct):
    ordered = sorted(values)
    index = min(len(ordered) - 1, int(math.ceil(pct / 100.0 *
                                                len(ordered))) - 1)
    return ordered[max(index, 0)]
