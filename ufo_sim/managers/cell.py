"""What a manager is asked about, and what it answers.

A :class:`Cell` is one co-location scenario: a few VMs, each running an
application profile at a fraction of that profile's max load. A
:class:`CellResult` is one manager's answer. CPU counts are logical host
CPUs (the paper's "#pCPUs"); managers allocate whole cores (two CPUs each
with SMT on, one with it off).

A load fraction is always relative to the profile's ``max_rps``, which is
defined for the profile's own flavor (8 vCPUs on 8 dedicated CPUs): a VM
resized with ``Settings.vcpus`` is offered the same requests per second
at the same fraction, so a smaller VM may not be able to serve 100 %.
"""

import dataclasses
import zlib

from ufo_sim import engine

# What a grid manager's host seed is salted with (see Cell.host_seed).
HOST_SALT = 'host'


@dataclasses.dataclass(frozen=True)
class VmLoad:
    """One VM of a cell: a profile name and a fraction of its max load."""

    profile: str
    load: float


@dataclasses.dataclass(frozen=True)
class Cell:
    vms: tuple

    @property
    def key(self):
        return '+'.join('%s@%d' % (v.profile, round(v.load * 100))
                        for v in self.vms)

    @classmethod
    def from_key(cls, key):
        """The cell whose :attr:`key` is ``key`` (``nginx@50+mysql@20``).

        Checks the syntax only; a profile's name is checked where the
        profiles are known.
        """
        vms = []
        for item in key.split('+'):
            name, sep, load = item.partition('@')
            try:
                fraction = float(load) / 100.0
            except ValueError:
                fraction = -1.0
            if not name or not sep or fraction <= 0:
                raise ValueError('%r: expected PROFILE@LOAD%% joined by "+"'
                                 % item)
            vms.append(VmLoad(name, fraction))
        return cls(tuple(vms))

    def seed(self, base, salt=''):
        """A seed for this cell that does not depend on run order."""
        return zlib.crc32(('%d|%s|%s' % (base, self.key, salt)).encode())

    def host_seed(self, base):
        """The seed of this cell's host for every manager of a grid.

        One per cell and base seed, whoever manages the host, so that
        managers compared on a seed meet the same arrivals and service
        times.
        """
        return self.seed(base, HOST_SALT)


@dataclasses.dataclass(frozen=True)
class Settings:
    """How a cell is simulated.

    ``cores`` x ``smt`` is the host (the paper's grids: 8 x 2 = 16
    pCPUs); it is also the budget: needing more means QoS is infeasible.
    ``warmup`` and ``measure`` are the simulated seconds before and
    during the measurement of a static allocation. The feedback managers
    (DynIso, UFO) act once per control interval of ``tick`` simulated
    seconds (one real second: the engine's time scale); they get
    ``converge`` intervals to settle, then ``judge`` intervals are judged.

    ``seeds`` is how many seeds a grid runs each cell on: ``seed``,
    ``seed + 1`` and so on, each manager on the same ones (the cell's
    host seed, :meth:`Cell.host_seed`); one manager's run simulates one
    seed, ``seed``.

    ``vcpus`` resizes VMs: (profile name, vCPUs) pairs, ``'*'`` for every
    profile without a pair of its own. ``host_options`` sets other
    :class:`~ufo_sim.engine.HostSpec` fields, as (name, value) pairs;
    the host's size is ``cores`` and ``smt`` only, so that the budget
    always follows it. ``profile_options`` sets fields of the profiles
    the VMs run, as ('PROFILE.FIELD', value) pairs
    (:func:`ufo_sim.profiles.parse_option`); a load stays a fraction of
    the profile's ``max_rps``.
    """

    cores: int = 8
    smt: int = 2
    warmup: float = 5.0
    measure: float = 60.0
    tick: float = engine.TIME_SCALE
    converge: int = 30
    judge: int = 10
    seed: int = 1
    seeds: int = 1
    ufo_config: tuple = ()      # (name, value) ControllerConfig overrides
    vcpus: tuple = ()           # (profile or '*', vCPUs)
    host_options: tuple = ()    # (name, value) HostSpec fields
    # ('PROFILE.FIELD', value) profile fields (profiles.parse_option)
    profile_options: tuple = ()
    # UFO in QoS-target mode: each guest has its profile's QoS target and
    # publishes its p99 every second (ufo_sim.managers.ufo).
    qos_target: bool = False

    def __post_init__(self):
        if self.seeds < 1:
            raise ValueError('seeds must be at least 1, not %r'
                             % (self.seeds,))
        for name, _ in self.host_options:
            if name in ('cores', 'smt'):
                raise ValueError('host size is Settings.cores and .smt, '
                                 'not host option %r' % name)

    def each_seed(self):
        """These settings once per seed of a cell, one seed each."""
        return [dataclasses.replace(self, seed=self.seed + k, seeds=1)
                for k in range(self.seeds)]

    @property
    def budget(self):
        """Logical CPUs a manager may hold."""
        return self.cores * self.smt

    def vcpus_of(self, profile, default):
        """The flavor size of a VM running ``profile``."""
        sizes = dict(self.vcpus)
        return sizes.get(profile, sizes.get('*', default))

    def describe(self):
        """``name=value`` words naming every setting, for a header line."""
        words = ['cores=%d' % self.cores, 'smt=%s' % self.smt,
                 'budget_cpus=%d' % self.budget, 'seed=%d' % self.seed,
                 'seeds=%d' % self.seeds,
                 'warmup=%g' % self.warmup, 'measure=%g' % self.measure,
                 'tick=%g' % self.tick, 'converge=%d' % self.converge,
                 'judge=%d' % self.judge]
        if not self.vcpus:
            words.append('vcpus=profile')
        for group, pairs in (('vcpus', self.vcpus),
                             ('host_option', self.host_options),
                             ('profile_option', self.profile_options),
                             ('ufo_option', self.ufo_config)):
            words += ['%s.%s=%s' % (group, k, v) for k, v in pairs]
        if self.qos_target:
            words.append('qos_target=on')
        return ' '.join(words)


@dataclasses.dataclass(frozen=True)
class CellResult:
    """One manager's answer for one cell.

    ``cpus`` is what it holds (logical CPUs, vCPU pools plus emulator
    pool; None when even the whole budget does not meet QoS), ``qos_met``
    whether every VM met its target with that allocation, ``p99_us`` the
    measured p99 of each VM, ``detail`` manager-specific facts (the
    allocation found, the simulated seconds spent).

    Over the judged window (the ``judge`` intervals of a feedback
    manager, the ``measure`` seconds of the allocation a static manager
    reports): ``cpus_max`` and ``cpus_mean`` are the most and the mean
    logical CPUs held (equal for a static allocation), whatever the
    verdict; ``qos_violation_s`` the real seconds (control intervals) in
    which some VM missed its p99 target or did not serve its load. None
    when nothing was judged.
    """

    manager: str
    cell: str
    cpus: object
    qos_met: bool
    p99_us: tuple
    detail: dict = dataclasses.field(default_factory=dict)
    cpus_max: object = None
    cpus_mean: object = None
    qos_violation_s: object = None

    def to_json(self):
        return dataclasses.asdict(self)
