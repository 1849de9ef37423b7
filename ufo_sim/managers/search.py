"""Searches over core counts, with no simulation in them.

The managers that find an allocation by trying (Default, Oracle) hand a
``feasible`` callback to these functions. QoS feasibility is taken to be
monotone in cores (more cores never break QoS), which is what makes a
bisection valid; the unit tests pin the searches down on such predicates.
"""


def min_feasible(lo, hi, feasible):
    """Return the smallest n in [lo, hi] with ``feasible(n)``, or None.

    Bisection: ``feasible`` is called O(log(hi - lo)) times, always at
    ``hi`` first so an infeasible range costs one call.
    """
    if lo > hi or not feasible(hi):
        return None
    while lo < hi:
        mid = (lo + hi) // 2
        if feasible(mid):
            hi = mid
        else:
            lo = mid + 1
    return lo


def min_feasible_each(lo, hi, feasible_all):
    """Per-item smallest feasible counts, found in shared trials.

    ``lo`` and ``hi`` are sequences (one bound per item);
    ``feasible_all(counts)`` tries all items at once, each at its own
    count, and returns one bool per item. That fits VMs on disjoint cores:
    one simulation answers for every VM. Returns a list with None for an
    item infeasible even at its ``hi``.
    """
    lo, hi = list(lo), list(hi)
    top = feasible_all(tuple(hi))
    done = [None] * len(top)
    alive = [i for i, ok in enumerate(top) if ok]
    while True:
        open_items = [i for i in alive if lo[i] < hi[i]]
        if not open_items:
            break
        trial = list(hi)
        for i in open_items:
            trial[i] = (lo[i] + hi[i]) // 2
        verdict = feasible_all(tuple(trial))
        for i in open_items:
            if verdict[i]:
                hi[i] = trial[i]
            else:
                lo[i] = trial[i] + 1
    for i in alive:
        done[i] = lo[i]
    return done
