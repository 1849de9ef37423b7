"""Turn cumulative observations into one controller sample per guest.

Guest mode: utilization and scheduling frequency come from the guest's
page, after checking both against what its vCPU threads did on the host
(:mod:`ufo_agent.channel.crosscheck`). Host-only mode (no module, an
invalid page, a page held busy, a lying guest): utilization is the vCPU
threads' CPU time and the scheduling-frequency signal is how often they
were scheduled in; the steal share (run delay against run time) is what
the controller judges such a guest by. The emulator pool's load is the
CPU time of every other thread of every guest.

The tail latency a guest publishes (:mod:`ufo_agent.channel.latency`)
goes to the controller in guest mode only, while fresh: a guest whose
page or claims the host does not trust gets none.
"""

import collections
import typing

from ufo_agent.channel import crosscheck
from ufo_agent.channel import latency as latency_mod
from ufo_agent.channel import report as report_mod
from ufo_agent.controller.plan import VmSample
from ufo_agent.driver import base
from ufo_agent import frozen

MODE_GUEST = 'guest'
MODE_HOST_ONLY = 'host-only'
# Torn reads in a row that a guest in guest mode is forgiven (its last
# sample is used, and checked, again); one more and it is host-only.
BUSY_FORGIVEN = 1


@frozen.value
class GuestRates:
    """One guest over one tick."""

    sample: VmSample          # what the controller gets
    mode: str
    reason: str               # why host-only, '' in guest mode
    vcpu_pct: float           # host CPU time of vCPU threads, % of a CPU
    emulator_pct: float       # host CPU time of the other threads
    run_delay_ms: float       # run-queue wait of vCPU threads per second
    online_vcpus: int         # as the guest reports (0 if unknown)
    # Host-only for something wrong with the guest's page or claims, not
    # for want of a module or of a sample the host can check yet.
    fault: bool = False
    # The guest's published latency as judged this tick.
    latency: latency_mod.LatencyReading = latency_mod.ABSENT


def _traffic_rates(before, after, span):
    """Packets and bytes per second, in and out, over the NICs in both."""
    if before and after and len(before) == len(after) == 1:
        # One NIC, the most common guest: no sets, the same sums.
        (nic, now), = after.items()
        then = before.get(nic)
        if then is None:
            return {}
        return {'packets_in': 0.0 + max(0, now[0] - then[0]) / span,
                'packets_out': 0.0 + max(0, now[1] - then[1]) / span,
                'bytes_in': 0.0 + max(0, now[2] - then[2]) / span,
                'bytes_out': 0.0 + max(0, now[3] - then[3]) / span}
    common = set(before or ()) & set(after or ())
    if not common:
        return {}
    rates = [0.0] * 4
    for nic in common:
        for i in range(4):
            rates[i] += max(0, after[nic][i] - before[nic][i]) / span
    return dict(zip(base.NicCounters._fields, rates))


class _Sighting(typing.NamedTuple):
    """A guest sample the host has seen, as it first saw it."""

    count: int
    first_seen: float       # host time of the read that first showed it
    after: float            # host time of the read before (None: none)
    start: float            # earliest start of its window (None: unknown)
    stats: tuple            # its statistics when first seen


def _stats(sample):
    """The values a guest module changes only with a new sample count."""
    return (sample.timestamp_ns, sample.interval_ns, sample.util,
            sample.steal, sample.ctxsw_per_sec, sample.own_ctxsw_per_sec,
            sample.sched_in_per_sec)


class _History:
    """What the sampler remembers of one guest."""

    def __init__(self, latency_stale_after):
        self.last = None                  # the previous Observation
        self.latency = latency_mod.LatencyWatch(latency_stale_after)
        # The host's recent points, as the cross-check reads them.
        self.counters = crosscheck.HostCounters(
            maxlen=crosscheck.HISTORY + 6)
        # What the controller was told, every tick; kept when the page
        # breaks, so that a lie is not forgotten by breaking it.
        self.uses = collections.deque(maxlen=crosscheck.HISTORY)
        self.sighting = None              # the newest sample seen
        self.sighted = None               # the GuestSample it was made of
        self.read_at = None               # host time of the last good read
        self.busy = 0                     # torn reads in a row
        self.held = None                  # GuestSample used last tick


