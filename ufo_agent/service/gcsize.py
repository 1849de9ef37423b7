"""Size the garbage collector's young generation to the guests.

A tick makes a few objects per guest (its observation, report, rates,
sample) that live until the tick ends. Past a few hundred guests they
outgrow CPython's default young generation (700 objects) several times
a tick, and every collection they set off also walks older generations
in turn, up to every object of every guest: a cost per tick that grows
with the square of the guest count. A young generation that holds a
tick's objects leaves collections to the few objects that outlive it.
"""

import gc

# Tracked objects a tick allocates per guest and holds until it ends,
# with room to spare (about five at 500 guests).
OBJECTS_PER_GUEST = 20
# The interpreter's own threshold, the least the young generation gets.
_DEFAULT = gc.get_threshold()[0]


def young_generation(guests):
    """The young generation's threshold for ``guests`` guests."""
    return max(_DEFAULT, OBJECTS_PER_GUEST * guests)


def fit(guests):
    """Set the process's young generation for ``guests`` guests.

    Process-wide: the agent is the process. Older generations keep
    their thresholds.
    """
    threshold = young_generation(guests)
    current = gc.get_threshold()
    if current[0] != threshold:
        gc.set_threshold(threshold, *current[1:])
