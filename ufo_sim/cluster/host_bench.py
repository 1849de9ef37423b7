"""Cost of a cloud host per simulated second, and the quasi-static error.

``python -m ufo_sim.cluster.host_bench`` fills a host of 32 cores (64
CPUs with SMT) with the VMs alive at the start of the tuning workload
(seed 1) up to ``--vcpus`` vCPUs (128: an allocation ratio of 2), steps
it through ``--hours`` of the workload from noon in 300-second load
epochs, and prints one RESULT line per policy and fidelity: CPU seconds
of this process per simulated host-second, LC violation seconds per LC
VM-second, mean CPUs held, best-effort work done over asked (as the
cloud's ``be_work_pct``). With ``--compare`` the surrogate runs both
quasi-static and stepping every second, and a RESULT line gives the
difference. ``--ufo-option NAME=VALUE`` sets a ``[controller]`` option
of the UFO agents, as ``ufo-sim cluster`` does. With ``--pool-trace
SECONDS`` each run also prints, every SECONDS, the emulator pool the
policy holds: the CPU its emulator threads used and the pool CPUs' busy
share (as measured by the host model), beside the emulator demand and
``rho_e`` the surrogate computes for the same layout and loads.
Benchmarks, not tests: they print, never assert.
"""

import argparse
import sys
import time

from ufo_sim import arguments
from ufo_sim.cluster import cloud
from ufo_sim.cluster import host as host_mod
from ufo_sim.cluster import metrics
from ufo_sim.cluster import surrogate
from ufo_sim.cluster import workload

EPOCH_S = 300
SEED = 1


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


def _pins(host, vm_id):
    """(vCPU CPUs, emulator CPUs, SCHED_IDLE) of a VM of ``host``."""
    if host.driver is not None:
        vcpus, emu = host.driver.read_pins(vm_id)
        return (frozenset().union(*vcpus), frozenset(emu),
                host.driver._get(vm_id).vcpus_idle)
    every = frozenset(host.all_cpus)
    return every, every, False


def emulator_pool(host):
    """The CPUs where the policy runs the emulator threads of most VMs."""
    pools = {}
    for vm_id in host.vms:
        emu = _pins(host, vm_id)[1]
        pools[emu] = pools.get(emu, 0) + 1
    return max(pools, key=pools.get) if pools else frozenset()


def mirror(host):
    """A surrogate host in ``host``'s present layout and loads."""
    model = surrogate.SurrogateHost(host.host.spec, seed=SEED)
    for vm_id, vm in host.vms.items():
        model.add_vm(vm_id, vm.request.vcpus, vm.profile)
        if not vm.request.lc and host_mod.be_threads(vm.request) == 0:
            model.stop_vm(vm_id)
        elif vm.rps:
            model.set_rps(vm_id, vm.rps)
        vcpus, emu, idle = _pins(host, vm_id)
        model.pin_vcpus(vm_id, vcpus)
        model.pin_emulator(vm_id, emu)
        model.set_vcpus_idle(vm_id, idle)
        model.set_online(vm_id, host.host.online(vm_id))
    return model


def pool_sample(host):
    """Counters behind :func:`pool_row`, read now."""
    cpu = host.host.cpu_time() if hasattr(host.host, 'cpu_time') else None
    return ({vm_id: host.host.counters(vm_id).emulator_cpu_ns
             for vm_id in host.vms}, cpu, host.host.now)


def pool_row(host, before, after):
    """The emulator pool between two :func:`pool_sample` readings.

    ``emu_cpus``: CPUs' worth of emulator threads' CPU of the VMs whose
    emulator threads are pinned to the pool; ``busy``: the pool CPUs'
    busy share (the engine only); ``demand`` and ``rho_e``: the
    surrogate's emulator demand of the same VMs and its ``rho_e`` for
    them, computed on the host's present layout and loads.
    """
    pool = emulator_pool(host)
    dt = after[2] - before[2]
    members = [v for v in host.vms if _pins(host, v)[1] == pool]
    emu = sum(after[0][v] - before[0].get(v, 0) for v in members) / 1e9
    busy = None
    if after[1] is not None and before[1] is not None:
        # Not idle: running a thread or switching (threads pay for
        # their switches in CPU time).
        idle = sum(after[1][c]['idle_ns'] - before[1][c]['idle_ns']
                   for c in pool) / 1e9
        busy = 1.0 - idle / (dt * len(pool))
    model = mirror(host)
    model._evaluate()
    feats = model._features
    demand = sum(feats[v][0].emu_demand for v in members)
    rho_e = max((feats[v][1]['rho_e'] for v in members), default=0.0)
    return dict(pool_cpus=len(pool), vms=len(members),
                emu_cpus=emu / dt, busy=busy, demand=demand, rho_e=rho_e)


