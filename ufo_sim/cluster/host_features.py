"""What a host's state says about each VM, for the surrogate host model.

Pure functions of a host's layout and loads: which CPUs each VM's vCPU
and emulator threads may use, how many vCPUs are online, what each VM
offers. The same features are computed on the engine's cells when the
surrogate is fitted (:mod:`ufo_sim.cluster.surrogate_fit`) and on the
surrogate's own state when it runs (:mod:`ufo_sim.cluster.surrogate`).

CPUs whose pin sets overlap form one *pool*: every thread pinned into it
competes with every other there. A pool's capacity counts a core with
both siblings in the pool as ``2 / smt_slowdown`` CPUs (both busy run
each at 1/slowdown of a lone thread's pace), one with a single CPU as 1.
"""

import dataclasses
import math

NAMES = ('u', 'rho_v', 'rho_e', 'be', 'emu_home', 'log_n')


@dataclasses.dataclass(frozen=True)
class VmState:
    """One VM as the features see it.

    ``vcpu_demand`` and ``emu_demand``: CPUs' worth of work its vCPU and
    emulator threads want (a BE VM: its busy threads, capped at its
    online vCPUs).
    """

    name: str
    lc: bool
    online: int
    vcpu_cpus: frozenset
    emu_cpus: frozenset
    vcpu_demand: float
    emu_demand: float


def pools(vms):
    """CPU sets whose pins overlap, merged: a list of frozensets."""
    sets = []
    for vm in vms:
        for cpus in (vm.vcpu_cpus, vm.emu_cpus):
            merged = set(cpus)
            rest = []
            for other in sets:
                if other & merged:
                    merged |= other
                else:
                    rest.append(other)
            sets = rest + [frozenset(merged)]
    return sets


def capacity(cpus, siblings, smt_slowdown):
    """CPUs' worth of work a pool can run (see the module docstring)."""
    total = 0.0
    for group in siblings:
        inside = sum(1 for c in group if c in cpus)
        if inside == 1:
            total += 1.0
        elif inside > 1:
            total += inside / smt_slowdown
    return total


def features(vms, siblings, smt_slowdown):
    """Per VM name: a dict of the :data:`NAMES` features.

    ``u``: its vCPU demand per usable vCPU (online vCPUs, at most its
    CPUs); ``rho_v`` and ``rho_e``: the load (all demand over capacity)
    of the pools of its vCPU and of its emulator threads; ``be``: the BE
    demand (always runnable threads) in its vCPU pool per CPU of
    capacity, its own excluded; ``emu_home``: 1 when its emulator shares
    its vCPUs' pool; ``log_n``: log of its usable vCPUs.
    """
    groups = pools(vms)
    of = {}
    for g in groups:
        for c in g:
            of[c] = g
    load = {g: 0.0 for g in groups}
    be = {g: 0.0 for g in groups}
    for vm in vms:
        gv = of[next(iter(vm.vcpu_cpus))]
        ge = of[next(iter(vm.emu_cpus))]
        load[gv] += vm.vcpu_demand
        load[ge] += vm.emu_demand
        if not vm.lc:
            be[gv] += vm.vcpu_demand
    cap = {g: max(1e-9, capacity(g, siblings, smt_slowdown))
           for g in groups}
    out = {}
    for vm in vms:
        gv = of[next(iter(vm.vcpu_cpus))]
        ge = of[next(iter(vm.emu_cpus))]
        n = max(1, min(vm.online, len(vm.vcpu_cpus)))
        own_be = 0.0 if vm.lc else vm.vcpu_demand
        out[vm.name] = {
            'u': vm.vcpu_demand / n,
            'rho_v': load[gv] / cap[gv],
            'rho_e': load[ge] / cap[ge],
            'be': (be[gv] - own_be) / cap[gv],
            'emu_home': 1.0 if gv is ge else 0.0,
            'log_n': math.log(n)}
    return out
