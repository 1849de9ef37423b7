"""Sizing of the shared emulator pool (top half of Algorithm 1).

Emulator, I/O and vhost threads of every managed VM share one pool. Keep
its utilization under ``emulator_util_high``: above it, grow until the
projected utilization is under ``emulator_util_low``; below the low mark,
shrink as long as the projected utilization stays under the high mark.

A pool may be empty (``emulator_min_cores = 0``, for small hosts): its
threads then borrow shared CPUs, and its utilization is measured against
one core, so that it gets a core of its own once they would keep one busy
above the high mark, and gives it back below the low mark.
"""


def wanted_cores(current_cores, current_pcpus, busy_pct, pcpus_per_core,
                 config, max_cores):
    """Return (cores wanted, current utilization as a fraction).

    ``busy_pct`` is the CPU time of all emulator threads in percent of one
    CPU (150 means 1.5 CPUs busy) over the last tick.
    """
    busy = max(0.0, float(busy_pct))
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
        while cores > floor and projected(cores - 1) < \
                config.emulator_util_high:
            cores -= 1
        return max(cores, floor), util
    return max(current_cores, floor), util
