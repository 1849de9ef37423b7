"""CPU cost of the engine: ``python -m ufo_sim.engine.bench``.

The budget case: a 16-logical-CPU host with two 8-vCPU LC VMs at their
max load, in each layout a manager uses (all shared; vCPUs split 8/8
with shared emulator CPUs; host-aware 6+6 vCPUs and 2+2 emulator CPUs).
Overload makes threads run back to back, so lighter loads, which switch
more, are measured too and the worst case is reported.
"""

import argparse
import time

from ufo_sim.engine.host import SimHost
from ufo_sim.engine.spec import HostSpec
from ufo_sim import profiles

LAYOUTS = ('shared', 'split', 'hostaware')


LOADS = (1.0, 0.6, 0.3)


def _build(profile, layout, load, seed):
    host = SimHost(HostSpec(cores=8, smt=2), seed=seed)
    vms = [host.add_vm('vm%d' % i, profile.vcpus, profile,
                       rps=profile.max_rps * load) for i in range(2)]
    if layout == 'split':
        for i, vm in enumerate(vms):
            host.pin_vcpus(vm, range(8 * i, 8 * i + 8))
    elif layout == 'hostaware':
        for i, vm in enumerate(vms):
            host.pin_vcpus(vm, range(8 * i, 8 * i + 6))
            host.pin_emulator(vm, range(8 * i + 6, 8 * i + 8))
            host.set_online(vm, 6)
    return host


def cost_per_second(profile, layout, load=1.0, seconds=3.0, seed=1):
    """CPU seconds this process spends per simulated second."""
    host = _build(profile, layout, load, seed)
    host.advance(0.5)
    t0 = time.process_time()
    host.advance(seconds)
    return (time.process_time() - t0) / seconds


def run(seconds=3.0, loads=LOADS):
    """Measure each LC profile, layout and load: {(name, layout, load): s}."""
    return {(p.name, layout, load): cost_per_second(p, layout, load, seconds)
            for p in profiles.LC_PROFILES for layout in LAYOUTS
            for load in loads}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--seconds', type=float, default=3.0,
                        help='simulated seconds per case')
    args = parser.parse_args(argv)
    results = run(args.seconds)
    for (name, layout, load), cost in sorted(results.items()):
        print('%-10s %-10s load %3.0f%%  %6.2f ms CPU per simulated second'
              % (name, layout, load * 100, cost * 1e3))
    at_max = [c for (_n, _l, load), c in results.items() if load == 1.0]
    print('max load, worst: %.2f ms CPU per simulated second (budget 10)'
          % (max(at_max) * 1e3))
    print('any load, worst: %.2f ms CPU per simulated second'
          % (max(results.values()) * 1e3))


if __name__ == '__main__':
    main()
