"""Evidence that lasts: a move needs consecutive samples that agree.

The paper's controller moves cores on every settled sample, so a
one-second burst or lull, or one noisy sample, buys or costs a core and
the trial that follows. Here a VM's cores change only once
``confirm_samples`` consecutive samples call for the same move from the
same count; ``confirm_samples = 1`` is the paper's behaviour.
"""

# A sample more than this many tick intervals after the previous one
# breaks the streak (a missing or unsettled tick came between).
_GAP_TICKS = 1.5


class Confirmation:
    """Counts consecutive samples calling for one move."""

    def __init__(self, config):
        self.config = config
        self._move = None
        self._count = 0
        self._last = None

    def agree(self, move, now):
        """Count a sample calling for ``move`` at ``now``.

        ``move`` is any comparable value naming the move (direction and
        starting count). True once ``confirm_samples`` consecutive samples
        called for it; the count then starts over.
        """
        self._extend(move, now)
        if self._count >= self.config.confirm_samples:
            self.reset()
            return True
        return False

    def agree_not_last(self, move, now):
        """Count a sample for ``move`` that may not complete the streak.

        The count stops one short of ``confirm_samples``, so the move
        still needs a later sample. Returns the samples counted so far.
        """
        self._extend(move, now)
        self._count = min(self._count, self.config.confirm_samples - 1)
        return self._count

    def _extend(self, move, now):
        """The streak for ``move`` with one more sample, or a new one."""
        gap = _GAP_TICKS * self.config.tick_interval
        if move == self._move and now - self._last <= gap:
            self._count += 1
        else:
            self._move, self._count = move, 1
        self._last = now

    def grant(self, move, now):
        """A move confirmed before, held back by the host, may go ahead.

        The next sample calling for ``move`` completes the streak.
        """
        self._move, self._last = move, now
        self._count = self.config.confirm_samples - 1

    @property
    def pending(self):
        """Samples so far for the move being confirmed."""
        return self._count

    def reset(self):
        self._move, self._count, self._last = None, 0, None
