"""The invariants every :class:`HostPlan` satisfies.

1. The vCPU pools, the emulator pool and the idle pool are pairwise
   disjoint, and together they are exactly the managed cores.
2. The emulator pool holds at least ``emulator_min_cores``.
3. No VM holds more cores than it needs to run all its vCPUs at once
   (``ceil(vcpus / threads_per_core)``).
4. Only active VMs hold cores. Parked and best-effort VMs, and active VMs
   left without a core under overload, run on the shared CPUs: the idle
   pool, which is then not empty unless ``idle_pool_min_cores`` is 0, in
   which case they share every managed CPU.
5. Every VM has somewhere to run, and its CPUs are the CPUs of its cores
   (or the shared CPUs when it has none). Emulator threads run on the
   emulator pool's CPUs, or on the shared CPUs while the pool is empty.
6. Online vCPU targets lie in [1, vcpus]; an active VM with cores keeps
   exactly min(vcpus, its pCPUs) online, so #vCPUs == #pCPUs.
7. ``overloaded`` is set exactly when ``shortfall_cores`` > 0.
8. Only best-effort VMs under ``be_policy = soak`` run at idle priority
   (``sched_idle``), and they run on every managed CPU but the emulator
   pool's instead of the shared CPUs (5): idle priority is what lets
   them onto other pools.
"""

import math

from ufo_agent.controller.plan import VmMode


class InvariantError(AssertionError):
    """A plan broke one of the invariants above."""


def check_plan(plan, topology, specs, config):
    """Raise :class:`InvariantError` naming the first broken invariant."""
    def fail(number, message):
        raise InvariantError('invariant %d: %s' % (number, message))

    managed = topology.core_ids
    pools = [('emulator', plan.emulator_cores), ('idle', plan.idle_cores)]
    pools += [(uuid, vm.cores) for uuid, vm in sorted(plan.vms.items())]
    seen = set()
    for name, cores in pools:
        if seen & cores:
            fail(1, '%s shares cores %s' % (name, sorted(seen & cores)))
        seen |= cores
    if seen != managed:
        fail(1, 'pools cover %s, managed cores are %s'
             % (sorted(seen), sorted(managed)))
    if len(plan.emulator_cores) < min(config.emulator_min_cores,
                                      len(managed)):
        fail(2, 'emulator pool has %d cores' % len(plan.emulator_cores))
    all_cpus = topology.cpus_of(managed)
    shared = topology.cpus_of(plan.idle_cores) or all_cpus
    if plan.shared_cpus != shared:
        fail(5, 'shared CPUs %s are neither the idle pool nor, with it '
             'empty, every managed CPU' % sorted(plan.shared_cpus))
    if plan.emulator_cpus != (topology.cpus_of(plan.emulator_cores) or
                              shared):
        fail(5, 'emulator CPUs do not match its cores')
    for uuid, vm in plan.vms.items():
        _check_vm(fail, uuid, vm, specs[uuid], plan, topology, config,
                  shared)
    if plan.shortfall_cores < 0 or \
            plan.overloaded != (plan.shortfall_cores > 0):
        fail(7, 'overloaded=%s with shortfall %d'
             % (plan.overloaded, plan.shortfall_cores))


def _check_vm(fail, uuid, vm, spec, plan, topology, config, shared):
    """Invariants 3 to 6 and 8 for one VM."""
    limit = math.ceil(spec.vcpus / topology.threads_per_core)
    if len(vm.cores) > limit:
        fail(3, '%s holds %d cores, limit %d'
             % (uuid, len(vm.cores), limit))
    if vm.mode != VmMode.ACTIVE and vm.cores:
        fail(4, '%s is %s but holds cores' % (uuid, vm.mode.value))
    soak = (vm.mode == VmMode.BEST_EFFORT and
            config.be_policy == 'soak')
    if vm.sched_idle != soak:
        fail(8, '%s is %s at idle priority' % (
            uuid, 'not' if soak else 'wrongly'))
    if vm.sched_idle:
        soaked = topology.core_ids - plan.emulator_cores
        if vm.cpus != topology.cpus_of(soaked):
            fail(8, '%s soaks %s, not every CPU beside the emulator '
                 'pool' % (uuid, sorted(vm.cpus)))
    elif not vm.cores:
        if not plan.idle_cores and config.idle_pool_min_cores:
            fail(4, '%s has no core and the idle pool is empty' % uuid)
        if vm.cpus != shared:
            fail(5, '%s does not run on the shared CPUs' % uuid)
    elif vm.cpus != topology.cpus_of(vm.cores):
        fail(5, '%s CPUs do not match its cores' % uuid)
    if not vm.cpus:
        fail(5, '%s has nowhere to run' % uuid)
    if not 1 <= vm.online_vcpus <= spec.vcpus:
        fail(6, '%s online target %d outside [1, %d]'
             % (uuid, vm.online_vcpus, spec.vcpus))
    if vm.cores and vm.online_vcpus != min(spec.vcpus, len(vm.cpus)):
        fail(6, '%s keeps %d vCPUs online on %d pCPUs'
             % (uuid, vm.online_vcpus, len(vm.cpus)))
