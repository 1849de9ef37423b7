"""Check what a guest claims against what the host saw its vCPUs do.

The guest's page is untrusted. Two of its claims are bounded by what the
host measures of the guest's vCPU threads (``/proc/<pid>/task/<tid>/
schedstat``: time on a CPU, time waiting for one, times scheduled in):

Utilization
    A guest vCPU can be busy only while its thread runs on the host or
    waits on a host run queue (a guest without steal-time accounting counts
    that wait as busy). So the busy time a guest claims is at most the
    threads' CPU plus wait time over a span that holds it, plus
    ``tolerance`` (time a vCPU thread sleeps on a lock while the guest is
    mid-instruction) and two scheduler ticks per vCPU (a guest kernel that
    accounts CPU time by tick samples over-counts a span by at most one
    tick at its start, and one more for the sampling noise of a nearly
    idle vCPU).
Scheduling frequency
    Every guest context switch executes guest code, so it happens while a
    vCPU thread runs on the host: switches are at most the threads' CPU
    time divided by :data:`MIN_SWITCH_NS`, the least a context switch costs
    (a guest that is nearly idle on the host cannot report thousands of
    switches), plus :data:`SWITCHES_PER_SLICE` for every time a thread was
    scheduled in (a guest wakes from idle through a host wake-up of its
    vCPU thread; two switches, out of idle and back, per wake-up).

What is checked is each :class:`Use`: the guest's rates as the controller
takes them, for one host tick. A rate used on a tick claims
``rate x tick`` over the host's own interval: the same sample used on two
ticks claims twice. Neither the length of a guest sample nor its time
stamps enter the check; they are the guest's word.

The two sides sample at different instants. A guest sample window lies
between when its predecessor was published and when the host first saw
it; the host knows both only as far as its reads tell
(:func:`window_start`). Over one tick this span is about two host ticks
(a lie must be twice the truth to show); over the last :data:`HISTORY`
uses, whose samples follow each other, it is ``HISTORY + 1`` ticks, so a
lie that lasts is caught when it is more than about 20 % above the truth.
Every suffix of the recent uses is checked. Where the host has no
counters (before its first observation), a vCPU counts as busy all the
time: the bound stays sound, only looser.

A guest whose samples arrive only every tick or so can have one used on
two ticks where its next one came just after the host's read: a sample
that was a one-off burst then reads as a lie for a few ticks, and the
host's own measurement stands in for it.
"""

import bisect
import typing

from ufo_agent import frozen

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
# Uses of guest samples checked together (the longest suffix).
HISTORY = 10
# A claim this far below a limit is below it whatever the rounding of
# two ways of summing the same counters.
_WELL_WITHIN = 1.0 - 1e-9


@frozen.value
class Verdict:
    ok: bool
    reason: str = ''


# Every guest's uses pass on nearly every tick: one verdict for them all.
_PASSED = Verdict(True)


class HostPoint(typing.NamedTuple):
    """Cumulative counters of a guest's vCPU threads at host ``time`` (s).

    A tuple: one is made for every guest on each tick.
    """

    time: float
    cpu_ns: int
    wait_ns: int
    slices: int


class Use(typing.NamedTuple):
    """A guest sample's rates, as the controller takes them for one tick.

    ``end`` is the host time of the tick and ``span_s`` the host interval
    the rates stand for; ``start`` is the earliest host time the sample's
    own window can begin (:func:`window_start`). ``switches_per_s``
    counts every switch, the module's own included.
    """

    start: float
    end: float
    span_s: float
    util_pct: float
    switches_per_s: float
    vcpus: int

    @property
    def busy_s(self):
        return self.util_pct / 100.0 * self.span_s

    @property
    def switches(self):
        return self.switches_per_s * self.span_s