def run(policy, fidelity, vcpus, seconds, quasi_static=True, start=43200.0,
        trace=0, config=None):
    """One policy on one host: what the RESULT line prints.

    (CPU s per host-second, violation s, LC s, mean CPUs held, VMs, BE
    work share or None). ``config``: the UFO agent's ControllerConfig
    (the paper's defaults if None).
    """
    host = host_mod.ClusterHost('h0', 32, 2, policy, seed=SEED,
                                fidelity=fidelity, config=config,
                                quasi_static=quasi_static)
    booted = fill(host, vcpus)
    cpu0 = time.process_time()
    violation = lc = 0
    held = be_work = be_asked = 0.0
    # Epochs of at most the run's length: a short engine run still
    # stops where it was asked to.
    epoch = max(1, min(EPOCH_S, int(seconds)))
    epochs = max(1, int(seconds) // epoch)
    for k in range(epochs):
        t = start + epoch * k
        loads = {r.vm_id: workload.load_at(r, t) for r in booted}
        chunks = [epoch] if not trace else \
            [trace] * (epoch // trace) + ([epoch % trace] if epoch % trace
                                          else [])
        for i, chunk in enumerate(chunks):
            before = pool_sample(host) if trace else None
            step = host.step(chunk, loads)
            violation += step.violation_s
            lc += step.lc_seconds
            held += step.held_cpus_mean * chunk
            be_work += step.be_work_s
            be_asked += step.be_asked_s
            if trace:
                row = pool_row(host, before, pool_sample(host))
                print('RESULT pool_trace policy=%s fidelity=%s t=%d %s'
                      % (policy, fidelity, epoch * k + trace * (i + 1),
                         ' '.join('%s=%s' % (n, 'na' if x is None else
                                             ('%.4f' % x if isinstance(
                                                 x, float) else x))
                                  for n, x in row.items())), flush=True)
    spent = time.process_time() - cpu0
    span = epochs * epoch
    return (spent / span, violation, lc, held / span, len(booted),
            be_work / be_asked if be_asked else None)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--vcpus', type=int, default=128)
    parser.add_argument('--hours', type=float, default=1.0)
    parser.add_argument('--engine-seconds', type=int, default=300,
                        help='simulated seconds of the engine runs')
    parser.add_argument('--policies', default=','.join(host_mod.POLICIES))
    parser.add_argument('--fidelities', default='engine,surrogate')
    parser.add_argument('--compare', action='store_true')
    parser.add_argument('--pool-trace', type=int, default=0,
                        metavar='SECONDS',
                        help='print the emulator pool every SECONDS')
    parser.add_argument('--ufo-option', type=arguments.controller_option,
                        action='append',
                        default=[], metavar='NAME=VALUE',
                        help='a [controller] option of the UFO agents, '
                             'the value as JSON (repeatable)')
    args = parser.parse_args(argv)
    config = cloud.controller_config(args.ufo_option)
    for fidelity in args.fidelities.split(','):
        seconds = args.engine_seconds if fidelity == 'engine' else \
            args.hours * 3600
        for policy in args.policies.split(','):
            cost, bad, lc, held, n, be = run(
                policy, fidelity, args.vcpus, seconds,
                trace=args.pool_trace, config=config)
            print('RESULT host_cost policy=%s fidelity=%s vms=%d '
                  'seconds=%d cpu_ms_per_host_s=%.3f violation_share=%.4f '
                  'cpus_held=%.1f be_work_pct=%s day16_s=%.0f'
                  % (policy, fidelity, n, seconds, cost * 1e3,
                     bad / max(1, lc), held,
                     metrics.percent_or_none(be),
                     cost * 16 * workload.DAY_S),
                  flush=True)
            if args.compare and fidelity == 'surrogate':
                cost1, bad1, lc1, held1, _, _ = run(
                    policy, fidelity, args.vcpus, seconds,
                    quasi_static=False, config=config)
                print('RESULT quasi_static_error policy=%s '
                      'violation_share_quasi=%.4f violation_share_every=%.4f'
                      ' cpus_held_quasi=%.2f cpus_held_every=%.2f '
                      'cpu_ms_per_host_s_every=%.3f'
                      % (policy, bad / max(1, lc), bad1 / max(1, lc1),
                         held, held1, cost1 * 1e3), flush=True)
    return 0


if __name__ == '__main__':
    sys.exit(main())
