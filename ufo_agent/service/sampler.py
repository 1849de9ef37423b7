"""Turn cumulative observations into one controller sample per guest.

Guest mode: utilization and scheduling frequency come from the guest's
page, after checking its utilization against what its vCPU threads ran.
Host-only mode (no module, an invalid page, a lying guest): utilization is
the vCPU threads' CPU time and the scheduling-frequency signal is how
often they were scheduled in. The emulator pool's load is the CPU time of
every other thread of every guest.
"""

import dataclasses

from ufo_agent.channel import crosscheck
from ufo_agent.controller.plan import VmSample

MODE_GUEST = 'guest'
MODE_HOST_ONLY = 'host-only'


@dataclasses.dataclass(frozen=True)
class GuestRates:
    """One guest over one tick."""

    sample: VmSample          # what the controller gets (None: hold)
    mode: str
    reason: str               # why host-only, '' in guest mode
    vcpu_pct: float           # host CPU time of vCPU threads, % of a CPU
    emulator_pct: float       # host CPU time of the other threads
    run_delay_ms: float       # run-queue wait of vCPU threads per second
    online_vcpus: int         # as the guest reports (0 if unknown)


class Sampler:
    """Keeps the previous observation of each guest to compute rates."""

    def __init__(self, tolerance=0.10, stale_after=2.5):
        self.tolerance = tolerance
        self.stale_after = stale_after
        self._last = {}          # uuid -> Observation
        self._guest_seen = {}    # uuid -> (sample_count, host time)

    def forget(self, uuid):
        self._last.pop(uuid, None)
        self._guest_seen.pop(uuid, None)

    def rates(self, uuid, obs):
        """Return :class:`GuestRates`, or None on the first observation."""
        last = self._last.get(uuid)
        self._last[uuid] = obs
        if last is None or obs.time <= last.time:
            return None
        span = obs.time - last.time
        vcpu_pct = max(0, obs.vcpu_cpu_ns - last.vcpu_cpu_ns) / span / 1e7
        emu_pct = max(0, obs.emulator_cpu_ns - last.emulator_cpu_ns) / \
            span / 1e7
        delay_ms = max(0, obs.vcpu_wait_ns - last.vcpu_wait_ns) / span / 1e6
        slices = max(0, obs.vcpu_slices - last.vcpu_slices) / span
        report = obs.guest
        reason = self._guest_problem(uuid, obs, report, vcpu_pct)
        if not reason:
            sample = report.sample
            vm_sample = VmSample(sample.util, float(sample.ctxsw_per_sec))
            return GuestRates(vm_sample, MODE_GUEST, '', vcpu_pct, emu_pct,
                              delay_ms, sample.online_vcpus)
        util, sf = host_only_sample(vcpu_pct, slices)
        online = report.sample.online_vcpus if (
            report is not None and report.ok) else 0
        return GuestRates(VmSample(util, sf), MODE_HOST_ONLY, reason,
                          vcpu_pct, emu_pct, delay_ms, online)

    def _guest_problem(self, uuid, obs, report, vcpu_pct):
        if report is None:
            return 'no guest channel'
        if not report.ok:
            return '%s: %s' % (report.status, report.reason)
        sample = report.sample
        count, seen_at = self._guest_seen.get(uuid, (None, obs.time))
        if count != sample.sample_count:
            self._guest_seen[uuid] = (sample.sample_count, obs.time)
        elif obs.time - seen_at > self.stale_after:
            return 'guest stats stale for %.1f s' % (obs.time - seen_at)
        verdict = crosscheck.check_guest_util(sample.util, vcpu_pct,
                                              self.tolerance)
        if not verdict.ok:
            return verdict.reason
        return ''


def host_only_sample(host_vcpu_pct, slices_per_s):
    """The (util, sf) pair used in host-only mode.

    Utilization is what the vCPU threads ran; the scheduling-frequency
    signal is how often they were scheduled in per second: each guest
    wake-up from idle (HLT exit) costs one.
    """
    return max(0.0, host_vcpu_pct), max(0.0, slices_per_s)
