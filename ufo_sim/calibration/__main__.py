"""python -m ufo_sim.calibration {figures,maxload}.

``figures`` runs every §3 sweep, writes the PNGs and calibration.json to
``--out`` (default doc/source/_static/sim) and prints the numbers the
calibration page quotes; ``maxload`` re-measures each profile's max_rps.
"""

import argparse
import json
import os
import time

import numpy as np

from ufo_sim.calibration import report
from ufo_sim.calibration import scenarios
from ufo_sim import profiles


def _summary(res):
    lines = []
    for p in profiles.LC_PROFILES:
        r = res[p.name]
        for n, c in sorted(r['sf'].items()):
            lines.append('%-9s sf  %d pCPUs: knee %3.0f%%  SF peak %3.0f%%'
                         % (p.name, n, c['knee'] * 100, c['sf_peak'] * 100))
        for g in report.sf_gaps(r['sf']):
            lines.append('%-9s sf  %d->%d pCPUs: gap > 30%% from load %3.0f%%,'
                         ' knee %3.0f%%, gap at knee %4.0f%%'
                         % ((p.name,) + g['pcpus'] +
                            (g['first_load'] * 100, g['knee'] * 100,
                             g['gap_at_knee'] * 100)))
        iso = r['isolation']
        for mode in scenarios.MODES:
            m = iso[mode]
            lines.append(
                '%-9s %-9s max load %3.0f%%; at %2.0f%%: vCPU switch-ins'
                ' %6.0f/s  host switches %6.0f/s  vCPU delay %7.1f ms/s'
                % (p.name, mode, m['max_load'] * 100, m['at_load'] * 100,
                   m['vcpu_switches'], m['host_ctxsw'], m['vcpu_wait_ms']))
        e = r['emulator']
        lines.append('%-9s emulator shared max %3.0f%%  isolated max %3.0f%%'
                     % (p.name, e['shared']['max_load'] * 100,
                        e['isolated']['max_load'] * 100))
        for s in e['share']:
            lines.append('%-9s emulator CPU at %2.0f%%: %4.1f%% of vCPU '
                         'threads, %4.1f%% of guest busy'
                         % (p.name, s['load'] * 100,
                            s['emulator_per_vcpu'] * 100,
                            s['emulator_per_guest'] * 100))
    for mode, b in res['be'].items():
        lines.append('be        %-9s throughput %.3f  emulator %.2f%%'
                     % (mode, b['throughput'], b['emulator_per_vcpu'] * 100))
    return lines


def figures(args):
    from ufo_sim.calibration import figures as figs

    t0 = time.process_time()
    res = report.all_results(args.seconds)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, 'calibration.json'), 'w') as f:
        json.dump(res, f, indent=1, sort_keys=True, default=float)
    for path in figs.draw_all(res, args.out):
        print('wrote', path)
    print('\n'.join(_summary(res)))
    print('simulation CPU: %.1f s' % (time.process_time() - t0))


def maxload(args):
    for p in profiles.LC_PROFILES:
        loads = [scenarios.max_load(p, seconds=8.0, seed=s)
                 for s in (1, 2, 3)]
        print('%-9s max_rps %7.0f (seeds: %s; profile says %.0f)'
              % (p.name, np.mean(loads),
                 ', '.join('%.0f' % x for x in loads), p.max_rps))


def main(argv=None):
    parser = argparse.ArgumentParser(prog='python -m ufo_sim.calibration')
    sub = parser.add_subparsers(dest='cmd', required=True)
    f = sub.add_parser('figures', help='run the §3 sweeps, draw them')
    f.add_argument('--out', default=os.path.join('doc', 'source', '_static',
                                                 'sim'))
    f.add_argument('--seconds', type=float, default=4.0,
                   help='measured simulated seconds per point')
    f.set_defaults(func=figures)
    m = sub.add_parser('maxload', help="re-measure the profiles' max_rps")
    m.set_defaults(func=maxload)
    args = parser.parse_args(argv)
    args.func(args)


if __name__ == '__main__':
    main()
