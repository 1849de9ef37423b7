"""What a host's state says about each VM, for the surrogate host model.

Pure functions of a host's layout and loads: which CPUs each VM's vCPU
and emulator threads may use, how many vCPUs are online, what each VM
offers. The same features are computed on the engine's cells when the
surrogate is fitted (:mod:`ufo_sim.cluster.surrogate_fit`) and on the
surrogate's own state when it runs (:mod:`ufo_sim.cluster.surrogate`).

The load a VM's threads meet is that on the CPUs they may use. For
vCPU work the capacity of a CPU set counts a core with both siblings in
it as ``2 / smt_slowdown`` CPUs (both busy run each at 1/slowdown of a
lone thread's pace), one with a single CPU as 1. Emulator demand is
CPU time as the engine measures it (a thread's CPU time already runs at
its sibling's pace), so it counts against the CPUs themselves: a pool's
emulator load is the sum of its VMs' emulator CPU over its CPU count.
"""

import dataclasses
import functools
import math

NAMES = ('u', 'rho_v', 'rho_e', 'be', 'emu_home', 'log_n', 'free',
         'stack')


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


def emulator_demand(cost, rps):
    """An LC VM's emulator CPUs at ``rps`` (``cost``: its profile's)."""
    return cost['emu_a'] * rps ** cost['emu_b'] if rps > 0 else 0.0


def capacity(cpus, siblings, smt_slowdown):
    """CPUs' worth of work a pool can run (see the module docstring)."""
    core_of = _core_of(tuple(tuple(group) for group in siblings))
    inside = {}
    for c in cpus:
        core = core_of.get(c)
        if core is not None:
            inside[core] = inside.get(core, 0) + 1
    total = 0.0
    # Core by core in the host's order: the same sum for any CPU order.
    for core in sorted(inside):
        total += 1.0 if inside[core] == 1 else inside[core] / smt_slowdown
    return total


@functools.lru_cache(maxsize=8)
def _core_of(siblings):
    return {cpu: core for core, group in enumerate(siblings)
            for cpu in group}


class _ByCpu:
    """Items by the CPUs they may use.

    A host's pools are looked up once per VM, and most items touch few
    of them. ``cpus_of(item)`` is an item's CPU set (a frozenset; many
    items share one). :meth:`on` gives the items that may use a CPU of
    a set, in their order: the sums over them are the sums over every
    item in order, less terms that are zero.
    """

    def __init__(self, items, cpus_of):
        self.items = items
        sets = {}
        for i, item in enumerate(items):
            sets.setdefault(cpus_of(item), []).append(i)
        self._sets = list(sets.items())

    def on(self, cpus):
        hit = []
        for where, indexes in self._sets:
            if not where.isdisjoint(cpus):
                hit.extend(indexes)
        hit.sort()
        items = self.items
        return [items[i] for i in hit]


