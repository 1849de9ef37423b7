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


def profile(name, settings=None):
    """The profile called ``name``, with ``settings``' profile options."""
    found = PROFILES[name]
    if settings is None:
        return found
    return profiles.with_options(found, settings.profile_options)


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


def host_spec(settings, cores=None):
    """The one place a HostSpec is made from :class:`Settings`.

    ``settings.cores`` (or ``cores``) and ``settings.smt`` give the size,
    ``settings.host_options`` any other field; HostSpec checks the values
    (ValueError).
    """
    values = dict(settings.host_options)
    values.update(cores=cores or settings.cores, smt=settings.smt)
    return engine.HostSpec(**values)


def fit_cores(settings, *sizes):
    """The first of ``sizes`` (in cores) a host can be laid out with.

    A trial may need a host larger than the budget; the spec caps the
    logical CPUs and may want the cores to split over NUMA nodes, so a
    size is rounded up when that helps, and the next size is tried when
    not (the managers pass their usual size first, the least a trial
    needs last). Idle cores change nothing for pinned threads.
    """
    for size in sizes:
        for cores in range(size, size + settings.cores + 1):
            try:
                host_spec(settings, cores)
            except ValueError:
                continue
            return cores
    raise ValueError('no host of %s cores can be built with %s'
                     % (' or '.join(map(str, sizes)), settings.describe()))


def build(cell, settings, seed, cores=None, vcpus=None):
    """A fresh host with the cell's VMs, all threads floating over it.

    ``cores`` overrides the host size (a static allocation may need more
    cores than the budget just to be laid out; the manager checks the
    budget). ``vcpus`` overrides the flavor size of every VM, else
    ``settings.vcpus`` or the profile's. The offered load is the cell's
    fraction of the profile's ``max_rps`` whatever the flavor size.
    """
    host = engine.SimHost(host_spec(settings, cores), seed=seed)
    scene = Scene(host, [], [], [], [])
    for i, vm_load in enumerate(cell.vms):
        prof = profile(vm_load.profile, settings)
        n = vcpus or settings.vcpus_of(prof.name, prof.vcpus)
        rps = vm_load.load * prof.max_rps
        vm = host.add_vm('vm%d-%s' % (i + 1, vm_load.profile), vcpus=n,
                         profile=prof, rps=rps)
        scene.vms.append(vm)
        scene.profiles.append(prof)
        scene.rps.append(rps)
        scene.vcpus.append(n)
    return scene


def flavor_cores(cell, settings):
    """Per VM, the whole cores its vCPUs fill (its most CPUs)."""
    out = []
    for vm in cell.vms:
        prof = profile(vm.profile)
        out.append(math.ceil(settings.vcpus_of(prof.name, prof.vcpus) /
                             settings.smt))
    return out


def check(settings, cells):
    """Build, without running, the host of each of ``cells``.

    Raises ValueError (or TypeError) for settings the host or the engine
    refuse, before any simulation is started.
    """
    for cell in cells:
        build(cell, settings, 0)


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
    ticks: tuple = ()      # (real seconds, every VM ok) per interval

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


def judged(settings):
    """``settings`` measuring as long as a feedback manager is judged.

    DynIso and UFO are judged on ``judge`` control intervals of their
    run; every other manager's answer is judged on a window as long, so
    that a short run's luck near the edge of QoS counts for none.
    """
    return dataclasses.replace(settings,
                               measure=settings.judge * settings.tick)


def measure(scene, warmup, seconds, tick=None):
    """Run ``warmup`` seconds, then judge the next ``seconds``.

    With ``tick`` the window is also judged one control interval at a
    time, the last one maybe partial (``Window.ticks``, in real seconds);
    running in steps simulates exactly what one step would.
    """
    if warmup > 0:
        scene.host.advance(warmup)
    drain(scene)
    parts, ticks = [[] for _ in scene.vms], []
    left = seconds
    while left > 1e-9:
        span = min(tick or seconds, left)
        scene.host.advance(span)
        lat = [scene.host.take_latencies(vm) for vm in scene.vms]
        for collected, values in zip(parts, lat):
            collected.append(values)
        if tick:
            ticks.append((span / tick, judge(scene, lat, span).all_ok))
        left -= span
    window = judge(scene, [concat(p) for p in parts], seconds)
    return dataclasses.replace(window, ticks=tuple(ticks))


