"""A wait that doubles while what it holds back comes back too soon.

Parking a VM (:class:`~.classifier.IdleDetector`) and giving back an
idle-pool core (:class:`~.idle_pool.IdlePool`) each wait ``idle_after``
seconds of quiet first. When the move is undone sooner than it waited,
the next wait doubles, up to ``idle_after_max``: a load that sits at
the mark would otherwise be moved back and forth every few seconds.
"""


class DoublingWait:
    """``idle_after`` seconds, doubled up to ``idle_after_max``.

    Only the doublings are kept: the seconds follow the config each
    call is given, so a reconfigure reaches a wait already doubled.
    """

    def __init__(self):
        self.doublings = 0

    def seconds(self, config):
        return min(self._doubled(config), self._longest(config))

    def double(self, config):
        """The move came back too soon: wait twice as long next time."""
        if self._doubled(config) < self._longest(config):
            self.doublings += 1

    def reset(self):
        self.doublings = 0

    def _doubled(self, config):
        return config.idle_after * 2 ** self.doublings

    @staticmethod
    def _longest(config):
        return max(config.idle_after, config.idle_after_max)