def features(vms, siblings, smt_slowdown):
    """Per VM name: a dict of the :data:`NAMES` features.

    ``u``: its vCPU demand per usable vCPU (online vCPUs, at most its
    CPUs); ``rho_v`` and ``rho_e``: the load on the CPUs its vCPU and
    its emulator threads may use, vCPU work over their capacity plus
    emulator CPU over their count, where a thread group pinned more
    widely is counted on each of its CPUs for its demand's share
    (spread evenly: the host balances it); ``be``: the
    same load of the other VMs' BE vCPU threads (always runnable) on its
    vCPUs' CPUs; ``emu_home``: 1 when its emulator threads may run on
    its vCPUs' CPUs; ``log_n``: log of its usable vCPUs; ``free``: 1
    when the other VMs' vCPU work on its vCPUs' CPUs leaves one of them
    free, 0 when it fills them all (a woken vCPU of a quiet VM runs at
    once, or waits for a busy thread's slice), linear between;
    ``stack``: log of its online vCPUs over its usable ones, above 0 when
    more vCPUs are online than it has CPUs (the host time-slices them:
    on the engine eight vCPUs on two CPUs miss QoS at loads two on two
    meet). Beside
    them, ``others_per_cpu``: that work per CPU (not compared by the
    nearest-neighbour model; :func:`~ufo_sim.cluster.surrogate.predict`
    reads it for a parked VM).
    """
    groups = []         # (CPUs, demand, batch, emulator, VM name)
    for vm in vms:
        groups.append((vm.vcpu_cpus, vm.vcpu_demand, not vm.lc, False,
                       vm.name))
        groups.append((vm.emu_cpus, vm.emu_demand, False, True, vm.name))
    by_cpu = _ByCpu(groups, lambda group: group[0])

    # Many VMs share a pool: each CPU set's load is summed once, in the
    # same order as for any VM (the same floats).
    pools = {}          # CPUs -> (load, [(batch share, VM)], capacity)

    def pool(cpus):
        cpus = frozenset(cpus)
        if cpus not in pools:
            work = emulator = 0.0
            batch = []
            for where, demand, be, emu, name in by_cpu.on(cpus):
                if not demand:
                    continue
                share = demand * len(where & cpus) / len(where)
                if emu:
                    emulator += share
                else:
                    work += share
                if be:
                    batch.append((share, name))
            cap = max(1e-9, capacity(cpus, siblings, smt_slowdown))
            pools[cpus] = (work / cap + emulator / max(1, len(cpus)),
                           batch, cap, work)
        return pools[cpus]

    def load_on(cpus, me):
        load, batch, cap, _ = pool(cpus)
        others = 0.0
        for share, name in batch:
            if name != me:
                others += share
        return load, others / cap

    out = {}
    for vm in vms:
        n = max(1, min(vm.online, len(vm.vcpu_cpus)))
        rho_v, be = load_on(vm.vcpu_cpus, vm.name)
        rho_e, _ = load_on(vm.emu_cpus, vm.name)
        others = pool(vm.vcpu_cpus)[3] - vm.vcpu_demand
        free = min(1.0, max(0.0, len(vm.vcpu_cpus) - others))
        out[vm.name] = {
            'u': vm.vcpu_demand / n, 'rho_v': rho_v, 'rho_e': rho_e,
            'be': be, 'emu_home': 1.0 if vm.emu_cpus & vm.vcpu_cpus else 0.0,
            'log_n': math.log(n), 'free': free,
            'stack': math.log(max(1, vm.online) / n),
            'others_per_cpu': others / len(vm.vcpu_cpus)}
    return out


def served(vms, siblings, smt_slowdown):
    """Per VM name: the share of its vCPU demand its vCPU CPUs serve.

    In an overloaded pool a thread group that asks less than an equal
    share for each of its threads (a VM's usable vCPUs) gets all it
    asks, as CFS serves a thread that rarely runs; the others share
    the rest in proportion to what they ask. Emulator threads take
    their CPU first. The groups of VMs pinned more widely count for
    their share, as in :func:`features`.
    """
    pools = {}
    by_cpu = _ByCpu(vms, lambda vm: vm.emu_cpus | vm.vcpu_cpus)

    def pool(cpus):
        if cpus in pools:
            return pools[cpus]
        cap = capacity(cpus, siblings, smt_slowdown)
        groups = []
        for vm in by_cpu.on(cpus):
            inside = len(vm.emu_cpus & cpus) / len(vm.emu_cpus)
            cap -= vm.emu_demand * inside * cap / max(1, len(cpus))
            inside = len(vm.vcpu_cpus & cpus) / len(vm.vcpu_cpus)
            if vm.vcpu_demand and inside:
                # No more than one CPU a thread.
                threads = max(1, min(vm.online, len(vm.vcpu_cpus)))
                groups.append((min(vm.vcpu_demand, threads) * inside,
                               threads * inside, vm.name,
                               vm.vcpu_demand * inside))
        pools[cpus] = share = {}
        left = max(0.0, cap)
        # The lightest per thread first, each in full while it asks no
        # more than an equal share a thread of what is left.
        groups.sort(key=lambda g: g[0] / g[1])
        threads_left = sum(g[1] for g in groups)
        heavy = []
        for demand, threads, name, asked in groups:
            if heavy or demand > left * threads / threads_left:
                heavy.append((demand, name, asked))
                continue
            share[name] = demand / asked
            left -= demand
            threads_left -= threads
        # The rest in proportion to what they ask.
        total = sum(asked for _, _, asked in heavy)
        for demand, name, asked in heavy:
            share[name] = min(demand, left * asked / total) / asked
        return share

    return {vm.name: pool(frozenset(vm.vcpu_cpus)).get(vm.name, 1.0)
            for vm in vms}


