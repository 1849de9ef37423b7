"""DynIso: per-VM core isolation resized by a PARTIES-style loop.

Each VM's vCPU threads and its emulator threads share the VM's own cores
(no emulator isolation, all vCPUs online: the guest is not told). The
cores are resized once a second from the p99 measured over that second
(:mod:`ufo_sim.managers.parties`), starting from an even split of the
budget. A VM holds at most as many CPUs as it has vCPUs (paper 6.1).

The loop acts once per control interval (one real second, ``tick``
simulated seconds). It runs ``converge`` intervals, then keeps running
while the cell is judged over ``judge`` intervals; the CPUs reported are
the most it held during the judged window.
"""

import math

from ufo_sim.managers import cell as cell_mod
from ufo_sim.managers import parties
from ufo_sim.managers import scenario

NAME = 'dyniso'


def layout(scene, counts):
    """Give VM i the next ``counts[i]`` cores, emulator included."""
    scenario.apply_isolated(scene, counts, 0, coordinate=False)


class DynIso:
    """The loop bound to one scene; also used by the dynamic experiment."""

    def __init__(self, scene, budget, smt, emulator_cpus=None):
        """Start from an even split of ``budget`` cores.

        ``emulator_cpus``, when given, is where every emulator thread
        runs instead of on its VM's cores (the dynamic experiment).
        """
        self.emulator_cpus = emulator_cpus
        limits = [math.ceil(n / smt) for n in scene.vcpus]
        start = max(1, budget // len(scene.vms))
        self.scene = scene
        self.names = list(scene.vms)
        self.loop = parties.PartiesLoop(budget, {
            vm: (min(start, limits[i]), limits[i],
                 scene.profiles[i].qos_p99_us)
            for i, vm in enumerate(scene.vms)})
        self.apply()

    def counts(self):
        cores = self.loop.cores()
        return [cores[vm] for vm in self.names]

    def apply(self):
        layout(self.scene, self.counts())
        if self.emulator_cpus:
            for vm in self.scene.vms:
                self.scene.host.pin_emulator(vm, self.emulator_cpus)

    def step(self, now, latencies):
        """Feed one interval's latencies (one array per VM), apply.

        ``now`` counts control intervals (real-world seconds).
        """
        before = self.counts()
        self.loop.step(now, {vm: scenario.p99(lat)
                             for vm, lat in zip(self.names, latencies)})
        if self.counts() != before:
            self.apply()


def evaluate(cell, settings):
    scene = scenario.build(cell, settings, cell.host_seed(settings.seed))
    manager = DynIso(scene, settings.cores, settings.smt)
    window, held = scenario.run_feedback(
        scene, settings, lambda: sum(manager.counts()) * settings.smt,
        manager.step)
    stats = scenario.held_stats(held, window.ticks)
    return cell_mod.CellResult(
        NAME, cell.key, stats['cpus_max'], window.all_ok, window.p99_us,
        {'vm_cores': manager.counts(),
         'sim_seconds': (settings.converge + settings.judge) *
         settings.tick}, **stats)
