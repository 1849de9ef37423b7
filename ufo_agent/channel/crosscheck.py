"""Check what a guest claims against what the host saw its vCPUs do.

The guest's page is untrusted. Two of its claims are bounded by what the
host measures of the guest's vCPU threads (``/proc/<pid>/task/<tid>/
schedstat``: time on a CPU, time waiting for one, times scheduled in):

Utilization
    A guest vCPU can be busy only while its thread runs on the host or
    waits on a host run queue (a guest without steal-time accounting counts
    that wait as busy). So the busy time a guest claims over its samples,
    ``util x interval``, is at most the threads' CPU plus wait time over
    the same span, plus ``tolerance`` (time a vCPU thread sleeps on a lock
    while the guest is mid-instruction) and two scheduler ticks per vCPU
    (a guest kernel that accounts CPU time by tick samples over-counts a
    span by at most one tick at its start, and one more for the sampling
    noise of a nearly idle vCPU).
Scheduling frequency
    Every guest context switch executes guest code, so it happens while a
    vCPU thread runs on the host: switches are at most the threads' CPU
    time divided by :data:`MIN_SWITCH_NS`, the least a context switch costs
    (a guest that is nearly idle on the host cannot report thousands of
    switches), plus :data:`SWITCHES_PER_SLICE` for every time a thread was
    scheduled in (a guest wakes from idle through a host wake-up of its
    vCPU thread; two switches, out of idle and back, per wake-up).

The two sides sample at different instants. A guest sample first seen at
host time ``seen`` was published after ``after``, the host's previous read
of the page; its window ``[T - interval, T]`` therefore lies within
``[after - interval - margin, seen]``, and the host's counters over that
span bound it. Over one sample this span is about two host ticks (a lie
must be twice the truth to show); over the last :data:`HISTORY` samples,
whose windows follow each other, it is ``HISTORY + 1`` ticks, so a lie
that lasts is caught when it is more than about 20 % above the truth.
Every suffix of the recent samples is checked. Where the host has no
counters (before its first observation), a vCPU counts as busy all the
time: the bound stays sound, only looser.
"""

import dataclasses

# The least CPU time one guest context switch takes, in ns. Measured on
# this project's CI machines (AMD EPYC, a KVM-based VM, Linux 6.1): two
# threads yielding to each other on one CPU switch every 1.4 us, a pipe
# ping-pong between two processes every 2.6 us; a thread pipe ping-pong
# on current desktop CPUs takes about 1 us a switch. 4x below those.
MIN_SWITCH_NS = 250
# Guest switches a host wake-up of a vCPU thread may explain on its own.
SWITCHES_PER_SLICE = 2
# Switches allowed in any checked span, for counter rounding.
SWITCH_SLACK = 50
# Busy seconds allowed per vCPU in any checked span: two ticks at 100 Hz
# (the span's start, sampling noise), not a slack per second.
UTIL_SLACK_S_PER_VCPU = 0.02
# Time a guest may take between ending a sample and publishing it.
PUBLISH_MARGIN_S = 0.25
# Guest samples checked together (the longest suffix).
HISTORY = 10


@dataclasses.dataclass(frozen=True)
class Verdict:
    ok: bool
    reason: str = ''


@dataclasses.dataclass(frozen=True)
class HostPoint:
    """Cumulative counters of a guest's vCPU threads at host ``time`` (s)."""

    time: float
    cpu_ns: int
    wait_ns: int
    slices: int


@dataclasses.dataclass(frozen=True)
class Claim:
    """One guest sample, first seen by the host at ``seen``.

    ``after`` is the host time of the previous read of the page, which
    did not show it yet. ``switches_per_s`` counts every switch, the
    module's own included.
    """

    after: float
    seen: float
    interval_s: float
    util_pct: float
    switches_per_s: float
    vcpus: int

    @property
    def busy_s(self):
        return self.util_pct / 100.0 * self.interval_s

    @property
    def switches(self):
        return self.switches_per_s * self.interval_s


