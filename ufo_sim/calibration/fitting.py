"""How the mechanisms' parameters are set: random draws, ranked by rows.

Each configuration draws every chosen ``HostSpec`` field uniformly from
its range (physically plausible values; :doc:`sim-calibration` gives each
one's basis), runs calibration rows of :mod:`ufo_sim.calibration.targets`
with it, and is scored by how far its values lie outside the rows'
accepted intervals. Only the paper's characterization rows are looked at,
never a core manager's results: the controller is judged on the model
these draws set.

A range may also name a number field of an LC profile as
``PROFILE.FIELD`` (its working set, its lock, its costs per request:
:data:`ufo_sim.profiles.OPTION_FIELDS`). Profiles' ``max_rps`` stay as
they are across the draws, so a load means the same offered rate in
every configuration; the one chosen is then re-measured (``maxload``)
and checked whole (``check``).
"""

import dataclasses
import random

from ufo_sim.calibration import targets
from ufo_sim.engine import spec
from ufo_sim.experiments import parallel
from ufo_sim import profiles

# Searched fields and their ranges, in HostSpec units (simulated seconds).
RANGES = {
    'cache_refill': (spec.scaled(100e-6), spec.scaled(200e-6)),
    'cache_decay': (spec.scaled(60e-6), spec.scaled(200e-6)),
    'cold_slowdown': (2.0, 4.0),
    'cache_same_group': (0.03, 0.3),
    'emu_footprint': (0.2, 1.0),
    'emu_wakeup': (0.0, spec.scaled(2e-6)),
    'irq_inject': (spec.scaled(0.5e-6), spec.scaled(2e-6)),
    'smt_emu_slowdown': (1.5, 2.2),
}
# Every row but Fig. 12's (one to fourteen minutes each) and the other
# slow ones: left to check.
ROWS = tuple(t.id for t in targets.TARGETS
             if t.id not in targets.FIG12_ROWS.values() and
             t.id not in targets.SLOW_ROWS)
# A configuration's rows may take this long in one worker.
TIMEOUT = 900.0


def profile_fields():
    """``PROFILE.FIELD`` names a range may draw: the float fields."""
    return ['%s.%s' % (p.name, f) for p in profiles.LC_PROFILES
            for f in profiles.OPTION_FIELDS
            if isinstance(getattr(p, f), float)]


def parse_range(text):
    """``NAME=LOW:HIGH`` of a number field: (name, (low, high)).

    NAME is a float field of HostSpec or ``PROFILE.FIELD``
    (:func:`profile_fields`); each drawn value must parse as an option
    of its kind, so both bounds are checked as one.
    """
    name, sep, bounds = text.partition('=')
    low, colon, high = bounds.partition(':')
    try:
        values = (float(low), float(high)) if sep and colon else None
    except ValueError:
        values = None
    fields = [f for f in targets.host_option_fields()
              if isinstance(getattr(spec.HostSpec, f), float)]
    if name not in fields + profile_fields() or values is None or not \
            0 <= values[0] <= values[1]:
        raise ValueError('%r: expected NAME=LOW:HIGH, 0 <= LOW <= HIGH, '
                         'NAME a number field of HostSpec (%s) or '
                         'PROFILE.FIELD (%s)'
                         % (text, ', '.join(sorted(fields)),
                            ', '.join(profile_fields())))
    if '.' in name:
        for value in values:
            try:
                profiles.parse_option('%s=%r' % (name, value))
            except ValueError as exc:
                raise ValueError('%r: %s' % (text, exc)) from None
    return name, values


def draw(ranges, rng):
    """One configuration: each field uniform in its range."""
    return {name: rng.uniform(low, high)
            for name, (low, high) in sorted(ranges.items())}


def distance(values, bounds):
    """How far ``values`` lie outside ``bounds``, summed over the bounds.

    Each bound counts every value it checks (or their mean, or one) by
    its distance from the interval in widths of the interval
    (:meth:`targets.Bound.distance`); 0 when every value is inside.
    """
    return sum(b.distance(values) for b in bounds)


@dataclasses.dataclass
class Outcome:
    """One configuration's rows: values, passes and distance."""

    options: dict
    values: dict                # row id -> {name: value}
    passed: tuple               # row ids met
    distance: float

    def to_json(self):
        return targets.json_safe(dataclasses.asdict(self))


def measure(options, rows, seeds):
    """The :class:`Outcome` of ``rows`` with ``options``.

    Names with a dot are profile options, the others HostSpec fields.
    """
    chosen = [targets.target(r) for r in rows]
    host = {k: v for k, v in options.items() if '.' not in k}
    by_profile = {k: v for k, v in options.items() if '.' in k}
    results = targets.run(chosen, seeds, processes=1,
                          host_options=tuple(sorted(host.items())),
                          profile_options=tuple(sorted(by_profile.items())))
    return Outcome(
        options=dict(options),
        values={r.target.id: r.values for r in results},
        passed=tuple(r.target.id for r in results if r.passed),
        distance=sum(distance(r.values, r.target.bounds)
                     for r in results))


def _measure(task):
    return measure(*task)


def run(ranges=None, configurations=50, rows=ROWS, seeds=1, processes=2,
        draw_seed=1, include_defaults=True, on_outcome=None):
    """Measure ``configurations`` random draws; Outcomes, best first.

    The defaults (no option) are measured first when
    ``include_defaults``, as the baseline. ``on_outcome(outcome)`` is
    called as each configuration ends; one that fails or overruns is
    left out.
    """
    ranges = RANGES if ranges is None else ranges
    rng = random.Random(draw_seed)
    draws = ([{}] if include_defaults else []) + \
        [draw(ranges, rng) for _ in range(configurations)]
    tasks = [(options, tuple(rows), seeds) for options in draws]
    outcomes = []

    def done(index, status, value):
        if status == parallel.OK:
            outcomes.append(value)
            if on_outcome is not None:
                on_outcome(value)

    parallel.run(_measure, tasks, processes, TIMEOUT, on_result=done)
    return rank(outcomes)


def rank(outcomes):
    """Most rows met first, then the smallest distance."""
    return sorted(outcomes, key=lambda o: (-len(o.passed), o.distance))


def describe(outcome):
    """One line: rows met, distance, then each option."""
    options = ' '.join('%s=%.4g' % (k, v)
                       for k, v in sorted(outcome.options.items()))
    return '%2d rows met  distance %.3f  %s' % (
        len(outcome.passed), outcome.distance, options or '(defaults)')
