"""Is a VM working off a backlog, or short of cores? Told from its traffic.

A one-second burst leaves a backlog that keeps an LC VM saturated for
two to four seconds after the burst has gone; two saturated samples
would confirm a grow for load that is no longer there. While it works
off a backlog the guest answers more than arrives: it sends more per
unit received than it usually does. In a load step beyond its cores it
sends less. The host counts both at the guest's NICs, without the
guest's help.

The ratio is of bytes, not packets: segmentation offload and receive
coalescing put more bytes in each packet as the load grows, and pure
ACKs weigh next to nothing. Its noise comes from the packet counts.

A busy VM that sends clearly less per unit received than usual answers
only that share of what arrives (:meth:`BacklogDetector.served`): its
utilization, capped by its cores, understates its demand by the same
factor, which tells how far it must grow.

The guest decides what it sends, so the signal is untrusted. A drain
can only hold back the VM's own grows, and never for longer than
``drain_hold_max`` seconds at a time. A shortfall only sizes a grow of a
VM whose utilization is already above the PCU band, which grows anyway,
and never past its flavor: a guest gains nothing by it that spinning
its vCPUs would not give it.
"""

import math

# A sample's excess over the usual ratio must stand out of the Poisson
# noise of its packet counts by this many standard deviations.
_NOISE_SIGMAS = 3.0
# Weight of a new sample in the usual ratio (an EWMA of about 8 samples).
_LEARN_WEIGHT = 1.0 / 8.0


class BacklogDetector:
    """Learns a VM's usual bytes out per byte in; tells a drain.

    The usual ratio is learned from samples that are neither busy nor
    draining: a busy VM's ratio is that of a step or of a backlog.
    """

    def __init__(self, config):
        self.config = config
        self.usual = None       # bytes out per byte in, when not busy
        self.since = None       # when the current drain began
        self.unanswered = 0.0   # work left unanswered by the short run
        self.short_at = None    # the run's last short sample

    def update(self, sample, busy, now):
        """Feed one :class:`~.plan.VmSample`; return True while draining.

        ``busy``: the VM's utilization is above the PCU band. A sample
        without traffic says nothing and ends a drain.
        """
        hold_max = self.config.drain_hold_max
        ratio = _ratio(sample)
        if ratio is None:
            self.since = None
            return False
        if hold_max and self._above_usual(ratio, sample):
            if self.since is None:
                self.since = now
            if now - self.since < hold_max:
                return True
            # Longer than a burst's backlog: this is the guest's ratio now.
            self.usual = ratio
            self.since = None
            return False
        self.since = None
        if not busy:
            self.usual = ratio if self.usual is None else \
                self.usual + (ratio - self.usual) * _LEARN_WEIGHT
        return False

    def served(self, sample):
        """Share of the arriving traffic the VM answers, if clearly short.

        Its bytes out per byte in against the usual ratio, when it falls
        below by more than ``sf_match_tolerance`` and the noise margin;
        otherwise (or without a usual ratio, or traffic) None. The
        caller asks only for a busy VM.
        """
        ratio = _ratio(sample)
        if ratio is None or self.usual is None:
            return None
        share = ratio / self.usual
        return share if self._clear(1.0 - share, sample) else None

    def left_unanswered(self, sample, share, now):
        """Work left unanswered over the run of short samples, in util-%.

        ``share`` is :meth:`served` for this sample (None ends the run).
        Each short tick leaves ``util * (1 / share - 1)``: the utilization
        that would have answered the rest. A run is of consecutive ticks.
        """
        if share is None:
            self.unanswered, self.short_at = 0.0, None
            return 0.0
        if self.short_at is None or \
                now - self.short_at > 1.5 * self.config.tick_interval:
            self.unanswered = 0.0
        self.unanswered += sample.util * (1.0 / max(share, 1e-9) - 1.0)
        self.short_at = now
        return self.unanswered

    def _above_usual(self, ratio, sample):
        return self.usual is not None and \
            self._clear(ratio / self.usual - 1.0, sample)

    def _clear(self, deviation, sample):
        """True if a relative deviation from the usual ratio is real.

        It must pass ``sf_match_tolerance`` by more than the noise margin
        of the sample's packet counts (their relative noise over one tick).
        """
        ticks = self.config.tick_interval
        noise = math.sqrt(1.0 / (sample.packets_in * ticks) +
                          1.0 / (sample.packets_out * ticks))
        return deviation - self.config.sf_match_tolerance > \
            _NOISE_SIGMAS * noise


def _ratio(sample):
    """Bytes out per byte in, or None for a sample that tells nothing.

    That is a sample without traffic both ways, and one whose counters
    cannot be: a packet carries at least a byte (a frame header), so
    fewer bytes than packets (packets and no bytes, say) is a counter
    that lies or wrapped. The ratio, when there is one, is positive and
    finite: the usual ratio learned from it is what later samples are
    divided by.
    """
    counts = (sample.packets_in, sample.packets_out, sample.bytes_in,
              sample.bytes_out)
    if any(c is None or not math.isfinite(c) or c <= 0 for c in counts):
        return None
    if sample.bytes_in < sample.packets_in or \
            sample.bytes_out < sample.packets_out:
        return None
    ratio = sample.bytes_out / sample.bytes_in
    return ratio if 0.0 < ratio < math.inf else None
