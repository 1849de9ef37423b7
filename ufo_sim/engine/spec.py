"""The host's shape and its scheduler and switch-cost parameters.

All times are in simulated time. The defaults are real-world Linux 5.10
and KVM figures multiplied by :data:`TIME_SCALE`, the dilation that keeps
the simulation cheap: every duration (request service, emulator work,
switch costs, scheduler slices) is stretched by the same factor, so the
ratios that make double scheduling hurt are those of a real host, while
request rates are divided by it (see ``doc/source/sim-calibration.rst``).
"""

import dataclasses
import json

# One real microsecond lasts TIME_SCALE simulated microseconds.
TIME_SCALE = 50.0


def scaled(real_seconds):
    """Simulated seconds standing for a real-world duration."""
    return real_seconds * TIME_SCALE


def parse_option(text, fields):
    """``NAME=VALUE`` of a HostSpec field among ``fields``: (name, value).

    VALUE is JSON and must fit the field: a flag takes true or false, an
    integer field an integer, a number field any number (as a float).
    The range is HostSpec's to check. ValueError says what is wrong.
    """
    name, sep, raw = text.partition('=')
    if not sep or name not in fields:
        raise ValueError('%r: expected NAME=VALUE with NAME one of %s'
                         % (text, ', '.join(sorted(fields))))
    try:
        value = json.loads(raw)
    except ValueError:
        raise ValueError('%r: bad value (not JSON)' % text) from None
    default = getattr(HostSpec, name)
    if isinstance(default, bool):
        if not isinstance(value, bool):
            raise ValueError('%r: %s takes true or false' % (text, name))
        return name, value
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if isinstance(default, int):
        if not number or not isinstance(value, int):
            raise ValueError('%r: %s takes an integer' % (text, name))
        return name, value
    if not number:
        raise ValueError('%r: %s takes a number' % (text, name))
    return name, float(value)


