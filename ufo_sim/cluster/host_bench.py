"""Cost of a cloud host per simulated second, and the quasi-static error.

``python -m ufo_sim.cluster.host_bench`` fills a host of 32 cores (64
CPUs with SMT) with the VMs alive at the start of the tuning workload
(seed 1) up to ``--vcpus`` vCPUs (128: an allocation ratio of 2), steps
it through ``--hours`` of the workload from noon in 300-second load
epochs, and prints one RESULT line per policy and fidelity: CPU seconds
of this process per simulated host-second, LC violation seconds per
LC VM-second, mean CPUs held. With ``--compare`` the surrogate runs
both quasi-static and stepping every second, and a RESULT line gives
the difference. Benchmarks, not tests: they print, never assert.
"""

import argparse
import sys
import time

from ufo_sim.cluster import host as host_mod
from ufo_sim.cluster import workload

EPOCH_S = 300


def fill(host, vcpus, seed=1):
    """Boot the VMs alive at time 0 until ``vcpus`` vCPUs are placed."""
    booted, used = [], 0
    for r in workload.generate(workload.WorkloadParams(), seed,
                               workload.DAY_S):
        if r.arrive_s > 0.0:
            break
        if used + r.vcpus <= vcpus:
            host.boot(r)
            booted.append(r)
            used += r.vcpus
    return booted


def run(policy, fidelity, vcpus, seconds, quasi_static=True, start=43200.0):
    """(CPU s per host-second, violation s, LC s, mean CPUs held)."""
    host = host_mod.ClusterHost('h0', 32, 2, policy, seed=1,
                                fidelity=fidelity,
                                quasi_static=quasi_static)
    booted = fill(host, vcpus)
    cpu0 = time.process_time()
    violation = lc = 0
    held = 0.0
    for k in range(max(1, int(seconds) // EPOCH_S)):
        t = start + EPOCH_S * k
        loads = {r.vm_id: workload.load_at(r, t) for r in booted}
        step = host.step(EPOCH_S, loads)
        violation += step.violation_s
        lc += step.lc_seconds
        held += step.held_cpus_mean * EPOCH_S
    spent = time.process_time() - cpu0
    span = max(1, int(seconds) // EPOCH_S) * EPOCH_S
    return spent / span, violation, lc, held / span, len(booted)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--vcpus', type=int, default=128)
    parser.add_argument('--hours', type=float, default=1.0)
    parser.add_argument('--engine-seconds', type=int, default=300,
                        help='simulated seconds of the engine runs')
    parser.add_argument('--policies', default=','.join(host_mod.POLICIES))
    parser.add_argument('--fidelities', default='engine,surrogate')
    parser.add_argument('--compare', action='store_true')
    args = parser.parse_args(argv)
    for fidelity in args.fidelities.split(','):
        seconds = args.engine_seconds if fidelity == 'engine' else \
            args.hours * 3600
        for policy in args.policies.split(','):
            cost, bad, lc, held, n = run(policy, fidelity, args.vcpus,
                                         seconds)
            print('RESULT host_cost policy=%s fidelity=%s vms=%d '
                  'seconds=%d cpu_ms_per_host_s=%.3f violation_share=%.4f '
                  'cpus_held=%.1f day16_s=%.0f'
                  % (policy, fidelity, n, seconds, cost * 1e3,
                     bad / max(1, lc), held, cost * 16 * workload.DAY_S),
                  flush=True)
            if args.compare and fidelity == 'surrogate':
                cost1, bad1, lc1, held1, _ = run(
                    policy, fidelity, args.vcpus, seconds,
                    quasi_static=False)
                print('RESULT quasi_static_error policy=%s '
                      'violation_share_quasi=%.4f violation_share_every=%.4f'
                      ' cpus_held_quasi=%.2f cpus_held_every=%.2f '
                      'cpu_ms_per_host_s_every=%.3f'
                      % (policy, bad / max(1, lc), bad1 / max(1, lc1),
                         held, held1, cost1 * 1e3), flush=True)
    return 0


if __name__ == '__main__':
    sys.exit(main())