class Sampler:
    """Keeps recent observations of each guest to compute and check rates.

    Every guest sample the controller gets is checked, on every tick it
    is used, against the host's counters (:mod:`.crosscheck`).
    """

    def __init__(self, tolerance=0.10, stale_after=2.5,
                 busy_forgiven=BUSY_FORGIVEN,
                 latency_stale_after=latency_mod.DEFAULT_STALE_AFTER):
        self.tolerance = tolerance
        self.stale_after = stale_after
        self.busy_forgiven = busy_forgiven
        self._latency_stale_after = latency_stale_after
        self._guests = {}        # uuid -> _History

    @property
    def latency_stale_after(self):
        """Seconds a published latency stands ([agent] latency_stale_after)."""
        return self._latency_stale_after

    @latency_stale_after.setter
    def latency_stale_after(self, seconds):
        self._latency_stale_after = seconds
        for hist in self._guests.values():
            hist.latency.stale_after = seconds

    def forget(self, uuid):
        self._guests.pop(uuid, None)

    def rates(self, uuid, obs):
        """Return :class:`GuestRates`, or None on the first observation."""
        hist = self._guests.get(uuid)
        if hist is None:
            hist = self._guests[uuid] = _History(self._latency_stale_after)
        last, hist.last = hist.last, obs
        if last is not None and obs.time <= last.time:
            # The clock went backwards: nothing before is comparable.
            self._guests[uuid] = hist = _History(self._latency_stale_after)
            hist.last = obs
            last = None
        point = crosscheck.HostPoint(
            obs.time, obs.vcpu_cpu_ns, obs.vcpu_wait_ns, obs.vcpu_slices)
        hist.counters.append(point)
        report = obs.guest
        self._note_sighting(hist, obs.time, report)
        latency = self._latency(hist, obs.time, report)
        if last is None:
            return None
        span = obs.time - last.time
        vcpu_pct = max(0, obs.vcpu_cpu_ns - last.vcpu_cpu_ns) / span / 1e7
        emu_pct = max(0, obs.emulator_cpu_ns - last.emulator_cpu_ns) / \
            span / 1e7
        emu = _traffic_rates(last.nics, obs.nics, span)
        emu['emulator'] = emu_pct
        emu['emulator_threads'] = obs.emulator_threads
        emu['emulator_wait'] = max(0, obs.emulator_wait_ns -
                                   last.emulator_wait_ns) / span / 1e7
        delay_ms = max(0, obs.vcpu_wait_ns - last.vcpu_wait_ns) / span / 1e6
        emu['vcpu_run'] = vcpu_pct
        emu['vcpu_wait'] = delay_ms / 10.0
        slices = max(0, obs.vcpu_slices - last.vcpu_slices) / span
        reason, sample, fault = self._guest_sample(hist, obs, report, span)
        hist.held = sample
        if sample is not None:
            vm_sample = VmSample(
                sample.util, float(sample.scheduling_frequency),
                sf_counts_idle=sample.sf_counts_idle,
                latency_us=latency.usable_us, **emu)
            return GuestRates(vm_sample, MODE_GUEST, '', vcpu_pct, emu_pct,
                              delay_ms, sample.online_vcpus, False, latency)
        online = report.sample.online_vcpus if (
            report is not None and report.ok) else 0
        return GuestRates(host_only_sample(vcpu_pct, slices, delay_ms, **emu),
                          MODE_HOST_ONLY, reason,
                          vcpu_pct, emu_pct, delay_ms, online, fault, latency)

    @staticmethod
    def _latency(hist, now, report):
        """Judge the page's latency report (every read, in any mode)."""
        if report is not None and report.status == report_mod.STATUS_BUSY:
            return hist.latency.held(now)
        return hist.latency.update(
            report.sample if report is not None and report.ok else None, now)

    def _note_sighting(self, hist, now, report):
        """Note when a guest sample first shows on the page."""
        if report is None or report.status == report_mod.STATUS_BUSY:
            return              # no read: the last good one still bounds
        if not report.ok:
            # No module, or a broken page: what comes next was not seen
            # being published.
            hist.sighting = hist.read_at = hist.sighted = None
            return
        sample = report.sample
        seen = hist.sighting
        if seen is None or sample.sample_count != seen.count:
            jumped = seen is not None and \
                sample.sample_count != seen.count + 1
            hist.sighting = _Sighting(
                sample.sample_count, now, hist.read_at,
                crosscheck.window_start(
                    hist.read_at, jumped,
                    seen.after if seen is not None else None,
                    self.stale_after),
                _stats(sample))
            hist.sighted = sample
        hist.read_at = now

    def _guest_sample(self, hist, obs, report, span):
        """(reason, GuestSample, fault): the guest's numbers, or why not.

        The sample is None, with the reason, when they cannot be used;
        ``fault`` unless that is for want of a module or of a sample the
        host can check yet (a start, a reboot, a page valid again);
        every one that can is checked against the host's counters first.
        A torn read is forgiven ``busy_forgiven`` times in a row: the
        sample used last tick stands in for it, and is checked again.
        """
        if report is None:
            return 'no guest channel', None, False
        if report.status == report_mod.STATUS_BUSY:
            hist.busy += 1
            if hist.busy > self.busy_forgiven or hist.held is None:
                return '%s: %s (%d reads in a row)' % (
                    report.status, report.reason, hist.busy), None, True
            sample = hist.held
        else:
            hist.busy = 0
            if not report.ok:
                return ('%s: %s' % (report.status, report.reason), None,
                        report.status != report_mod.STATUS_ABSENT)
            sample = report.sample
        seen = hist.sighting
        if not sample.sample_count:
            return 'the guest module has published no sample yet', None, False
        # The very sample the sighting was made of (a page unchanged
        # since gives its report again) has its statistics.
        if sample is not hist.sighted and _stats(sample) != seen.stats:
            return ('guest statistics changed without a new sample '
                    'count'), None, True
        if seen.start is None:
            return ('guest sample %d was not seen being published: it '
                    'cannot be checked' % seen.count), None, False
        if obs.time - seen.first_seen > self.stale_after:
            return 'guest stats stale for %.1f s' % (
                obs.time - seen.first_seen), None, True
        # A window that may begin before the host's first counters is
        # not checkable, but for the publishing lag, which the start
        # allows for and a sample seldom takes.
        first = hist.counters.times[0]
        if seen.start < first - crosscheck.PUBLISH_MARGIN_S:
            return ('the host has not measured the vCPU threads over the '
                    'window of guest sample %d' % seen.count), None, False
        hist.uses.append(crosscheck.Use(
            start=max(seen.start, first), end=obs.time, span_s=span,
            util_pct=sample.util,
            switches_per_s=float(sample.ctxsw_per_sec +
                                 sample.own_ctxsw_per_sec),
            vcpus=max(1, sample.present_vcpus)))
        verdict = crosscheck.check_uses(hist.counters, hist.uses,
                                        self.tolerance)
        if not verdict.ok:
            return verdict.reason, None, True
        return '', sample, False


def host_only_sample(host_vcpu_pct, slices_per_s, run_delay_ms, **known):
    """The :class:`VmSample` of host-only mode (``known``: its other fields).

    Utilization is what the vCPU threads ran; the scheduling-frequency
    signal is how often they were scheduled in per second (each guest
    wake-up from idle, an HLT exit, costs one). Steal is the share of
    their runnable time spent waiting on a host run queue (schedstat):
    ``run_delay_ms`` per second against ``host_vcpu_pct`` (10 ms a second
    per percent) of running.
    """
    running_ms = max(0.0, host_vcpu_pct) * 10.0
    waiting_ms = max(0.0, run_delay_ms)
    total = running_ms + waiting_ms
    return VmSample(max(0.0, host_vcpu_pct), max(0.0, slices_per_s),
                    steal=waiting_ms / total if total > 0 else 0.0, **known)
