"""Values that go into and come out of one controller tick."""

import dataclasses
import enum

from ufo_agent import frozen


class VmClass(str, enum.Enum):
    """Service class of a VM: latency-critical or best-effort."""

    LC = 'lc'
    BE = 'be'
    AUTO = 'auto'


class VmMode(str, enum.Enum):
    """Where a VM's vCPU threads run."""

    ACTIVE = 'active'      # own vCPU pool, sized by the predictor
    IDLE = 'idle'          # parked in the idle pool while it sleeps
    BEST_EFFORT = 'be'     # shares the idle pool with other BE VMs


class Action(enum.StrEnum):
    """What one decision did, or one predictor step wants, to a VM's cores.

    ``stay``, ``grow`` and ``shrink`` are committed moves; ``probe`` is a
    trial move (upward served from idle cores only), ``revert`` ends a
    trial at a count it had left and ``accept`` where the VM already is.
    The others come from the lifecycle (``start``, ``park``, ``wake``,
    class changes), the allocator (``squeeze``, ``restore``,
    ``probe-denied``), the end of a grow's drain cores (``drained``), the
    emulator pool and the idle pool; ``reset`` starts a VM whose update
    failed afresh.
    """

    STAY = 'stay'
    GROW = 'grow'
    SHRINK = 'shrink'
    PROBE = 'probe'
    REVERT = 'revert'
    ACCEPT = 'accept'
    START = 'start'
    WAKE = 'wake'
    PARK = 'park'
    BEST_EFFORT = 'best-effort'
    LATENCY_CRITICAL = 'latency-critical'
    SQUEEZE = 'squeeze'
    RESTORE = 'restore'
    PROBE_DENIED = 'probe-denied'
    DRAINED = 'drained'
    EMULATOR_GROW = 'emulator-grow'
    EMULATOR_SHRINK = 'emulator-shrink'
    IDLE_GROW = 'idle-grow'
    IDLE_SHRINK = 'idle-shrink'
    RESET = 'reset'


@dataclasses.dataclass(frozen=True)
class VmSpec:
    """What the controller needs to know about a guest.

    ``vcpus`` is the flavor's vCPU count: no plan ever gives the VM more
    physical cores than it needs to run all of them at once.
    """

    uuid: str
    vcpus: int
    vm_class: VmClass = VmClass.AUTO
    # The operator's tail-latency target (flavor extra specs), in
    # microseconds at ``latency_percentile``; None: black-box mode.
    latency_target_us: float = None
    latency_percentile: float = 99.0

    def __post_init__(self):
        if self.vcpus < 1:
            raise ValueError('VM %s has %r vCPUs' % (self.uuid, self.vcpus))
        if self.latency_target_us is not None and not (
                self.latency_target_us > 0):
            raise ValueError('VM %s has latency target %r us'
                             % (self.uuid, self.latency_target_us))
        object.__setattr__(self, 'vm_class', VmClass(self.vm_class))


@frozen.value
class VmSample:
    """One second of a guest, as validated by the agent.

    ``util`` is CPU utilization in percent summed over the online vCPUs
    (0 to 100 x online vCPUs); ``sf`` is the guest scheduling frequency:
    switches into a thread (not the idle task) per second, or every
    context switch from a guest module that predates that count
    (``sf_counts_idle``: another scale, so what was learned on one is not
    read with the other).
    ``steal`` is set only for a host-only sample (no guest module, or one
    the agent does not trust): the share of its vCPU threads' runnable
    time spent waiting for a host CPU, from 0 to 1. The controller then
    judges the VM by ``steal``, not ``sf``.
    ``emulator`` is the host CPU its emulator, I/O and vhost threads ran,
    in percent of one CPU: its offloaded I/O, charged to it when the
    emulator pool grows on a full host.
    """

    util: float
    sf: float
    steal: float = None
    emulator: float = 0.0
    emulator_wait: float = 0.0      # their run delay, % of one CPU
    # Its vCPU threads' CPU and run delay, % of one CPU, in either mode:
    # the host's (None: not measured).
    vcpu_run: float = None
    vcpu_wait: float = 0.0
    emulator_threads: int = 0       # how many threads they are (0: unknown)
    # Its NICs' traffic per second, seen from the guest (None: unknown).
    packets_in: float = None
    packets_out: float = None
    bytes_in: float = None
    bytes_out: float = None
    # SF counts switches into the idle task too (an older guest module).
    sf_counts_idle: bool = False
    # The guest's own tail latency at its spec's percentile, microseconds,
    # as last published and still fresh (None: none, or too old).
    latency_us: float = None

    @property
    def host_only(self):
        return self.steal is not None


@dataclasses.dataclass(frozen=True)
class Decision:
    """One change the controller made, with its reason, for the log.

    ``reason`` is a :class:`~ufo_agent.controller.reason.Reason`: the
    rule that decided and its values. The log line renders its text,
    then its rule (after the text, so that readers of the older line
    still match it).
    """

    time: float
    vm: str
    action: Action
    old: int
    new: int
    reason: object

    def __str__(self):
        return 't=%.1f vm=%s action=%s cores=%d->%d reason="%s" ' \
            'rule=%s' % (self.time, self.vm, self.action, self.old,
                         self.new, self.reason, self.reason.rule)


@frozen.value
class VmPlan:
    """The allocation of one VM after a tick.

    A best-effort VM under ``be_policy = soak`` holds no cores and has
    ``sched_idle`` set: its vCPU threads may run on every managed CPU but
    the emulator pool's, at idle scheduling priority, so they take only
    what the pools leave idle.
    """

    uuid: str
    mode: VmMode
    cores: frozenset          # core ids of its vCPU pool (empty if shared)
    cpus: frozenset           # host CPUs its vCPU threads may run on
    online_vcpus: int         # target for the guest
    wanted_cores: int         # what the predictor asked for
    probing: bool             # a trial allocation is being evaluated
    note: object = None       # Reason: why it wants what it wants
    max_cores: int = 0        # its flavor in cores: what it holds without UFO
    model_r2: float = None    # fit of its SF model at its current cores
    fitted_models: int = 0    # core counts with a fitted SF model
    sched_idle: bool = False  # BE soak: idle priority beside the pools


@dataclasses.dataclass(frozen=True)
class HostPlan:
    """Everything the agent enforces after a tick.

    ``vms`` maps uuid to :class:`VmPlan`. ``emulator_cpus`` is where every
    emulator, I/O and vhost thread of the managed guests runs: the emulator
    pool's CPUs, or ``shared_cpus`` while that pool is empty.
    ``shared_cpus`` is where VMs without cores run: the idle pool's CPUs,
    or every managed CPU while the idle pool is empty. ``overloaded``
    is set when the idle pool could not supply what the vCPU or emulator
    pools needed; ``shortfall_cores`` says how many cores were missing.
    """

    time: float
    vms: dict
    emulator_cores: frozenset
    emulator_cpus: frozenset
    idle_cores: frozenset
    idle_cpus: frozenset
    managed_cores: int
    emulator_util: float
    overloaded: bool
    shortfall_cores: int
    decisions: tuple
    shared_cpus: frozenset = frozenset()
