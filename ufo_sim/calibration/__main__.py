"""python -m ufo_sim.calibration {figures,maxload,check,fit,...}.

``figures`` runs every §3 sweep, writes the PNGs and calibration.json to
``--out`` (default doc/source/_static/sim) and prints the numbers the
calibration page quotes; ``maxload`` re-measures each profile's max_rps;
``check`` measures the paper's values (:mod:`ufo_sim.calibration.
targets`) on the model, writes calibration-check.json (and fig12.png when
both Fig. 12 rows ran) to ``--out`` and exits 1 if a row misses;
``fit`` draws the mechanisms' parameters at random and ranks them by
those rows (:mod:`ufo_sim.calibration.fitting`).
"""

import argparse
import json
import os
import sys
import time

import numpy as np

from ufo_sim import arguments
from ufo_sim.calibration import report
from ufo_sim.calibration import scenarios
from ufo_sim.calibration import targets
from ufo_sim import profiles

OUT = os.path.join('doc', 'source', '_static', 'sim')


def _summary(res):
    lines = []
    for p in profiles.LC_PROFILES:
        r = res[p.name]
        for n, c in sorted(r['sf'].items()):
            lines.append('%-9s sf  %d pCPUs: knee %3.0f%%  SF peak %3.0f%%'
                         % (p.name, n, c['knee'] * 100, c['sf_peak'] * 100))
        lines.extend(_gap_line(p.name, g) for g in report.sf_gaps(r['sf']))
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


def sfrule(args):
    """Where the 30 % SF rule fires against the knee, 1-point steps."""
    for p in profiles.LC_PROFILES:
        for low, high in zip(report.PCPUS, report.PCPUS[1:]):
            rows = [report.sf_rule_vs_knee(p, low, high, [seed])
                    for seed in args.seeds]
            print('%-9s %d->%d pCPUs: rule fires at %s; knee %s; gap at '
                  'knee %s' % (
                      p.name, low, high,
                      '/'.join(_pct(r['fires']) for r in rows),
                      '/'.join(_pct(r['knee']) for r in rows),
                      '/'.join(_pct(r['gap_at_knee']) for r in rows)))


def sfpeak(args):
    """Where SF peaks against the knee per CPU count, and the slides'."""
    peak, ratio = report.slides_sf_peak()
    print('slides    8 pCPUs: SF peaks at %s of max load; at the max load '
          'it is %.2f of its peak' % (_pct(peak), ratio))
    for p in profiles.LC_PROFILES:
        for pcpus in report.PCPUS:
            r = report.sf_peak_vs_knee(p, pcpus, args.seeds)
            print('%-9s %d pCPUs: SF peaks at %s; knee %s; SF at the knee '
                  '%s of its peak' % (
                      p.name, pcpus, _pct(r['peak']), _pct(r['knee']),
                      '-' if r['ratio'] is None else '%.2f' % r['ratio']))


def _pct(value):
    return '-' if value is None else '%.0f%%' % (100 * value)


def _gap_line(name, gap):
    """One :func:`report.sf_gaps` entry; '-' where the sweep found none.

    MySQL's SF differs too little for the rule to fire at all on some
    counts (paper Appendix A.3).
    """
    return '%-9s sf  %d->%d pCPUs: gap > 30%% from load %s, knee %s, gap ' \
        'at knee %s' % ((name,) + tuple(gap['pcpus']) + (
            _pct(gap['first_load']), _pct(gap['knee']),
            _pct(gap['gap_at_knee'])))


def maxload(args):
    for p in profiles.LC_PROFILES:
        loads = [scenarios.max_load(p, seconds=8.0, seed=s)
                 for s in (1, 2, 3)]
        print('%-9s max_rps %7.0f (seeds: %s; profile says %.0f)'
              % (p.name, np.mean(loads),
                 ', '.join('%.0f' % x for x in loads), p.max_rps))


def check(args):
    chosen = [targets.target(i) for i in args.only] if args.only else \
        list(targets.TARGETS)
    options = tuple(args.host_option or ())
    by_profile = tuple(sorted(dict(args.profile_option or ()).items()))
    started = time.monotonic()
    results = targets.run(chosen, args.seeds, args.processes, options,
                          progress=sys.stderr, profile_options=by_profile)
    print('\n'.join(targets.format_table(results)))
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, 'calibration-check.json')
    with open(path, 'w') as f:
        json.dump(targets.to_json(results, args.seeds, args.processes,
                                  options, by_profile),
                  f, indent=1, sort_keys=True)
    print('wrote', path)
    # The heatmaps show seed 1's grids, whatever --seeds says.
    detail = {r.target.id: r.per_seed[0].detail for r in results}
    grids = {manager: detail[row]
             for manager, row in targets.FIG12_ROWS.items() if row in detail}
    if len(grids) == len(targets.FIG12_ROWS):
        from ufo_sim.calibration import figures as figs
        print('wrote', figs.fig12(grids, targets.PAPER_FIG12_PCT, args.out))
    passed = sum(r.passed for r in results)
    print('%d/%d rows pass; %.0f s wall, %.1f s CPU'
          % (passed, len(results), time.monotonic() - started,
             sum(r.cpu_seconds for r in results)))
    return 0 if passed == len(results) else 1


