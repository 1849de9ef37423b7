"""The paper's §3 set-ups, run on the model; each returns plain numbers.

Nothing here is tuned per experiment: every scenario uses the default
:class:`~ufo_sim.engine.HostSpec` and the profiles as they are. Each
takes ``host_options``, (name, value) pairs overriding HostSpec fields
other than the host's shape (``check --host-option``), applied by
:func:`host_spec` to every host built here.
"""

import dataclasses

import numpy as np

from ufo_sim.engine import HostSpec
from ufo_sim.engine import SimHost
from ufo_sim import profiles

WARMUP = 1.0
# Each scenario fixes the host's shape itself.
SHAPE_FIELDS = ('cores', 'smt')


def host_spec(cores, smt=2, host_options=()):
    """The HostSpec of a scenario: its shape plus ``host_options``."""
    options = dict(host_options)
    shape = set(SHAPE_FIELDS) & set(options)
    if shape:
        raise ValueError('the scenario sets %s' % ', '.join(sorted(shape)))
    return HostSpec(cores=cores, smt=smt, **options)


@dataclasses.dataclass(frozen=True)
class Window:
    """What one VM did during a measured window, per second."""

    p50_us: float
    p99_us: float
    guest_sf: float          # guest switches into a thread per second
    guest_util: float        # busy guest CPUs (1.0 = one vCPU)
    vcpu_util: float         # vCPU threads' host CPU (polling included)
    vcpu_guest_util: float   # ... in guest mode (Linux's guest time)
    vcpu_poll_util: float    # ... halt polling (host kernel time)
    emulator_util: float
    host_ctxsw: float        # all of the VM's threads
    vcpu_switches: float     # vCPU threads switched in
    vcpu_wait_ms: float      # host run delay of vCPU threads
    emulator_wait_ms: float
    done: float              # requests (BE: work chunks) completed

    @property
    def runtime_per_schedule_us(self):
        """Guest busy time per switch into a thread (Fig. 4, right)."""
        return self.guest_util * 1e6 / self.guest_sf if self.guest_sf else 0


def measure(host, vms, seconds, warmup=WARMUP):
    """Run ``warmup`` then ``seconds``; a :class:`Window` per VM."""
    host.advance(warmup)
    before = {vm: host.counters(vm) for vm in vms}
    for vm in vms:
        host.take_latencies(vm)
    host.advance(seconds)
    out = {}
    for vm in vms:
        a, b = before[vm], host.counters(vm)
        lat = host.take_latencies(vm)

        def rate(field, a=a, b=b):
            return (getattr(b, field) - getattr(a, field)) / seconds

        out[vm] = Window(
            p50_us=float(np.percentile(lat, 50)) if len(lat) else np.inf,
            p99_us=float(np.percentile(lat, 99)) if len(lat) else np.inf,
            guest_sf=rate('guest_sched_in'),
            guest_util=rate('guest_busy_ns') / 1e9,
            vcpu_util=rate('vcpu_cpu_ns') / 1e9,
            vcpu_guest_util=rate('vcpu_guest_ns') / 1e9,
            vcpu_poll_util=rate('vcpu_poll_ns') / 1e9,
            emulator_util=rate('emulator_cpu_ns') / 1e9,
            host_ctxsw=rate('host_ctxsw'),
            vcpu_switches=rate('vcpu_slices'),
            vcpu_wait_ms=rate('vcpu_wait_ns') / 1e6,
            emulator_wait_ms=rate('emulator_wait_ns') / 1e6,
            done=rate('requests_done'))
    return out


def dedicated(profile, pcpus, rps, seconds=4.0, seed=1, online=None,
              host_options=()):
    """One VM, vCPUs on ``pcpus`` CPUs, emulator on 8 CPUs of its own.

    ``online`` defaults to ``pcpus`` (host-aware isolation); the paper's
    max-load point is ``pcpus=8``.
    """
    host = SimHost(host_spec(8, 2, host_options), seed=seed)
    vm = host.add_vm('vm', profile.vcpus, profile, rps=rps)
    host.pin_vcpus(vm, range(pcpus))
    host.pin_emulator(vm, range(8, 16))
    host.set_online(vm, online or pcpus)
    return measure(host, [vm], seconds)[vm]


