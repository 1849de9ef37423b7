"""The service loop's own settings (``[agent]``) as an immutable value.

The only place their defaults are written: the oslo options
(:mod:`ufo_agent.conf.agent`) take theirs from here.
"""

import dataclasses


@dataclasses.dataclass(frozen=True)
class AgentSettings:
    """The agent's own settings (``[agent]``), as plain values."""

    dry_run: bool = False
    ack_timeout: float = 2.0
    ack_wait: float = 0.3
    max_vcpu_step: int = 8
    guest_util_tolerance: float = 0.10
    state_save_interval: float = 60.0
    drift_check_interval: float = 10.0
    libvirt_call_timeout: float = 5.0
    heartbeat_interval: float = 0.5
    max_failed_ticks: int = 10
    latency_stale_after: float = 3.0

    def liveness_window(self, tick_interval):
        """Seconds without a completed tick after which the loop is stuck.

        Three ticks, plus one libvirt call that runs into its deadline.
        """
        return 3 * tick_interval + self.libvirt_call_timeout

    @classmethod
    def from_conf(cls, conf):
        return cls(**{f.name: getattr(conf.agent, f.name)
                      for f in dataclasses.fields(cls)})
