"""Judge the tail latency a guest publishes on its page.

Software in the guest writes its current tail latency to the guest
module (``/sys/kernel/ufo/latency_us``), which copies it to the page with
``latency_seq`` incremented and ``GUEST_FLAG_LATENCY`` set. Like every
guest value it is untrusted. A :class:`LatencyWatch` takes a report only
when:

* the flag is set (a module that predates it never sets it);
* ``latency_seq`` moved forward since the last read (a value the host
  has seen before is no new measurement; the first value seen is only
  where counting starts, as nobody knows how old it is);
* the value is within :data:`MIN_US` .. :data:`MAX_US`.

An accepted value stands for ``stale_after`` seconds of host time from
the read that first showed it. Past that, or after a rejected report, the
guest has no latency: the controller keeps its black-box rules for it.
"""

from ufo_agent import frozen

MIN_US = 1
MAX_US = 10 ** 7        # 10 s: no service target is that slow
DEFAULT_STALE_AFTER = 3.0

STATE_ABSENT = 'absent'         # never published, or no valid page
STATE_FRESH = 'fresh'
STATE_STALE = 'stale'           # no new report for stale_after seconds
STATE_REJECTED = 'rejected'     # the last report was out of bounds
STATES = (STATE_FRESH, STATE_STALE, STATE_REJECTED, STATE_ABSENT)

_SEQ_MOD = 1 << 32


@frozen.value
class LatencyReading:
    """What the host makes of a guest's latency at one read.

    ``value_us`` is the last accepted value (None: none), ``age_s`` the
    host seconds since it was first seen (None without one); only a
    ``fresh`` reading is used (:attr:`usable_us`).
    """

    state: str
    value_us: float = None
    age_s: float = None
    reason: str = ''

    @property
    def fresh(self):
        return self.state == STATE_FRESH

    @property
    def usable_us(self):
        """The latency the controller may act on, or None."""
        return self.value_us if self.fresh else None


ABSENT = LatencyReading(STATE_ABSENT)


class LatencyWatch:
    """The latency reports of one guest, judged read after read."""

    def __init__(self, stale_after=DEFAULT_STALE_AFTER):
        self.stale_after = stale_after
        self._seq = None            # latency_seq of the last read
        self._value = None          # last accepted value, us
        self._at = None             # host time it was first seen
        self._rejected = ''         # why the last new report was refused

    def reset(self):
        """Forget everything (the guest restarted or went away)."""
        self._seq = self._value = self._at = None
        self._rejected = ''

    def update(self, sample, now):
        """Read a validated :class:`GuestSample` (None: no valid page).

        Returns a :class:`LatencyReading` as of host time ``now``.
        """
        if sample is None or sample.latency_us is None:
            # No page, or no latency on it: what was seen may be stale.
            if sample is None:
                self._value = self._at = None
            else:
                self.reset()
            return ABSENT
        seq = sample.latency_seq
        if self._seq is None:
            # Where counting starts: its age is unknown.
            self._seq = seq
            return ABSENT
        step = (seq - self._seq) % _SEQ_MOD
        if step:
            self._seq = seq
            if step >= _SEQ_MOD // 2:
                # Backwards: a module that started over. Counted afresh.
                self._value = self._at = None
                self._rejected = ''
                return LatencyReading(STATE_ABSENT,
                                      reason='latency sequence went back')
            value = sample.latency_us
            if MIN_US <= value <= MAX_US:
                self._value, self._at = float(value), now
                self._rejected = ''
            else:
                self._value = self._at = None
                self._rejected = 'latency %d us not in %d..%d' % (
                    value, MIN_US, MAX_US)
        return self.held(now)

    def held(self, now):
        """The reading when this read showed nothing new (a torn read)."""
        if self._rejected:
            return LatencyReading(STATE_REJECTED, reason=self._rejected)
        if self._value is None:
            return ABSENT
        age = max(0.0, now - self._at)
        if age > self.stale_after:
            return LatencyReading(
                STATE_STALE, self._value, age,
                'no new latency for %.1f s' % age)
        return LatencyReading(STATE_FRESH, self._value, age)