def window_start(after, jumped, previous_after, longest):
    """Earliest host time the window of a newly seen sample can begin.

    ``after`` is the host time of the last read before the one that first
    showed the sample; it showed an older sample (None: there was none).
    The window starts where the guest's previous sample ended:

    * ``jumped``: the host never saw that previous sample, which was
      therefore published after ``after``;
    * otherwise the previous sample is the one the host saw, first by the
      read after ``previous_after`` (None: unknown).

    A sample ends at most :data:`PUBLISH_MARGIN_S` before it is
    published. ``longest`` is the longest sample window the host accepts
    (a guest whose samples come further apart is stale anyway): it bounds
    the start where the reads do not. None where nothing bounds it: such
    a sample is not checkable.
    """
    if after is None:
        return None
    if jumped:
        return after - PUBLISH_MARGIN_S
    floor = after - PUBLISH_MARGIN_S - longest
    if previous_after is None:
        return floor
    return max(floor, previous_after - PUBLISH_MARGIN_S)


class HostUsage(typing.NamedTuple):
    """Upper bounds of what the vCPU threads did over a span."""

    runnable_s: float       # on a CPU or waiting for one
    cpu_s: float            # on a CPU
    slices: int             # times scheduled in


class HostCounters:
    """Cumulative points of a guest's vCPU threads, for many spans.

    Built from ``points`` (:class:`HostPoint` in time order), and kept
    up to date by :meth:`append`, which drops the oldest point past
    ``maxlen``: a guest's counters are not rebuilt on every tick. Each
    span costs a binary search, not a walk over the points: the agent
    checks ten spans of every guest on every tick.
    """

    def __init__(self, points=(), maxlen=None):
        self.maxlen = maxlen
        self.times = []
        self._deltas = []       # per interval: cpu, runnable, slices
        # Over the intervals before each point, from the first appended:
        # only their differences are used, so dropping points keeps them.
        self._sums = []
        self._last = None
        for point in points:
            self.append(point)

    def append(self, point):
        """A newer point; the oldest goes once there are ``maxlen``."""
        last = self._last
        if last is None:
            self._sums.append((0.0, 0.0, 0))
        else:
            d_cpu = max(0, point.cpu_ns - last.cpu_ns) / 1e9
            d_run = d_cpu + max(0, point.wait_ns - last.wait_ns) / 1e9
            d_slices = max(0, point.slices - last.slices)
            self._deltas.append((d_cpu, d_run, d_slices))
            cpu, runnable, slices = self._sums[-1]
            self._sums.append((cpu + d_cpu, runnable + d_run,
                               slices + d_slices))
        self.times.append(point.time)
        self._last = point
        if self.maxlen is not None and len(self.times) > self.maxlen:
            del self.times[0], self._sums[0], self._deltas[0]

    def usage(self, start, end, vcpus):
        """:class:`HostUsage` over ``[start, end]``.

        A host interval that the span covers in part counts in full, but
        at most ``vcpus`` busy for the part covered; time before the
        first point or after the last counts as ``vcpus`` busy (and no
        wake-ups).
        """
        return HostUsage(*self._usage(start, end, vcpus))

    def _usage(self, start, end, vcpus):
        """:meth:`usage` as a plain tuple."""
        times = self.times
        if not times:
            return (end - start) * vcpus, (end - start) * vcpus, 0
        # Written out with comparisons, not min() and max(): ten spans of
        # every guest are checked on each tick.
        t0, tn = times[0], times[-1]
        uncovered = 0.0
        if start < t0:
            uncovered = (end if end < t0 else t0) - start
        if end > tn:
            uncovered += end - (start if start > tn else tn)
        runnable = cpu = uncovered * vcpus
        slices = 0
        first = bisect.bisect_left(times, start)    # first point in span
        last = bisect.bisect_right(times, end) - 1  # last point in span
        if last > first:
            cpu0, run0, slices0 = self._sums[first]
            cpu1, run1, slices1 = self._sums[last]
            cpu += cpu1 - cpu0
            runnable += run1 - run0
            slices += slices1 - slices0
        # The intervals the span's ends cut (one, if it holds no point).
        deltas = self._deltas
        n = len(deltas)
        for i in ((first - 1, last) if last != first - 1 else (last,)):
            if i < 0 or i >= n:
                continue
            a, b = times[i], times[i + 1]
            overlap = (end if end < b else b) - (start if start > a else a)
            if overlap <= 0:
                continue
            d_cpu, d_run, d_slices = deltas[i]
            slices += d_slices
            most = overlap * vcpus
            runnable += d_run if d_run < most else most
            cpu += d_cpu if d_cpu < most else most
        return runnable, cpu, slices