def emulator_pool_load(vms, served, siblings, smt_slowdown):
    """Per VM name: the load its emulator threads meet in a shared pool.

    The work on its emulator threads' CPUs that reaches them: each
    VM's vCPU and emulator demand there times ``served`` (by VM name,
    the share of its vCPU demand its CPUs serve: requests its vCPUs do
    not serve bring no emulator work), vCPU work over the CPUs'
    capacity plus emulator CPU over their count, as in
    :func:`features`. Over 1, the pool is saturated: its CPUs are all
    busy and a woken emulator thread waits for one. 0 for a VM whose
    emulator threads may run on its vCPUs' CPUs or meet no other VM's
    emulator threads (its own overload is the features' to judge).
    """
    pools = {}
    by_cpu = _ByCpu(vms, lambda vm: vm.emu_cpus | vm.vcpu_cpus)

    def load(cpus):
        if cpus not in pools:
            work = emulator = 0.0
            for vm in by_cpu.on(cpus):
                share = served.get(vm.name, 1.0)
                if vm.vcpu_demand:
                    work += vm.vcpu_demand * share * \
                        len(vm.vcpu_cpus & cpus) / len(vm.vcpu_cpus)
                if vm.emu_demand:
                    emulator += vm.emu_demand * share * \
                        len(vm.emu_cpus & cpus) / len(vm.emu_cpus)
            cap = max(1e-9, capacity(cpus, siblings, smt_slowdown))
            pools[cpus] = work / cap + emulator / max(1, len(cpus))
        return pools[cpus]

    # Emulator thread groups by CPU set: many VMs share one pool.
    groups = {}
    for vm in vms:
        if vm.emu_demand:
            groups[vm.emu_cpus] = groups.get(vm.emu_cpus, 0) + 1
    out = {}
    for vm in vms:
        shared = sum(n for cpus, n in groups.items()
                     if cpus & vm.emu_cpus) > 1
        if not vm.emu_demand or vm.emu_cpus & vm.vcpu_cpus or not shared:
            out[vm.name] = 0.0
        else:
            out[vm.name] = load(frozenset(vm.emu_cpus))
    return out


def crowding(vms, siblings):
    """Per VM name: (others' vCPU demand on its vCPU CPUs, their cores).

    The demand in CPUs' worth, a group pinned more widely counted for
    its share as in :func:`features`; the cores: SMT groups with a CPU
    among its vCPUs' CPUs.
    """
    # Many VMs share a pool: each CPU set's work is summed once.
    pools = {}
    by_cpu = _ByCpu(vms, lambda vm: vm.vcpu_cpus)
    core_of = _core_of(tuple(tuple(group) for group in siblings))

    def pool(cpus):
        if cpus not in pools:
            work = sum(vm.vcpu_demand * len(vm.vcpu_cpus & cpus) /
                       len(vm.vcpu_cpus) for vm in by_cpu.on(cpus)
                       if vm.vcpu_demand)
            cores = len({core_of[c] for c in cpus if c in core_of})
            pools[cpus] = (work, max(1, cores))
        return pools[cpus]

    out = {}
    for vm in vms:
        work, cores = pool(frozenset(vm.vcpu_cpus))
        out[vm.name] = (max(0.0, work - vm.vcpu_demand), cores)
    return out


def wake_refill(work, debt, cold_slowdown, decay, gap, others, cores):
    """Guest CPU seconds a request adds refilling the caches it wakes to.

    The engine's cache model: a thread switched in where others ran
    since it last did owes up to ``debt`` seconds of stall, paid as it
    works at ``1 / cold_slowdown`` of its pace, so a wake-up followed by
    ``work`` seconds of work costs ``min(work * (cold_slowdown - 1),
    debt)`` more; the share owed decays as ``1 - exp(-others' CPU time
    on the core / decay)``. A quiet vCPU wakes every ``gap`` seconds; it
    finds a core no other thread ran on while fewer others' threads
    (``others``, CPUs' worth) than its ``cores`` less one are busy, and
    else one that ran ``others / cores`` CPUs' worth meanwhile.
    """
    if others <= 0 or gap <= 0 or work <= 0:
        return 0.0
    crowded = min(1.0, max(0.0, others - (cores - 1)))
    cold = crowded * (1.0 - math.exp(-others / cores * gap / decay))
    return cold * min(work * (cold_slowdown - 1.0), debt)