def ablation(args):
    from ufo_sim.calibration import ablation as abl
    ab = abl.run(seeds=args.seeds, processes=args.processes,
                 progress=sys.stderr)
    print('\n'.join(abl.table(ab)))
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, 'mechanisms.json')
    with open(path, 'w') as f:
        json.dump(targets.json_safe(ab.to_json()), f, indent=1,
                  sort_keys=True)
    print('wrote', path)
    from ufo_sim.calibration import figures as figs
    print('wrote', figs.ablation(ab, args.out))
    return 0


def fit(args):
    from ufo_sim.calibration import fitting
    ranges = dict(fitting.RANGES)
    ranges.update(dict(args.param or ()))
    rows = args.only or fitting.ROWS
    path = args.jsonl
    try:
        log = open(path, 'a')
    except OSError as exc:
        print('--jsonl %s: %s' % (path, exc.strerror), file=sys.stderr)
        return 2
    with log:
        def on_outcome(outcome):
            log.write(json.dumps(outcome.to_json(), sort_keys=True) + '\n')
            log.flush()
            sys.stderr.write(fitting.describe(outcome) + '\n')

        ranked = fitting.run(ranges, args.configurations, rows,
                             args.seeds, args.processes, args.draw_seed,
                             on_outcome=on_outcome)
    print('best %d of %d (rows met of %d, then distance from the '
          'accepted intervals):' % (min(args.top, len(ranked)),
                                    len(ranked), len(rows)))
    for outcome in ranked[:args.top]:
        print(fitting.describe(outcome))
    print('every configuration: %s' % path)
    return 0


def _range(text):
    from ufo_sim.calibration import fitting
    try:
        return fitting.parse_range(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc))


def _rows_and_seeds(parser, only_help):
    parser.add_argument('--only', type=targets.parse_only,
                        metavar='ID,...', help=only_help)
    parser.add_argument('--seeds', type=targets.positive_int, default=1,
                        help='run seeds 1..N; a value is the mean over '
                             'them')


def main(argv=None):
    parser = argparse.ArgumentParser(prog='python -m ufo_sim.calibration')
    sub = parser.add_subparsers(dest='cmd', required=True)
    f = sub.add_parser('figures', help='run the §3 sweeps, draw them')
    f.add_argument('--out', default=OUT)
    f.add_argument('--seconds', type=float, default=4.0,
                   help='measured simulated seconds per point')
    f.set_defaults(func=figures)
    r = sub.add_parser('sfrule', help='where the 30%% SF rule fires '
                       'against the QoS knee, in 1-point load steps')
    r.add_argument('--seeds', type=int, nargs='+', default=[1, 2, 3])
    r.set_defaults(func=sfrule)
    k = sub.add_parser('sfpeak', help='where guest SF peaks against the '
                       'QoS knee on 2-8 CPUs, beside the slides\' 8-pCPU '
                       'curve')
    k.add_argument('--seeds', type=int, nargs='+', default=[1, 1001, 2001])
    k.set_defaults(func=sfpeak)
    m = sub.add_parser('maxload', help="re-measure the profiles' max_rps")
    m.set_defaults(func=maxload)
    a = sub.add_parser('ablation', help='each sharing-cost mechanism '
                                        'alone, on the check rows')
    a.add_argument('--out', default=OUT)
    arguments.workers(a)
    a.add_argument('--seeds', type=targets.positive_int, default=1)
    a.set_defaults(func=ablation)
    c = sub.add_parser('check', help="the paper's values as checks")
    _rows_and_seeds(c, 'rows to run (default: all)')
    arguments.workers(c, 'local Ray workers for the Fig. 12 grids '
                      '(default 2)')
    c.add_argument('--host-option', type=targets.parse_host_option,
                   action='append', metavar='NAME=VALUE',
                   help='override a HostSpec field (repeatable; VALUE is '
                        'JSON), e.g. halt_poll=5e-3')
    c.add_argument('--profile-option', type=arguments.profile_option,
                   action='append', metavar='PROFILE.FIELD=VALUE',
                   help='override a field of one LC profile (repeatable; '
                        'VALUE is JSON), e.g. mysql.lock_share=0.2; '
                        "the profile's max_rps stays")
    c.add_argument('--out', default=OUT)
    c.set_defaults(func=check)
    s = sub.add_parser('fit', help="draw the mechanisms' parameters at "
                       'random, rank them by the check rows')
    s.add_argument('--configurations', type=targets.positive_int,
                   default=50, help='random draws (the defaults are '
                   'measured too, as the baseline)')
    s.add_argument('--param', type=_range, action='append',
                   metavar='NAME=LOW:HIGH',
                   help='draw this HostSpec field, or PROFILE.FIELD of '
                        'an LC profile, in this range, in its own units '
                        '(repeatable; adds to or replaces the default '
                        'ranges)')
    _rows_and_seeds(s, 'rows to score (default: all but Fig. 12)')
    arguments.workers(s, 'configurations measured at once (default 2)')
    s.add_argument('--draw-seed', type=int, default=1,
                   help='seed of the random draws')
    s.add_argument('--top', type=targets.positive_int, default=10,
                   help='configurations to print')
    s.add_argument('--jsonl', default='calibration-fit.jsonl',
                   help='file every configuration is appended to, one '
                        'JSON line each')
    s.set_defaults(func=fit)
    args = parser.parse_args(argv)
    arguments.use_workers(args)
    return args.func(args) or 0


if __name__ == '__main__':
    sys.exit(main())