def host_usage(points, start, end, vcpus):
    """:class:`HostUsage` over ``[start, end]`` from cumulative points.

    See :meth:`HostCounters.usage`.
    """
    return HostCounters(points).usage(start, end, vcpus)


def util_limit_s(usage, vcpus, tolerance):
    """The most busy time (vCPU seconds) a guest may claim over a span."""
    return usage.runnable_s * (1.0 + tolerance) + \
        UTIL_SLACK_S_PER_VCPU * vcpus


def switch_limit(usage):
    """The most context switches a guest may claim over a span."""
    return (usage.cpu_s * 1e9 / MIN_SWITCH_NS +
            SWITCHES_PER_SLICE * usage.slices + SWITCH_SLACK)


def check_uses(points, uses, tolerance=0.10):
    """Judge the recent uses of a guest's samples: a :class:`Verdict`.

    ``uses`` are :class:`Use` in tick order; every suffix of them (the
    newest alone, the two newest, ...) must stay within what the host's
    ``points`` (or a :class:`HostCounters` of them) allow over the span
    that holds their samples' windows.
    """
    counters = points if isinstance(points, HostCounters) else \
        HostCounters(points)
    if len(uses) > HISTORY:
        uses = list(uses)[-HISTORY:]
    if not uses:
        return _PASSED
    end = uses[-1].end
    busy = switches = span = 0.0
    start = end
    vcpus = 1
    used_start = used_vcpus = None
    usage_of = counters._usage
    # The limits written out as util_limit_s() and switch_limit() have
    # them (the same arithmetic): up to ten spans of every guest are
    # checked on each tick.
    util_factor = 1.0 + tolerance
    limit = most = None
    for use_start, _, span_s, util_pct, switches_per_s, use_vcpus in \
            reversed(uses):
        busy += util_pct / 100.0 * span_s
        switches += switches_per_s * span_s
        span += span_s
        if use_vcpus > vcpus:
            vcpus = use_vcpus
        if use_start < start:
            start = use_start
        if span <= 0:
            continue
        if start != used_start or vcpus != used_vcpus:
            # A longer suffix's span holds the shorter one's, over as many
            # vCPUs or more: its limits are at least the shorter one's.
            # Claims well within those pass without the span's own.
            if limit is not None and util_factor > 0 and \
                    busy < limit * _WELL_WITHIN and \
                    switches < most * _WELL_WITHIN:
                continue
            # Not again for a sample used on two ticks.
            used_start, used_vcpus = start, vcpus
            runnable_s, cpu_s, slices = usage_of(start, end, vcpus)
            limit = runnable_s * util_factor + UTIL_SLACK_S_PER_VCPU * vcpus
            most = (cpu_s * 1e9 / MIN_SWITCH_NS +
                    SWITCHES_PER_SLICE * slices + SWITCH_SLACK)
        if busy > limit:
            return Verdict(False, (
                'guest claims %.3f vCPU-s busy in the last %.1f s (%.1f%%); '
                'its vCPU threads ran or waited %.3f s in the %.1f s that '
                'hold its samples' % (busy, span, 100.0 * busy / span,
                                      runnable_s, end - start)))
        if switches > most:
            return Verdict(False, (
                'guest claims %.0f context switches in the last %.1f s '
                '(%.0f/s); %.3f s of CPU and %d wake-ups of its vCPU '
                'threads in the %.1f s that hold its samples allow %.0f'
                % (switches, span, switches / span, cpu_s, slices,
                   end - start, most)))
    return _PASSED