def held_stats(held, ticks):
    """``cpus_max``, ``cpus_mean`` and ``qos_violation_s`` of a window.

    ``held`` is the CPUs held in each interval of ``ticks`` ((real
    seconds, QoS met) pairs), or one count held throughout; the mean is
    weighted by interval length. Empty ``ticks``: all None.
    """
    if not ticks:
        return {'cpus_max': None, 'cpus_mean': None,
                'qos_violation_s': None}
    if not isinstance(held, (list, tuple)):
        held = [held] * len(ticks)
    seconds = sum(s for s, _ in ticks)
    return {'cpus_max': max(held),
            'cpus_mean': round(sum(h * s for h, (s, _) in zip(held, ticks)) /
                               seconds, 9),
            'qos_violation_s': sum(s for s, ok in ticks if not ok)}


def apply_isolated(scene, counts, emulator, coordinate=True, home=()):
    """Disjoint cores: ``counts[i]`` for VM i, then ``emulator`` shared.

    Cores are handed out in order, VM by VM, then the emulator pool.
    With ``coordinate`` each guest keeps as many vCPUs online as it has
    CPUs (#vCPUs == #pCPUs, UFO's coordination); without, all online.
    ``emulator`` = 0 puts each VM's emulator threads on its own cores;
    so does naming the VM's index in ``home``.
    """
    cores = scene.cores
    if sum(counts) + emulator > len(cores):
        raise ValueError('%d + %d cores do not fit on %d'
                         % (sum(counts), emulator, len(cores)))
    vcpu_cores, start = [], 0
    for count in counts:
        vcpu_cores.append(cores[start:start + count])
        start += count
    pool = cores[start:start + emulator]
    emu = [vcpu_cores[i] if (i in home or not emulator) else pool
           for i in range(len(counts))]
    online = [len(cpus_of(c)) if coordinate else None for c in vcpu_cores]
    apply_static(scene, vcpu_cores, emu, online)


def ticking_agent(agent, settings, host, vm, start):
    """A ``run_feedback`` control that ticks ``agent`` each interval.

    When the judged window begins it notes ``vm``'s counters in
    ``start['be']``, so that its work is counted over that window only.
    """
    def control(interval, _lat):
        if interval == settings.converge:
            start['be'] = host.counters(vm)
        return agent.tick()
    return control


def run_feedback(scene, settings, held_cpus, control):
    """Run a feedback manager, then judge it as it keeps running.

    Each control interval the host runs to the interval's end
    (``settings.tick`` simulated seconds, less what the manager's last
    action ran of it), then ``control(interval number, latencies per
    VM)`` acts.
    After ``converge`` intervals, ``judge`` more are judged together,
    and each on its own (``Window.ticks``). ``held_cpus()`` is read
    before the manager acts on an interval (what it held during it).
    Returns (:class:`Window`, CPUs held per judged interval).
    """
    judged, held, ticks = [[] for _ in scene.vms], [], []
    start = scene.host.now
    for interval in range(settings.converge + settings.judge):
        scene.host.advance_to(start + (interval + 1) * settings.tick)
        lat = [scene.host.take_latencies(vm) for vm in scene.vms]
        if interval >= settings.converge:
            for parts, values in zip(judged, lat):
                parts.append(values)
            held.append(held_cpus())
            ticks.append((1.0, judge(scene, lat, settings.tick).all_ok))
        control(interval + 1.0, lat)
    window = judge(scene, [concat(parts) for parts in judged],
                   settings.judge * settings.tick)
    return dataclasses.replace(window, ticks=tuple(ticks)), held
