"""The cloud run's figures: density and LC violations over the day.

matplotlib (the ``plot`` extra) with the Agg backend, imported inside
the function, so the cloud runs without it. ``python -m
ufo_sim.cluster.plots RUN/cluster.json [...]`` draws the figure of
saved runs of one workload (``cluster-day.png`` beside the first, or
``--out``), for runs made without matplotlib or with ``--no-plots``.
"""

import argparse
import dataclasses
import json
import os
import sys


def _pyplot():
    import matplotlib
    matplotlib.use('Agg')
    from matplotlib import pyplot
    return pyplot


def smoothed(values, width):
    """Trailing mean over ``width`` points (fewer at the start)."""
    out, total = [], 0.0
    for i, v in enumerate(values):
        total += v
        if i >= width:
            total -= values[i - width]
        out.append(total / min(i + 1, width))
    return out


# A colour per policy kind and a line style per allocation ratio, so
# that a figure of every kind at every ratio tells each line apart.
_KIND_COLORS = {'default': 'tab:gray', 'dyniso': 'tab:purple',
                'ufo': 'tab:blue', 'ufo-sched': 'tab:green',
                'ufo-migrate': 'tab:orange'}
_OTHER_COLORS = ('tab:brown', 'tab:pink', 'tab:olive', 'tab:cyan')
_RATIO_STYLES = ('-', '--', ':', '-.')


def styles(names):
    """``{policy name: (colour, line style)}`` for ``kind@ratio`` names.

    Names of one kind share a colour and differ in style by their ratio
    (the lowest solid); two names never share both while there are at
    most four ratios of a kind.
    """
    kinds, ratios = {}, {}
    for name in names:
        kind, _, ratio = name.partition('@')
        kinds.setdefault(kind, None)
        ratios.setdefault(kind, set()).add(ratio)
    others = iter(_OTHER_COLORS * (1 + len(kinds)))
    colors = {k: _KIND_COLORS.get(k) or next(others) for k in kinds}
    out = {}
    for name in names:
        kind, _, ratio = name.partition('@')
        order = sorted(ratios[kind], key=_ratio_key)
        out[name] = (colors[kind],
                     _RATIO_STYLES[order.index(ratio) % len(_RATIO_STYLES)])
    return out


def _ratio_key(ratio):
    try:
        return (0, float(ratio))
    except ValueError:
        return (1, ratio)


def day(path, series_by_policy, title, smooth_s=900.0):
    """VMs hosted per host and LC VM-seconds in violation over time.

    Two panels sharing the time axis (hours): the top one each policy's
    VMs per host and, thin black, the VMs asking to be alive per host
    (the demand, the same for all); the bottom one the share of LC
    VM-seconds in violation, a trailing mean over ``smooth_s``, against
    the QoS budget. The warm-up is shaded.
    """
    from ufo_sim.cluster import metrics
    plt = _pyplot()
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(9, 7), sharex=True)
    demand_drawn = False
    warmup = 0.0
    style = styles(list(series_by_policy))
    for name, s in series_by_policy.items():
        hours = [t / 3600.0 for t in s.t]
        color, line = style[name]
        top.plot(hours, [h / s.hosts for h in s.hosted], label=name,
                 color=color, linestyle=line)
        if not demand_drawn:
            top.plot(hours, [d / s.hosts for d in s.demand], color='k',
                     linewidth=0.8, alpha=0.6, label='demand')
            demand_drawn = True
        width = max(1, int(round(smooth_s / s.step_s)))
        lc_s = [n * s.step_s for n in s.lc_hosted]
        share = [100.0 * v / n if n else 0.0
                 for v, n in zip(smoothed(s.lc_violation_s, width),
                                 smoothed(lc_s, width))]
        bottom.plot(hours, share, label=name, color=color, linestyle=line)
        warmup = s.warmup_s / 3600.0
    for ax in (top, bottom):
        ax.axvspan(0, warmup, color='0.9', zorder=0)
        ax.grid(alpha=0.3)
    bottom.axhline(100.0 * metrics.QOS_BUDGET, color='r', linestyle=':',
                   label='QoS budget')
    top.set_ylabel('VMs hosted per host')
    bottom.set_ylabel('LC VM-seconds in violation (%%, %.0f min mean)'
                      % (smooth_s / 60))
    bottom.set_xlabel('simulated hours (warm-up shaded)')
    top.legend(fontsize=7, ncol=3)
    bottom.legend(fontsize=7, ncol=3)
    top.set_title(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def redraw(json_paths, out=None):
    """Draw :func:`day` of saved ``cluster.json`` runs; the figure's path.

    The runs' policies share one figure: they must be of one workload
    and hosts, and no policy may be in two of them.
    """
    from ufo_sim.cluster import metrics
    fields = {f.name for f in dataclasses.fields(metrics.Series)}
    series, workloads = {}, set()
    for json_path in json_paths:
        with open(json_path) as f:
            saved = json.load(f)
        workloads.add(saved['workload'])
        for name, d in saved['series'].items():
            if name in series:
                raise ValueError('policy %s is in two runs' % name)
            series[name] = metrics.Series(**{k: v for k, v in d.items()
                                             if k in fields})
    if not series:
        raise ValueError('no policy\'s run in %s' % ', '.join(json_paths))
    hosts = {s.hosts for s in series.values()}
    if len(workloads) > 1 or len(hosts) > 1:
        raise ValueError('the runs are of other workloads or hosts: %s, '
                         '%s hosts' % (', '.join(sorted(workloads)),
                                       ', '.join(map(str, sorted(hosts)))))
    path = out or os.path.join(
        os.path.dirname(os.path.abspath(json_paths[0])), 'cluster-day.png')
    day(path, series, '%s, %d hosts' % (workloads.pop(), hosts.pop()))
    return path


def main(argv=None):
    parser = argparse.ArgumentParser(
        description='Draw the day figure of saved ufo-sim cluster runs.')
    parser.add_argument('runs', nargs='+', metavar='cluster.json',
                        help='runs of one workload, drawn on one figure')
    parser.add_argument('--out', help='the PNG to write (default: '
                        'cluster-day.png beside the first run)')
    args = parser.parse_args(argv)
    try:
        print(redraw(args.runs, args.out))
    except ImportError:
        sys.stderr.write('matplotlib is not installed (pip install '
                         'ufo-nova[plot])\n')
        return 1
    except (OSError, ValueError, KeyError, TypeError) as exc:
        runs = ', '.join(args.runs)
        sys.stderr.write('cannot draw %s: %s\n' % (runs, exc))
        return 1
    return 0


if __name__ == '__main__':
    sys.exit(main())
