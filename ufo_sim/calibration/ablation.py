"""Each sharing-cost mechanism's effect alone, on the calibration rows.

The model runs with none of the five mechanisms (the schedulers only),
with each one alone, and with all of them (the defaults); every
configuration is a set of ``HostSpec`` overrides and, where a mechanism
has a per-profile field, profile overrides, so any of them can be
reproduced with ``check --host-option`` and ``--profile-option``. The
profiles' max_rps stay as they are, so a load means the same offered
rate everywhere.
"""

import dataclasses

from ufo_sim.calibration import targets
from ufo_sim.engine import HostSpec
from ufo_sim import profiles

# What switches each mechanism off.
MECHANISMS = {
    'cache': (('cache_refill', 0.0),),
    'smt-by-type': (('smt_cross_slowdown', HostSpec.smt_slowdown),
                    ('smt_emu_slowdown', HostSpec.smt_slowdown),
                    ('smt_poll_slowdown', HostSpec.smt_slowdown)),
    'emulator-costs': (('emu_wakeup', 0.0), ('irq_inject', 0.0)),
    'guest-locks': (('guest_locks', False),),
    'linux-balancing': (('migration_cost', 0.0),
                        ('guest_migration_cost', 0.0)),
}
# ... and its per-profile fields, as (PROFILE.FIELD, value).
PROFILE_OFF = {
    'smt-by-type': tuple(('%s.smt_emu_sensitivity' % p.name, 1.0)
                         for p in profiles.LC_PROFILES),
}
# Fig. 12 DynIso costs minutes per configuration: left to ``check``.
ROWS = tuple(t.id for t in targets.TARGETS if t.id != 'fig12_dyniso_pct')


def configurations():
    """(name, host options, profile options): none, each alone, all."""
    def off(names):
        names = list(names)
        return (tuple(o for n in names for o in MECHANISMS[n]),
                tuple(o for n in names for o in PROFILE_OFF.get(n, ())))

    out = [('none',) + off(MECHANISMS)]
    for name in MECHANISMS:
        out.append(('only ' + name,)
                   + off(n for n in MECHANISMS if n != name))
    out.append(('all', (), ()))
    return out


@dataclasses.dataclass
class Ablation:
    """Per configuration, the :class:`targets.Result` of every row."""

    results: dict               # configuration name -> [Result]

    def to_json(self):
        return {name: {r.target.id: {'values': r.values, 'pass': r.passed}
                       for r in rs}
                for name, rs in self.results.items()}


def run(rows=ROWS, seeds=1, processes=2, progress=None):
    chosen = [targets.target(r) for r in rows]
    results = {}
    for name, host_options, profile_options in configurations():
        if progress is not None:
            progress.write('configuration: %s\n' % name)
        results[name] = targets.run(chosen, seeds, processes, host_options,
                                    progress=progress,
                                    profile_options=profile_options)
    return Ablation(results)


def table(ablation):
    """One line per row and configuration: the model values."""
    lines = []
    for name, results in ablation.results.items():
        for r in results:
            lines.append('%-22s %-26s %-4s %s'
                         % (name, r.target.id, 'PASS' if r.passed else
                            'FAIL', targets.model_text(r)))
    return lines
