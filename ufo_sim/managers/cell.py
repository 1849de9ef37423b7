"""What a manager is asked about, and what it answers.

A :class:`Cell` is one co-location scenario: a few VMs, each running an
application profile at a fraction of that profile's max load. A
:class:`CellResult` is one manager's answer. CPU counts are logical host
CPUs (the paper's "#pCPUs"); managers allocate whole SMT cores.
"""

import dataclasses
import zlib

from ufo_sim import engine


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

    def seed(self, base, salt=''):
        """A seed for this cell that does not depend on run order."""
        return zlib.crc32(('%d|%s|%s' % (base, self.key, salt)).encode())


@dataclasses.dataclass(frozen=True)
class Settings:
    """How a cell is simulated.

    ``cores`` x ``smt`` is the host the paper uses for its grids (16
    pCPUs); it is also the budget: needing more means QoS is infeasible.
    ``warmup`` and ``measure`` are the simulated seconds before and
    during the measurement of a static allocation. The feedback managers
    (DynIso, UFO) act once per control interval of ``tick`` simulated
    seconds (one real second: the engine's time scale); they get
    ``converge`` intervals to settle, then ``judge`` intervals are judged.
    ``host_options`` are (name, value) overrides of the other
    :class:`~ufo_sim.engine.HostSpec` fields (calibration what-ifs).
    """

    cores: int = 8
    smt: int = 2
    warmup: float = 5.0
    measure: float = 60.0
    tick: float = engine.TIME_SCALE
    converge: int = 30
    judge: int = 10
    seed: int = 1
    ufo_config: tuple = ()      # (name, value) ControllerConfig overrides
    host_options: tuple = ()    # (name, value) HostSpec overrides


@dataclasses.dataclass(frozen=True)
class CellResult:
    """One manager's answer for one cell.

    ``cpus`` is what it holds (logical CPUs, vCPU pools plus emulator
    pool; None when even the whole budget does not meet QoS), ``qos_met``
    whether every VM met its target with that allocation, ``p99_us`` the
    measured p99 of each VM, ``detail`` manager-specific facts (the
    allocation found, the simulated seconds spent).
    """

    manager: str
    cell: str
    cpus: object
    qos_met: bool
    p99_us: tuple
    detail: dict = dataclasses.field(default_factory=dict)

    def to_json(self):
        return dataclasses.asdict(self)
