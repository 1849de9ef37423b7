"""Sizing of the shared emulator pool (top half of Algorithm 1).

Emulator, I/O and vhost threads of every managed VM share one pool. Keep
its utilization under ``emulator_util_high``: above it, grow until the
projected utilization is under ``emulator_util_low``; below the low mark,
shrink as long as the projected utilization stays under the high mark.

A projection that divides today's busy time by fewer cores assumes the
threads run as fast on a crowded pool as on a roomy one; they do not
(they share SMT cores and wait for each other), so a pool that grew at
busy B measures less than B right after, and the plain rule shrinks it
back at once, every other tick. :class:`EmulatorPool` remembers, for each
grow, the emulator busy time per unit of guest busy time before and
after it, and projects a shrink back to that size with the ratio of the
two, for ``sample_max_age`` seconds. Per unit of guest work, because on
a full host a grow squeezes guests and their traffic falls with it: that
fall is not the threads running faster.

A pool may be empty (``emulator_min_cores = 0``, for small hosts): its
threads then borrow shared CPUs, and its utilization is measured against
one core, so that it gets a core of its own once they would keep one busy
above the high mark, and gives it back below the low mark.
"""

import dataclasses

# Bounds of a learned crowding ratio: a measurement outside them is noise.
_MIN_CROWDING = 1.0
_MAX_CROWDING = 3.0


def wanted_cores(current_cores, current_pcpus, busy_pct, pcpus_per_core,
                 config, max_cores, crowding=None):
    """Return (cores wanted, current utilization as a fraction).

    ``busy_pct`` is the CPU time of all emulator threads in percent of one
    CPU (150 means 1.5 CPUs busy) over the last tick. ``crowding`` maps a
    smaller pool size to the factor by which busy time grows back there.
    """
    busy = max(0.0, float(busy_pct))
    crowding = crowding or {}
    # An empty pool is measured as if it had one core (module docstring).
    util = busy / (100.0 * (current_pcpus or pcpus_per_core))
    floor = min(config.emulator_min_cores, max_cores)

    def projected(cores):
        return busy / (100.0 * max(cores, 1) * pcpus_per_core)

    if util > config.emulator_util_high:
        cores = max(current_cores, floor)
        while cores < max_cores and projected(cores) >= \
                config.emulator_util_low:
            cores += 1
        return cores, util
    if util < config.emulator_util_low:
        cores = current_cores
        while cores > floor and projected(cores - 1) * crowding.get(
                cores - 1, 1.0) < config.emulator_util_high:
            cores -= 1
        return max(cores, floor), util
    return max(current_cores, floor), util


@dataclasses.dataclass
class _Grow:
    per_guest_before: float     # emulator busy per guest busy
    time: float
    crowding: float = None


class EmulatorPool:
    """The pool's size decisions, with the memory of each grow."""

    def __init__(self, config):
        self.config = config
        self._grows = {}    # size it grew from -> _Grow

    def crowding(self, now):
        """{smaller size: learned busy ratio} still within memory."""
        horizon = now - self.config.sample_max_age
        for size in [s for s, g in self._grows.items() if g.time < horizon]:
            del self._grows[size]
        return {size: g.crowding for size, g in self._grows.items()
                if g.crowding is not None}

    def decide(self, now, current_cores, current_pcpus, busy_pct,
               pcpus_per_core, max_cores, guest_pct):
        """(cores wanted, utilization); see :func:`wanted_cores`.

        ``guest_pct`` is the guests' busy time over the same tick (the sum
        of the active VMs' utilization, % of one CPU).
        """
        busy = max(0.0, float(busy_pct))
        per_guest = busy / guest_pct if guest_pct > 0 else None
        for size, grow in list(self._grows.items()):
            if grow.crowding is not None:
                continue
            # The first tick after a grow measures the roomier pool.
            if per_guest is None or grow.per_guest_before is None:
                del self._grows[size]
                continue
            ratio = grow.per_guest_before / max(per_guest, 1e-9)
            grow.crowding = min(_MAX_CROWDING, max(_MIN_CROWDING, ratio))
        want, util = wanted_cores(current_cores, current_pcpus, busy,
                                  pcpus_per_core, self.config, max_cores,
                                  self.crowding(now))
        if want > current_cores:
            self._grows[current_cores] = _Grow(per_guest, now)
        return want, util