def max_load(profile, seconds=4.0, seed=1, lo=0.2, hi=2.0, steps=9,
             host_options=()):
    """Highest rps whose p99 meets QoS on 8 dedicated CPUs (paper §5.2).

    Bisection between ``lo`` and ``hi`` times the current ``max_rps``.
    """
    base = profile.max_rps

    def meets(share):
        w = dedicated(profile, 8, base * share, seconds, seed, online=8,
                      host_options=host_options)
        return w.p99_us <= profile.qos_p99_us
    return base * highest_met(meets, lo, hi, steps)


def highest_met(meets, lo, hi, steps):
    """The highest load in [lo, hi] that ``meets``, by ``steps`` halvings.

    ``lo`` is taken to meet it; loads above the highest that does are
    taken to fail (QoS is monotone in load).
    """
    for _ in range(steps):
        mid = (lo + hi) / 2
        if meets(mid):
            lo = mid
        else:
            hi = mid
    return lo


MODES = ('default', 'isolation', 'hostaware')


def four_vms(profile, rps, mode, seconds=4.0, seed=1, emulator_apart=True,
             host_options=()):
    """§3.1-3.2: four 8-vCPU VMs on 16 logical CPUs.

    default: all vCPUs share the 16 CPUs; isolation: 4 CPUs per VM;
    hostaware: isolation plus 4 vCPUs online. With ``emulator_apart`` the
    emulator threads run on 16 further CPUs, as §3.2 varies vCPU
    placement only; else they share their VM's vCPU CPUs.
    Returns the four VMs' windows.
    """
    host = SimHost(host_spec(16, 2, host_options), seed=seed)
    vms = [host.add_vm('vm%d' % i, profile.vcpus, profile, rps=rps)
           for i in range(4)]
    for i, vm in enumerate(vms):
        own = range(4 * i, 4 * i + 4)
        host.pin_vcpus(vm, range(16) if mode == 'default' else own)
        if emulator_apart:
            host.pin_emulator(vm, range(16, 32))
        else:
            host.pin_emulator(vm, range(16) if mode == 'default' else own)
        if mode == 'hostaware':
            host.set_online(vm, 4)
    return list(measure(host, vms, seconds).values())


def geomean(values):
    """Geometric mean (the paper's way to merge the four VMs' p99)."""
    return float(np.exp(np.mean(np.log(values))))


def emulator_placement(profile, rps, isolated, seconds=4.0, seed=1,
                       host_options=()):
    """§3.4 (Fig. 5): one VM on 8 CPUs, emulator shared or isolated.

    Shared: vCPUs and emulator threads float over the 8 CPUs, 8 vCPUs
    online. Isolated: 6 CPUs and 6 online vCPUs, 2 CPUs for emulator.
    """
    host = SimHost(host_spec(8, 2, host_options), seed=seed)
    vm = host.add_vm('vm', profile.vcpus, profile, rps=rps)
    if isolated:
        host.pin_vcpus(vm, range(6))
        host.pin_emulator(vm, range(6, 8))
        host.set_online(vm, 6)
    else:
        host.pin_vcpus(vm, range(8))
        host.pin_emulator(vm, range(8))
    return measure(host, [vm], seconds)[vm]


def be_modes(seconds=4.0, seed=1, threads=8, host_options=()):
    """§3.5: four BE VMs under each mode; work chunks per second."""
    out = {}
    for mode in MODES:
        host = SimHost(host_spec(16, 2, host_options), seed=seed)
        vms = [host.add_vm('vm%d' % i, 8, profiles.BE(threads))
               for i in range(4)]
        for i, vm in enumerate(vms):
            own = range(4 * i, 4 * i + 4)
            host.pin_vcpus(vm, range(16) if mode == 'default' else own)
            host.pin_emulator(vm, range(16, 32))
            if mode == 'hostaware':
                host.set_online(vm, 4)
        out[mode] = list(measure(host, vms, seconds).values())
    return out
