"""Glue between a :class:`~ufo_sim.managers.cell.Cell` and a SimHost.

Builds the host with the cell's VMs at their offered load, lays out core
sets, applies static allocations and measures tail latency. Every
manager uses these, so they all see the same host and the same
measurement.
"""

import dataclasses
import math

import numpy as np

from ufo_sim import engine
from ufo_sim import profiles

PROFILES = {
    'memcached': profiles.MEMCACHED,
    'nginx': profiles.NGINX,
    'mysql': profiles.MYSQL,
}


def profile(name):
    return PROFILES[name]


@dataclasses.dataclass
class Scene:
    """A host with the cell's VMs on it."""

    host: object
    vms: list              # vm ids, in cell order
    profiles: list         # AppProfile per VM
    rps: list              # offered load per VM (requests per second)
    vcpus: list

    @property
    def cores(self):
        """The host's SMT cores, as tuples of logical CPUs."""
        return [tuple(group) for group in self.host.siblings]


def build(cell, settings, seed, cores=None, vcpus=None):
    """A fresh host with the cell's VMs, all threads floating over it.

    ``cores`` overrides the host size (a static allocation may need more
    cores than the budget just to be laid out; the manager checks the
    budget). ``vcpus`` overrides the flavor size of every VM.
    """
    spec = engine.HostSpec(cores=cores or settings.cores, smt=settings.smt,
                           **dict(settings.host_options))
    host = engine.SimHost(spec, seed=seed)
    scene = Scene(host, [], [], [], [])
    for i, vm_load in enumerate(cell.vms):
        prof = profile(vm_load.profile)
        n = vcpus or prof.vcpus
        rps = vm_load.load * prof.max_rps
        vm = host.add_vm('vm%d-%s' % (i + 1, vm_load.profile), vcpus=n,
                         profile=prof, rps=rps)
        scene.vms.append(vm)
        scene.profiles.append(prof)
        scene.rps.append(rps)
        scene.vcpus.append(n)
    return scene


def cpus_of(cores):
    return sorted(c for core in cores for c in core)


def apply_static(scene, vcpu_cores, emulator_cores, online):
    """Pin each VM: vCPUs on its core list, emulator threads on theirs.

    ``vcpu_cores`` and ``emulator_cores`` hold one list of core tuples
    per VM; ``online`` one online vCPU count per VM (None: all).
    """
    for i, vm in enumerate(scene.vms):
        scene.host.pin_vcpus(vm, cpus_of(vcpu_cores[i]))
        scene.host.pin_emulator(vm, cpus_of(emulator_cores[i]))
        n = online[i] if online[i] is not None else scene.vcpus[i]
        scene.host.set_online(vm, max(1, min(scene.vcpus[i], n)))


@dataclasses.dataclass(frozen=True)
class Window:
    """Latency of each VM over a measurement window."""

    p99_us: tuple
    served: tuple          # completed / offered requests, per VM
    ok: tuple              # per VM: p99 under QoS and load served

    @property
    def all_ok(self):
        return all(self.ok)


def p99(latencies):
    if len(latencies) == 0:
        return math.inf
    return float(np.percentile(latencies, 99))


def concat(parts):
    """One array from per-second latency arrays."""
    return np.concatenate(parts) if parts else np.zeros(0)


def drain(scene):
    """Forget the latencies collected so far (warm-up)."""
    for vm in scene.vms:
        scene.host.take_latencies(vm)


def judge(scene, latencies, seconds):
    """A :class:`Window` from latencies collected over ``seconds``.

    A VM that completes clearly fewer requests than were offered is
    saturated: its queue grows and the p99 of what did finish hides it.
    """
    p99s, served, ok = [], [], []
    for i, lat in enumerate(latencies):
        offered = scene.rps[i] * seconds
        done = len(lat)
        # Poisson arrivals: allow 4 standard deviations plus 3 %.
        enough = done >= offered - 4 * math.sqrt(offered) - 0.03 * offered
        value = p99(lat)
        p99s.append(value)
        served.append(done / offered if offered else 1.0)
        ok.append(bool(enough and value <= scene.profiles[i].qos_p99_us))
    return Window(tuple(p99s), tuple(served), tuple(ok))


def measure(scene, warmup, seconds):
    """Run ``warmup`` seconds, then judge the next ``seconds``."""
    if warmup > 0:
        scene.host.advance(warmup)
    drain(scene)
    scene.host.advance(seconds)
    lat = [scene.host.take_latencies(vm) for vm in scene.vms]
    return judge(scene, lat, seconds)


def apply_isolated(scene, counts, emulator, coordinate=True):
    """Disjoint cores: ``counts[i]`` for VM i, then ``emulator`` shared.

    Cores are handed out in order, VM by VM, then the emulator pool.
    With ``coordinate`` each guest keeps as many vCPUs online as it has
    CPUs (#vCPUs == #pCPUs, UFO's coordination); without, all online.
    ``emulator`` = 0 puts each VM's emulator threads on its own cores.
    """
    cores = scene.cores
    if sum(counts) + emulator > len(cores):
        raise ValueError('%d + %d cores do not fit on %d'
                         % (sum(counts), emulator, len(cores)))
    vcpu_cores, start = [], 0
    for count in counts:
        vcpu_cores.append(cores[start:start + count])
        start += count
    if emulator:
        emu = [cores[start:start + emulator]] * len(counts)
    else:
        emu = vcpu_cores
    online = [len(cpus_of(c)) if coordinate else None for c in vcpu_cores]
    apply_static(scene, vcpu_cores, emu, online)


def run_feedback(scene, settings, held_cpus, control):
    """Run a feedback manager, then judge it as it keeps running.

    Each control interval the host runs ``settings.tick`` simulated
    seconds, then ``control(interval number, latencies per VM)`` acts.
    After ``converge`` intervals, ``judge`` more are judged together.
    ``held_cpus()`` is read at the start of each judged interval (what
    the manager held during it). Returns (:class:`Window`, most CPUs).
    """
    judged, held = [[] for _ in scene.vms], 0
    for interval in range(settings.converge + settings.judge):
        scene.host.advance(settings.tick)
        lat = [scene.host.take_latencies(vm) for vm in scene.vms]
        if interval >= settings.converge:
            for parts, values in zip(judged, lat):
                parts.append(values)
            held = max(held, held_cpus())
        control(interval + 1.0, lat)
    window = judge(scene, [concat(parts) for parts in judged],
                   settings.judge * settings.tick)
    return window, held
