"""PNG figures of the calibration sweeps (needs the 'plot' extra)."""

import os

import matplotlib
matplotlib.use('Agg')
import matplotlib.pyplot as plt  # noqa: E402

from ufo_sim import profiles  # noqa: E402

MODE_LABEL = {'default': 'Default', 'isolation': 'Isolation',
              'hostaware': 'Host-aware isolation'}


def _save(fig, out_dir, name):
    path = os.path.join(out_dir, name)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


def sf_vs_load(res, out_dir):
    """Fig. 4 / 18: p99, guest sched frequency, runtime per schedule."""
    fig, axes = plt.subplots(3, 3, figsize=(12, 9))
    for row, p in zip(axes, profiles.LC_PROFILES):
        for n, c in sorted(res[p.name]['sf'].items(), key=lambda x: x[0]):
            x = [f * 100 for f in c['loads']]
            row[0].plot(x, [v / p.qos_p99_us for v in c['p99_us']],
                        marker='.', label='%s pCPUs' % n)
            row[1].plot(x, c['guest_sf'], marker='.')
            row[2].plot(x, c['runtime_per_schedule_us'], marker='.')
            for ax in row[:2]:
                ax.axvline(c['knee'] * 100, ls=':', lw=0.8,
                           color=row[1].lines[-1].get_color())
        row[0].axhline(1.0, color='k', ls='--', lw=0.8)
        row[0].set_ylim(0, 3)
        row[0].set_ylabel('%s\np99 / QoS' % p.name)
        row[1].set_ylabel('guest switches into a thread / s')
        row[2].set_ylabel('runtime per schedule (us)')
        row[2].set_yscale('log')
        row[0].legend(fontsize=8)
        for ax in row:
            ax.set_xlabel('load (% of max_rps)')
    return _save(fig, out_dir, 'sf_vs_load.png')


def isolation(res, out_dir):
    """Fig. 2 / 3: four VMs under Default, Isolation, Host-aware."""
    fig, axes = plt.subplots(2, 3, figsize=(12, 7))
    modes = list(MODE_LABEL)
    for ax, p in zip(axes[0], profiles.LC_PROFILES):
        for mode in modes:
            c = res[p.name]['isolation'][mode]
            ax.plot([f * 100 for f in c['loads']],
                    [v / p.qos_p99_us for v in c['p99_us']], marker='.',
                    label=MODE_LABEL[mode])
        ax.axhline(1.0, color='k', ls='--', lw=0.8)
        ax.set_ylim(0, 3)
        ax.set_title(p.name)
        ax.set_xlabel('load per VM (% of max_rps)')
        ax.set_ylabel('p99 / QoS (geomean of 4 VMs)')
    axes[0][0].legend(fontsize=8)
    metrics = (('vcpu_switches', 'vCPU thread switch-ins / s per VM'),
               ('host_ctxsw', 'host switches (all VM threads) / s'),
               ('vcpu_wait_ms', 'vCPU run delay (ms / s per VM)'))
    width = 0.27
    for ax, (field, label) in zip(axes[1], metrics):
        for i, mode in enumerate(modes):
            ys = [res[p.name]['isolation'][mode][field]
                  for p in profiles.LC_PROFILES]
            ax.bar([j + (i - 1) * width for j in range(3)], ys, width,
                   label=MODE_LABEL[mode])
        ax.set_xticks(range(3))
        ax.set_xticklabels([p.name for p in profiles.LC_PROFILES])
        ax.set_ylabel(label)
    axes[1][0].legend(fontsize=8)
    return _save(fig, out_dir, 'isolation.png')


