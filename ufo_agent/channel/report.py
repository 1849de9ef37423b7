"""What a guest reports over its channel, once validated: plain values.

:mod:`ufo_agent.channel.host_channel` reads the page and builds these;
the service loop and the simulator consume them without touching I/O.
"""

from ufo_agent.channel import layout
from ufo_agent import frozen

STATUS_OK = 'ok'
STATUS_ABSENT = 'absent'        # no guest module bound (magic is zero)
STATUS_INVALID = 'invalid'      # the guest area breaks the ABI
STATUS_BUSY = 'busy'            # torn reads until the retries ran out


@frozen.value
class GuestSample:
    """A validated copy of the guest area."""

    flags: int
    ack_target_seq: int
    applied_target: int
    online_vcpus: int
    present_vcpus: int
    online_cpus: tuple
    sample_count: int
    timestamp_ns: int
    interval_ns: int
    util: float             # percent of one vCPU, 0..100 * online_vcpus
    steal: float            # same unit
    ctxsw_per_sec: int
    own_ctxsw_per_sec: int
    host_errors: int
    watchdog_fires: int
    # Switches into a thread other than idle, per second; None from a
    # module that does not publish them (it predates the field).
    sched_in_per_sec: int = None
    # The tail latency software in the guest last published (us) and its
    # sequence; None from a module that predates them or a guest that
    # never published. Unchecked: see ufo_agent.channel.latency.
    latency_us: int = None
    latency_seq: int = 0

    @property
    def scheduling_frequency(self):
        """SF: switches into threads, or all switches from an old module.

        Switches into the idle task are not scheduling of work: with them,
        threads that hand work to each other on a busy vCPU count one
        switch where an idle vCPU counts two, and SF falls on fewer vCPUs
        at the same load.
        """
        if self.sf_counts_idle:
            return self.ctxsw_per_sec
        return self.sched_in_per_sec

    @property
    def sf_counts_idle(self):
        """Whether :attr:`scheduling_frequency` counts every switch."""
        return self.sched_in_per_sec is None

    @property
    def watchdog(self):
        return bool(self.flags & layout.GUEST_FLAG_WATCHDOG)

    @property
    def host_valid(self):
        return bool(self.flags & layout.GUEST_FLAG_HOST_VALID)


@frozen.value
class GuestReport:
    status: str
    reason: str = ''
    sample: GuestSample = None

    @property
    def ok(self):
        return self.status == STATUS_OK