@dataclasses.dataclass(frozen=True)
class HostUsage:
    """Upper bounds of what the vCPU threads did over a span."""

    runnable_s: float       # on a CPU or waiting for one
    cpu_s: float            # on a CPU
    slices: int             # times scheduled in


def host_usage(points, start, end, vcpus):
    """:class:`HostUsage` over ``[start, end]`` from cumulative points.

    ``points`` are :class:`HostPoint` in time order. A host interval that
    the span covers in part counts in full, but at most ``vcpus`` busy
    for the part covered; time before the first point or after the last
    counts as ``vcpus`` busy (and no wake-ups).
    """
    points = list(points)
    runnable = cpu = 0.0
    slices = 0
    if not points:
        return HostUsage((end - start) * vcpus, (end - start) * vcpus, 0)
    uncovered = max(0.0, min(end, points[0].time) - start) + \
        max(0.0, end - max(start, points[-1].time))
    runnable += uncovered * vcpus
    cpu += uncovered * vcpus
    for p0, p1 in zip(points, points[1:]):
        overlap = min(end, p1.time) - max(start, p0.time)
        if overlap <= 0:
            continue
        d_cpu = max(0, p1.cpu_ns - p0.cpu_ns) / 1e9
        d_run = d_cpu + max(0, p1.wait_ns - p0.wait_ns) / 1e9
        slices += max(0, p1.slices - p0.slices)
        if start <= p0.time and p1.time <= end:
            runnable += d_run
            cpu += d_cpu
        else:
            runnable += min(d_run, overlap * vcpus)
            cpu += min(d_cpu, overlap * vcpus)
    return HostUsage(runnable, cpu, slices)


def util_limit_s(usage, vcpus, tolerance):
    """The most busy time (vCPU seconds) a guest may claim over a span."""
    return usage.runnable_s * (1.0 + tolerance) + \
        UTIL_SLACK_S_PER_VCPU * vcpus


def switch_limit(usage):
    """The most context switches a guest may claim over a span."""
    return (usage.cpu_s * 1e9 / MIN_SWITCH_NS +
            SWITCHES_PER_SLICE * usage.slices + SWITCH_SLACK)


def check_claims(points, claims, tolerance=0.10):
    """Judge the recent samples of a guest: a :class:`Verdict`.

    ``claims`` are :class:`Claim` in the order they were seen; every
    suffix of them (the newest alone, the two newest, ...) must stay
    within what the host's ``points`` allow.
    """
    points = list(points)
    claims = list(claims)[-HISTORY:]
    busy = switches = span = 0.0
    start = None
    vcpus = 1
    for claim in reversed(claims):
        busy += claim.busy_s
        switches += claim.switches
        span += claim.interval_s
        vcpus = max(vcpus, claim.vcpus)
        begin = claim.after - claim.interval_s - PUBLISH_MARGIN_S
        start = begin if start is None else min(start, begin)
        if span <= 0:
            continue
        usage = host_usage(points, start, claims[-1].seen, vcpus)
        limit = util_limit_s(usage, vcpus, tolerance)
        window = claims[-1].seen - start
        if busy > limit:
            return Verdict(False, (
                'guest claims %.3f vCPU-s busy in its last %.1f s (%.1f%%); '
                'its vCPU threads ran or waited %.3f s in the %.1f s that '
                'hold them' % (busy, span, 100.0 * busy / span,
                               usage.runnable_s, window)))
        most = switch_limit(usage)
        if switches > most:
            return Verdict(False, (
                'guest claims %.0f context switches in its last %.1f s '
                '(%.0f/s); %.3f s of CPU and %d wake-ups of its vCPU '
                'threads in the %.1f s that hold them allow %.0f'
                % (switches, span, switches / span, usage.cpu_s,
                   usage.slices, window, most)))
    return Verdict(True)
