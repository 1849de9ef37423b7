"""SimHost: the Python facade over the C event loop."""

import dataclasses
import zlib

import numpy as np

from ufo_sim.engine.spec import HostSpec


@dataclasses.dataclass(frozen=True)
class VmCounters:
    """Cumulative counters of one VM, like /proc; times in nanoseconds."""

    vcpu_cpu_ns: int        # CPU time of the vCPU threads
    vcpu_wait_ns: int       # host run delay of the vCPU threads
    vcpu_slices: int        # times a vCPU thread was switched in
    host_ctxsw: int         # host switches involving the VM's threads
    emulator_cpu_ns: int    # CPU time of the emulator threads
    guest_busy_ns: int      # non-idle time summed over online vCPUs
    guest_ctxsw: int        # guest context switches, to or from idle
    requests_done: int      # LC: requests; BE: work chunks
    online_vcpus: int
    requests_dropped: int   # LC arrivals refused: too many in flight
    emulator_wait_ns: int   # host run delay of the emulator threads
    requests_in_flight: int
    requests_arrived: int   # LC arrivals, served or dropped
    # Guest switches into a thread (not into idle): the guest module's SF,
    # /proc/schedstat's "timeslices" (pcount).
    guest_sched_in: int
    # KVM halt polling: vCPU thread CPU spent polling (the host charges
    # it to the thread as system time), blocks (HLT exits) and blocks
    # whose wake-up came while polling (halt_successful_poll).
    vcpu_poll_ns: int
    halts: int
    polls_ok: int
    emulator_wakes: int     # emulator threads woken from sleep
    irqs: int               # RX interrupts the emulator injected
    vcpu_guest_ns: int      # vCPU threads in guest mode (guest time)


def _mask(cpus):
    mask = 0
    for cpu in cpus:
        mask |= 1 << int(cpu)
    return mask


class SimHost:
    """One simulated host; see the module docstring of ufo_sim.engine."""

    def __init__(self, spec=None, seed=0):
        self.spec = spec or HostSpec()
        self.seed = int(seed)
        sib = [-1] * self.spec.cpus
        for group in self.spec.siblings():
            if len(group) == 2:
                sib[group[0]], sib[group[1]] = group[1], group[0]
        # Imported here: ``python -m ufo_sim.engine.build`` must not find
        # itself imported by the package.
        from ufo_sim.engine import build
        self._core = build.core().Host(sib, self.spec.core_params())
        for cpu in sorted(self.spec.little_cpus()):
            self._core.set_speed(cpu, self.spec.little_speed)
        self.little = self.spec.little_cpus()
        self._ids = {}
        self._profiles = {}
        self.siblings = self.spec.siblings()
        self.numa_of_cpu = self.spec.numa_of_cpu()

    @property
    def now(self):
        """Simulated seconds since start."""
        return self._core.now / 1e9

    @property
    def cpus(self):
        """All logical CPU ids."""
        return tuple(range(self.spec.cpus))

    def _vm(self, vm):
        try:
            return self._ids[vm]
        except KeyError:
            raise KeyError('no VM %r' % (vm,)) from None

    def add_vm(self, name, vcpus, profile, rps=0.0):
        """Boot VM ``name`` running ``profile``; returns its id."""
        if name in self._ids:
            raise ValueError('VM %r exists' % (name,))
        p = profile
        # Streams differ per VM name, not per creation order.
        seed = zlib.crc32(name.encode()) ^ (self.seed * 0x9E3779B1)
        ns = 1e9
        idx = self._core.add_vm(
            int(vcpus), p.workers(vcpus), p.emulator_threads,
            0 if p.is_lc else 1,
            p.dist, p.service * ns, p.dist_a, p.dist_b, p.rounds,
            p.emu_in * ns, p.emu_out * ns, p.be_chunk * ns, p.be_io * ns,
            p.irq * ns, p.lock_share if self.spec.guest_locks else 0.0,
            p.cache_footprint, p.smt_emu_sensitivity,
            seed & 0xFFFFFFFFFFFFFFFF)
        self._ids[name] = idx
        self._profiles[name] = p
        if rps:
            self.set_rps(name, rps)
        return name

    def profile(self, vm):
        """The profile VM ``vm`` runs."""
        return self._profiles[vm]

    def set_rps(self, vm, rps):
        """Offered load (Poisson) of an LC VM from now on."""
        if not self._profiles[vm].is_lc:
            return
        self._core.set_rps(self._vm(vm), float(rps))

    def stop_vm(self, vm):
        """Shut ``vm`` down: no new work from now on.

        Requests in flight (an LC VM's) and chunks under way (a BE VM's)
        finish, then its threads sleep for good and use no CPU. Its
        counters stay readable; its load can no longer be set.
        """
        self._core.stop_vm(self._vm(vm))

    def pin_vcpus(self, vm, cpus):
        """Affinity of every vCPU thread of ``vm`` (logical CPU ids)."""
        self._core.pin(self._vm(vm), 0, _mask(cpus))

    def set_vcpus_idle(self, vm, idle):
        """Put the vCPU threads of ``vm`` in the SCHED_IDLE class or back.

        An idle-class thread runs on a CPU only while no normal thread
        is runnable there, and a normal thread that wakes on (or is
        balanced to) that CPU preempts it at once, as cgroup v2
        ``cpu.idle`` does.
        """
        self._core.set_idle(self._vm(vm), bool(idle))

    def pin_emulator(self, vm, cpus):
        """Affinity of every emulator thread of ``vm``."""
        self._core.pin(self._vm(vm), 1, _mask(cpus))

    def set_online(self, vm, n, hotplug=False):
        """Keep vCPUs 0..n-1 online in the guest; returns the count now.

        At once by default (a layout set up before the run); with
        ``hotplug`` the guest takes them on- or offline one at a time,
        each costing ``HostSpec.hotplug_cost`` of guest work on the vCPU
        in transit, and the count returned is the one online so far.
        """
        return self._core.set_online(self._vm(vm), int(n), bool(hotplug))

    def online(self, vm):
        """vCPUs online in the guest."""
        return self.counters(vm).online_vcpus

    def advance(self, seconds):
        """Run simulated time forward.

        Raises RuntimeError (naming the stuck CPU's state) if the model
        stops advancing time: millions of events at one instant are a
        livelock in the engine, not a busy host.
        """
        self._core.advance(int(round(seconds * 1e9)))

    def advance_to(self, when):
        """Run simulated time forward to ``when`` (s), if not there yet.

        A loop that ticks an agent runs the host to each interval's end:
        the agent's waits for its guests (``SimDriver.sleep``) may have
        run part of the interval already.
        """
        if when > self.now:
            self.advance(when - self.now)

    def counters(self, vm):
        """Cumulative :class:`VmCounters` of ``vm``."""
        return VmCounters(*self._core.counters(self._vm(vm)))

    def take_latencies(self, vm):
        """Latencies (us) of requests completed since the previous call."""
        raw = self._core.take_latencies(self._vm(vm))
        return np.frombuffer(raw, dtype=np.float64).copy()

    def check(self):
        """Raise AssertionError if the model's run queues disagree."""
        self._core.check()

    def cpu_time(self):
        """Per logical CPU: dict(busy_ns, overhead_ns, idle_ns)."""
        return [dict(busy_ns=b, overhead_ns=o, idle_ns=i)
                for b, o, i in self._core.cpu_time()]