def emulator(res, out_dir):
    """Fig. 5 and 7: emulator placement, emulator CPU share."""
    fig, axes = plt.subplots(1, 4, figsize=(15, 3.8))
    for ax, p in zip(axes, profiles.LC_PROFILES):
        for name in ('shared', 'isolated'):
            c = res[p.name]['emulator'][name]
            ax.plot([f * 100 for f in c['loads']],
                    [v / p.qos_p99_us for v in c['p99_us']], marker='.',
                    label=name)
        ax.axhline(1.0, color='k', ls='--', lw=0.8)
        ax.set_ylim(0, 3)
        ax.set_title(p.name)
        ax.set_xlabel('load (% of max_rps)')
        ax.set_ylabel('p99 / QoS')
        ax.legend(fontsize=8)
    names = [p.name for p in profiles.LC_PROFILES]
    per_vcpu = [res[n]['emulator']['share'][-1]['emulator_per_vcpu'] * 100
                for n in names]
    per_guest = [res[n]['emulator']['share'][-1]['emulator_per_guest'] * 100
                 for n in names]
    be = res['be']['default']['emulator_per_vcpu'] * 100
    ax = axes[3]
    ax.bar([i - 0.2 for i in range(4)], per_vcpu + [be], 0.4,
           label='of vCPU thread CPU')
    ax.bar([i + 0.2 for i in range(3)], per_guest, 0.4,
           label='of guest busy time')
    ax.axhspan(15, 50, color='grey', alpha=0.2, label='paper: 15-50%')
    ax.set_xticks(range(4))
    ax.set_xticklabels(names + ['BE'])
    ax.set_ylabel('emulator CPU (%), LC at 80% load')
    ax.legend(fontsize=8)
    return _save(fig, out_dir, 'emulator.png')


def be(res, out_dir):
    """§3.5: BE throughput under the three mechanisms."""
    fig, ax = plt.subplots(figsize=(4, 3))
    modes = list(MODE_LABEL)
    ax.bar(range(3), [res['be'][m]['throughput'] for m in modes])
    ax.set_xticks(range(3))
    ax.set_xticklabels(['D', 'I', 'H'])
    ax.set_ylim(0.8, 1.1)
    ax.set_ylabel('BE throughput vs Default')
    return _save(fig, out_dir, 'be.png')


def fig12(grids, paper_pct, out_dir):
    """Fig. 12: Default and DynIso heatmaps side by side.

    ``grids`` maps a manager to :func:`~ufo_sim.calibration.targets.
    fig12_grid`'s answer; cells meeting QoS show the CPUs held.
    """
    from ufo_sim.experiments import plots
    managers = [m for m in ('default', 'dyniso') if m in grids]
    first = grids[managers[0]]
    loads = first['loads']

    def value(manager, a, b):
        cpus = grids[manager]['cpus'][loads.index(a)][loads.index(b)]
        return cpus, cpus is not None

    path = os.path.join(out_dir, 'fig12.png')
    plots.heatmaps(path, 'Fig. 12 on the model: Memcached + Memcached, '
                   '%d pCPUs' % first['budget'], loads, managers, value,
                   first['budget'], paper_pct)
    return path


def draw_all(res, out_dir):
    """Every figure; returns the paths written."""
    os.makedirs(out_dir, exist_ok=True)
    return [f(res, out_dir) for f in (sf_vs_load, isolation, emulator, be)]


def ablation(ab, out_dir):
    """Each mechanism alone: every row's values per configuration.

    A bar is the mean of the row's values (apps, loads), the line through
    it their range; the grey band is the accepted interval.
    """
    names = list(ab.results)
    rows = [r.target for r in ab.results[names[0]]]
    cols = 3
    fig, axes = plt.subplots((len(rows) + cols - 1) // cols, cols,
                             figsize=(13, 3.2 * ((len(rows) + cols - 1) //
                                                 cols)))
    axes = list(axes.flat)
    for i, target in enumerate(rows):
        ax = axes[i]
        means, lows, highs = [], [], []
        for name in names:
            values = [v for v in next(
                r for r in ab.results[name]
                if r.target.id == target.id).values.values()]
            means.append(sum(values) / len(values))
            lows.append(min(values))
            highs.append(max(values))
        x = range(len(names))
        ax.bar(x, means, color=['#999999'] + ['#4c72b0'] *
               (len(names) - 2) + ['#dd8452'])
        ax.vlines(x, lows, highs, color='k', lw=1)
        bound = target.bounds[0]
        ax.axhspan(bound.low, bound.high, color='0.85', zorder=0)
        ax.set_title('%s (paper %s)' % (target.id, target.paper), fontsize=9)
        ax.set_xticks(list(x))
        ax.set_xticklabels(names, rotation=30, ha='right', fontsize=8)
    for ax in axes[len(rows):]:
        ax.axis('off')
    return _save(fig, out_dir, 'mechanisms.png')
