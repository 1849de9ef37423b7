"""The controller's settings as an immutable value, built from oslo.config.

The controller never reads global configuration, so tests and the
simulator can build one directly with the paper's defaults.
"""

import dataclasses

# Where best-effort guests run: the idle pool (the paper), or every
# managed CPU at idle scheduling priority.
BE_POLICIES = ('idle-pool', 'soak')


@dataclasses.dataclass(frozen=True)
class ControllerConfig:
    """Thresholds and timings, with the paper's values as defaults.

    The only place the defaults are written: the ``[controller]`` options
    (:mod:`ufo_agent.conf.controller`) take theirs from here.
    """

    tick_interval: float = 1.0
    settle_time: float = 3.0
    confirm_samples: int = 2
    sf_threshold: float = 0.30
    detect_flat_sf: bool = False
    flat_sf_threshold: float = 0.05
    pcu_low: float = 0.40
    pcu_high: float = 0.80
    emulator_util_high: float = 0.80
    emulator_util_low: float = 0.60
    emulator_saturation: float = 0.8
    emulator_util_overload: float = 0.95
    emulator_charge_excess: bool = True
    emulator_min_cores: int = 1
    idle_pool_min_cores: int = 1
    idle_pool_steal_max: float = 0.0
    samples_per_model: int = 8
    min_samples_to_fit: int = 3
    refit_error: float = 0.05
    util_resolution: float = 5.0
    sf_match_tolerance: float = 0.15
    sample_max_age: float = 600.0
    idle_util: float = 1.0
    idle_after: float = 10.0
    idle_after_max: float = 320.0
    be_sf_per_util: float = 10.0
    classify_min_util: float = 20.0
    classify_samples: int = 5
    host_only_steal_max: float = 0.05
    drain_hold_max: float = 5.0
    grow_to_traffic_demand: bool = True
    be_policy: str = 'idle-pool'
    latency_slack: float = 0.7

    def __post_init__(self):
        errors = []
        if not self.pcu_low < self.pcu_high:
            errors.append('pcu_low must be below pcu_high')
        if not self.emulator_util_low < self.emulator_util_high:
            errors.append(
                'emulator_util_low must be below emulator_util_high')
        if self.min_samples_to_fit > self.samples_per_model:
            errors.append(
                'min_samples_to_fit must not exceed samples_per_model')
        if not 0.0 <= self.emulator_saturation <= 1.0:
            errors.append('emulator_saturation must be between 0 and 1')
        if not 0.0 <= self.emulator_util_overload <= 1.0:
            errors.append('emulator_util_overload must be between 0 and 1')
        if self.emulator_min_cores < 0 or self.idle_pool_min_cores < 0:
            errors.append('emulator_min_cores and idle_pool_min_cores '
                          'must not be negative')
        if self.confirm_samples < 1:
            errors.append('confirm_samples must be at least 1')
        if self.min_samples_to_fit < 3:
            errors.append('min_samples_to_fit must be at least 3 '
                          '(a quadratic has three coefficients)')
        if not 0.0 <= self.idle_pool_steal_max < 1.0:
            errors.append('idle_pool_steal_max must be at least 0 and '
                          'below 1')
        if not 0.0 < self.host_only_steal_max < 1.0:
            errors.append('host_only_steal_max must be between 0 and 1')
        if self.idle_after_max < 0.0:
            errors.append('idle_after_max must not be negative')
        if self.drain_hold_max < 0.0:
            errors.append('drain_hold_max must not be negative')
        if self.be_policy not in BE_POLICIES:
            errors.append('be_policy must be one of %s'
                          % ', '.join(BE_POLICIES))
        if not 0.0 < self.latency_slack < 1.0:
            errors.append('latency_slack must be between 0 and 1')
        if errors:
            raise ValueError('[controller] ' + '; '.join(errors))

    @classmethod
    def from_conf(cls, conf):
        """Build from the ``[controller]`` group of an oslo.config object."""
        group = conf.controller
        values = {field.name: getattr(group, field.name)
                  for field in dataclasses.fields(cls)}
        return cls(**values)