@dataclasses.dataclass(frozen=True)
class HostSpec:
    """One host: ``cores`` physical cores of ``smt`` logical CPUs each."""

    cores: int = 8
    smt: int = 2
    numa_nodes: int = 1
    # Work takes this much longer while the SMT sibling is busy with a
    # thread of the same VM and kind; with another VM's thread; with an
    # emulator thread beside a vCPU thread (either way round).
    smt_slowdown: float = 1.5
    smt_cross_slowdown: float = 1.5
    smt_emu_slowdown: float = 1.5
    # ... while the sibling is a vCPU halt-polling: KVM's poll loop is
    # mostly PAUSE, which hands the core's resources to the sibling.
    smt_poll_slowdown: float = 1.0
    # Host context switch, and the extra of a vCPU thread: VM entry with
    # its VMCS load on the way in, the VM exit on the way out.
    ctxsw: float = scaled(2e-6)
    vm_entry: float = scaled(3e-6)
    vm_exit: float = scaled(2e-6)
    # CFS on 8+ CPUs (sysctl defaults times 1 + log2(8)).
    sched_latency: float = scaled(24e-3)
    sched_min_granularity: float = scaled(3e-3)
    sched_wakeup_granularity: float = scaled(4e-3)
    # The guest kernel's CFS and its context switch.
    guest_sched_latency: float = scaled(24e-3)
    guest_sched_min_granularity: float = scaled(3e-3)
    guest_sched_wakeup_granularity: float = scaled(4e-3)
    guest_ctxsw: float = scaled(1.5e-6)
    # KVM halt polling (halt_poll_ns): a halting vCPU keeps its CPU up to
    # this long waiting for a wake-up, unless another thread wants the
    # CPU; the window adapts per vCPU as in Linux.
    halt_poll: float = scaled(200e-6)
    # The profiles' guest lock (lock-holder preemption); False ignores
    # every profile's lock_share. A waiter spins lock_spin, then sleeps
    # until the lock is handed to it (adaptive mutexes, InnoDB's spin
    # rounds, pv spinlocks all spin for tens of microseconds).
    guest_locks: bool = True
    lock_spin: float = scaled(30e-6)
    # Requests in flight per VM beyond which arrivals are dropped.
    max_outstanding: int = 20000
    # Cache and TLB warmth: a thread switched in where others ran since
    # its last run on that core owes up to cache_refill of stall time
    # refilling its working set, paid as it works (its work runs
    # cold_slowdown times slower until paid, so a short burst pays for
    # what it touches only); warmth decays with the others' busy time
    # there (cache_decay); threads of the same VM and kind evict
    # cache_same_group of what a foreign thread does.
    cache_refill: float = scaled(145e-6)
    cache_decay: float = scaled(200e-6)
    cache_same_group: float = 0.055
    cold_slowdown: float = 3.8
    # The emulator threads' working set (rings, packet buffers), as a
    # share of a full refill.
    emu_footprint: float = 0.25
    # Share of a vCPU thread's warmth that its guest's other vCPUs evict
    # as foreign threads do: KVM gives each vCPU its own VPID, and TLB
    # and paging-structure cache entries are tagged by it. 0 until its
    # size is measured (research/2026-12-02-stacked-vcpus).
    vcpu_tlb_share: float = 0.0
    # An emulator (vhost or QEMU I/O) thread woken from sleep: eventfd
    # signal, wake-up path and poll loop, charged to that thread.
    emu_wakeup: float = 0.0
    # Per packet in: the emulator signals the guest interrupt (irqfd,
    # KVM's injection, the IPI to a vCPU running elsewhere).
    irq_inject: float = scaled(1e-6)
    # vhost-net: one worker thread per virtio-net queue pair, each
    # connection's packets on one queue (False: the emulator threads
    # serve one shared queue, any thread any packet).
    emu_queues: bool = True
    # The guest's NAPI and the virtio event index: no interrupt is
    # injected while the queue's handler is pending or running (False:
    # one per packet).
    irq_coalesce: bool = True
    # Guest work of taking one vCPU offline or bringing it online (the
    # paper's Appendix C.2: 20-30 ms per vCPU for LC guests), paid by
    # SimHost.set_online(..., hotplug=True), as the agent's targets are.
    hotplug_cost: float = scaled(25e-3)
    # Linux load balancing: sysctl_sched_migration_cost (a thread that
    # ran this recently is cache-hot and is not pulled; a CPU whose idle
    # periods average less does not pull when it goes idle) and the
    # tick at which idle CPUs pull what waits (HZ=250). 0 makes an idle
    # CPU take any queued thread at once.
    migration_cost: float = scaled(0.5e-3)
    balance_tick: float = scaled(4e-3)
    # The guest kernel balances its threads over its vCPUs by the same
    # rules (its sysctl_sched_migration_cost, 0.5 ms, and HZ=250 tick);
    # 0 makes an idle vCPU take any queued guest thread at once.
    guest_migration_cost: float = scaled(0.5e-3)
    guest_balance_tick: float = scaled(4e-3)
    # A hybrid host: the last little_cores cores are little, running work
    # at little_speed times a big core's pace (an E-core's IPC and clock
    # against a P-core's; about 0.6 on Alder Lake for server code).
    little_cores: int = 0
    little_speed: float = 0.6

    def __post_init__(self):
        if self.smt not in (1, 2):
            raise ValueError('smt must be 1 or 2')
        if not 1 <= self.cores * self.smt <= 64:
            raise ValueError('1 to 64 logical CPUs')
        if self.cores % self.numa_nodes:
            raise ValueError('cores must split evenly over NUMA nodes')
        for name in ('smt_slowdown', 'smt_cross_slowdown',
                     'smt_emu_slowdown', 'smt_poll_slowdown'):
            if getattr(self, name) < 1.0:
                raise ValueError('%s must be >= 1' % name)
        for name in ('cache_refill', 'emu_wakeup', 'irq_inject',
                     'hotplug_cost', 'cache_same_group', 'emu_footprint',
                     'lock_spin'):
            if getattr(self, name) < 0:
                raise ValueError('%s must be >= 0' % name)
        if not 0 <= self.vcpu_tlb_share <= 1:
            raise ValueError('vcpu_tlb_share must be in [0, 1]')
        if self.cold_slowdown <= 1.0:
            raise ValueError('cold_slowdown must be > 1')
        if self.cache_decay <= 0:
            raise ValueError('cache_decay must be > 0')
        if self.migration_cost < 0:
            raise ValueError('migration_cost must be >= 0')
        if self.balance_tick <= 0:
            raise ValueError('balance_tick must be > 0')
        if self.guest_migration_cost < 0:
            raise ValueError('guest_migration_cost must be >= 0')
        if self.guest_balance_tick <= 0:
            raise ValueError('guest_balance_tick must be > 0')
        if not 0 <= self.little_cores < self.cores:
            raise ValueError('little_cores must be from 0 to cores - 1')
        if not 0 < self.little_speed <= 1.0:
            raise ValueError('little_speed must be in (0, 1]')

    @property
    def cpus(self):
        """Number of logical CPUs."""
        return self.cores * self.smt

    def siblings(self):
        """SMT groups: logical CPUs 2k and 2k+1 share core k."""
        return tuple(tuple(range(c * self.smt, (c + 1) * self.smt))
                     for c in range(self.cores))

    def little_cpus(self):
        """The logical CPUs of the little cores (the last ones)."""
        return frozenset(cpu for group in
                         self.siblings()[self.cores - self.little_cores:]
                         for cpu in group) if self.little_cores \
            else frozenset()

    def numa_of_cpu(self):
        """NUMA node of each logical CPU (cores split evenly)."""
        per_node = self.cores // self.numa_nodes
        return {cpu: core // per_node
                for core, group in enumerate(self.siblings())
                for cpu in group}

    def core_params(self):
        """The parameter tuple the C core takes (nanoseconds)."""
        ns = 1e9
        return (self.smt_slowdown, self.smt_cross_slowdown,
                self.smt_emu_slowdown, self.smt_poll_slowdown,
                self.ctxsw * ns, self.vm_entry * ns,
                self.vm_exit * ns, self.sched_latency * ns,
                self.sched_min_granularity * ns,
                self.sched_wakeup_granularity * ns,
                self.guest_sched_latency * ns,
                self.guest_sched_min_granularity * ns,
                self.guest_sched_wakeup_granularity * ns,
                self.guest_ctxsw * ns, self.halt_poll * ns,
                self.max_outstanding, self.cache_refill * ns,
                self.cache_decay * ns, self.cache_same_group,
                self.cold_slowdown, self.emu_footprint,
                self.emu_wakeup * ns, self.irq_inject * ns,
                self.lock_spin * ns, self.migration_cost * ns,
                self.balance_tick * ns, self.guest_migration_cost * ns,
                self.guest_balance_tick * ns, int(self.emu_queues),
                int(self.irq_coalesce), self.hotplug_cost * ns,
                self.vcpu_tlb_share)
