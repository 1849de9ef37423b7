"""Maximum aggregated load (MAL) per CPU count (paper Fig. 13).

For a mix and a manager, MAL at P CPUs is the largest sum of the VMs'
loads (in % of each profile's max load, so 200 is both VMs of a pair at
max)
among the grid cells the manager serves under QoS with at most P CPUs.
It is read off a finished grid, as the paper reads it off its heatmaps.
"""

from ufo_sim.experiments import summary


def _load_sum(cell_key):
    return sum(int(part.split('@')[1]) for part in cell_key.split('+'))


def mal(results, manager, cells, cpu_counts, budget_cpus):
    """{P: MAL or None} for ``manager`` over ``cells``."""
    rows = summary.index(results).get(manager, {})
    served = [(rows[c]['cpus'], _load_sum(c)) for c in cells
              if c in rows and summary.feasible(rows[c], budget_cpus)]
    return {p: max((load for cpus, load in served if cpus <= p),
                   default=None) for p in cpu_counts}


def gain(ufo, other):
    """Mean and max of UFO's MAL over ``other``'s, in %, where both exist."""
    ratios = [100.0 * (ufo[p] - other[p]) / other[p]
              for p in ufo if ufo[p] and other.get(p)]
    if not ratios:
        return None, None
    return sum(ratios) / len(ratios), max(ratios)
