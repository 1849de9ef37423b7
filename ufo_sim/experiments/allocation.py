"""Fixed allocations, measured as the Oracle judges them and the agent sees
them.

A what-if tool ("what does this VM get on two cores?") and the way to
check the controller's rules against the Oracle: each allocation runs
with isolated pools, exactly as one of the Oracle's trials (same host,
seed and window), and reports per VM its p99 and QoS verdict, and what
the guest module would report to the agent over the same window:
utilization, per-core utilization (PCU) and scheduling frequency (SF,
guest context switches per real second). Beside them, what the host sees
of the emulator threads without the guest's help: their run delay (time
runnable but waiting for a CPU, ``/proc/<tid>/schedstat``) per second of
CPU time they got, the signal of the adaptive emulator-thread scheduler
paper.
"""

import dataclasses

from ufo_sim import engine
from ufo_sim.managers import oracle
from ufo_sim.managers import scenario


@dataclasses.dataclass(frozen=True)
class VmResult:
    profile: str
    load: float
    cores: int
    util_pct: float     # % of one CPU, as the guest module reports it
    pcu: float          # utilization per CPU of its pool, 0..1
    sf: float           # guest context switches per real second
    p99_us: float
    qos_p99_us: float
    qos_met: bool
    emulator_wait: float    # run delay of its emulator threads / their CPU


@dataclasses.dataclass(frozen=True)
class AllocationResult:
    counts: tuple
    emulator: int
    cpus: int           # logical CPUs held (VM pools and emulator pool)
    emulator_util: float    # busy fraction of its pool; None without one
    emulator_wait: float    # run delay of all emulator threads / their CPU
    vms: tuple          # VmResult per VM


def parse(text):
    """``A,B[,...]/E``: cores per VM, then emulator-pool cores."""
    vms, sep, emulator = text.partition('/')
    try:
        counts = tuple(int(c) for c in vms.split(','))
        emu = int(emulator) if sep else None
    except ValueError:
        counts, emu = (), None
    if not counts or emu is None or min(counts) < 1 or emu < 0:
        raise ValueError('%r: expected cores per VM and emulator cores, '
                         'e.g. 2,1/2' % text)
    return counts, emu


def measure(cell, settings, counts, emulator):
    """One :class:`AllocationResult`; the Oracle's trial of it."""
    if len(counts) != len(cell.vms):
        raise ValueError('%d core counts for %d VMs'
                         % (len(counts), len(cell.vms)))
    scene = oracle.isolated_scene(cell, settings, list(counts), emulator)
    scene.host.advance(settings.warmup)
    start = [scene.host.counters(vm) for vm in scene.vms]
    window = scenario.measure(scene, 0, settings.measure, settings.tick)
    end = [scene.host.counters(vm) for vm in scene.vms]
    real_seconds = settings.measure / engine.TIME_SCALE
    vms = []
    for i, vm_load in enumerate(cell.vms):
        busy = end[i].guest_busy_ns - start[i].guest_busy_ns
        util = busy / settings.measure / 1e7
        cpus = counts[i] * settings.smt
        vms.append(VmResult(
            profile=vm_load.profile, load=vm_load.load, cores=counts[i],
            util_pct=util, pcu=util / (100.0 * cpus),
            sf=(end[i].guest_sched_in - start[i].guest_sched_in) /
            real_seconds,
            p99_us=window.p99_us[i],
            qos_p99_us=scene.profiles[i].qos_p99_us,
            qos_met=window.ok[i],
            emulator_wait=_wait_per_busy(start[i:i + 1], end[i:i + 1])))
    emu_busy = sum(e.emulator_cpu_ns - s.emulator_cpu_ns
                   for s, e in zip(start, end))
    emu_util = (emu_busy / settings.measure / 1e9 /
                (emulator * settings.smt) if emulator else None)
    return AllocationResult(counts=tuple(counts), emulator=emulator,
                            cpus=(sum(counts) + emulator) * settings.smt,
                            emulator_util=emu_util,
                            emulator_wait=_wait_per_busy(start, end),
                            vms=tuple(vms))


def _wait_per_busy(start, end):
    wait = sum(e.emulator_wait_ns - s.emulator_wait_ns
               for s, e in zip(start, end))
    busy = sum(e.emulator_cpu_ns - s.emulator_cpu_ns
               for s, e in zip(start, end))
    return wait / busy if busy > 0 else 0.0


def run(cell, settings, allocations):
    """Measure each ``(counts, emulator)`` of ``allocations``."""
    return [measure(cell, settings, counts, emulator)
            for counts, emulator in allocations]


def table(cell, results):
    """The results as text: one line per VM and allocation.

    ``emu wait`` is the emulator threads' run delay per second of their
    CPU time: the pool's on its line, each VM's own threads' on the VM's.
    """
    row = '%-12s %-10s %5s %7s %5s %8s %11s %9s  %-6s %8s'
    lines = ['cell %s' % cell.key,
             row % ('allocation', 'vm', 'cores', 'util', 'PCU', 'SF',
                    'p99', 'target', 'QoS', 'emu wait')]
    for res in results:
        label = '%s/%d' % (','.join(str(c) for c in res.counts),
                           res.emulator)
        if res.emulator:
            lines.append(row % (label, 'emulator', res.emulator,
                                '%.0f%%' % (100 * res.emulator_util),
                                '', '', '', '', '',
                                '%.2f' % res.emulator_wait))
        else:
            lines.append('%-12s emulator threads on each VM\'s own cores'
                         % label)
        label = ''
        for vm in res.vms:
            lines.append(row % (
                label, '%s@%d' % (vm.profile, round(vm.load * 100)),
                vm.cores, '%.0f%%' % vm.util_pct, '%.0f%%' % (100 * vm.pcu),
                '%.0f' % vm.sf, '%.0f us' % vm.p99_us,
                '%.0f us' % vm.qos_p99_us,
                'met' if vm.qos_met else 'MISSED',
                '%.2f' % vm.emulator_wait))
    return '\n'.join(lines)
