"""The demo's PNG: pools, cores, vCPUs, util, SF and latency over time."""

COLORS = {'lc-a': '#1f77b4', 'lc-b': '#ff7f0e', 'idle': '#2ca02c',
          'emulator': '#9467bd', 'idle pool': '#d9d9d9'}


def _series(rows, name, field, default=0.0):
    out = []
    for r in rows:
        vm = r.vms.get(name)
        value = vm.get(field) if vm else None
        out.append(default if value is None else value)
    return out


def write_png(timeline, path, title=''):
    import matplotlib
    matplotlib.use('Agg')
    from matplotlib import pyplot

    rows = timeline.rows
    if not rows:
        raise ValueError('nothing recorded')
    t0 = rows[0].t
    t = [r.t - t0 for r in rows]
    names = sorted(set(timeline.names.values()))
    fig, axes = pyplot.subplots(5, 1, figsize=(11, 13), sharex=True)

    # Pools, stacked: each guest's vCPU pool, the emulator pool, idle.
    ax = axes[0]
    base = [0.0] * len(rows)
    layers = [(n, _series(rows, n, 'cores')) for n in names]
    layers.append(('emulator', [r.pools.get('emulator_cores', 0)
                                for r in rows]))
    layers.append(('idle pool', [r.pools.get('idle_cores', 0)
                                 for r in rows]))
    for label, values in layers:
        top = [b + v for b, v in zip(base, values)]
        ax.fill_between(t, base, top, step='post', label=label,
                        color=COLORS.get(label), alpha=0.85)
        base = top
    over = [r.pools.get('overloaded') for r in rows]
    for i, flag in enumerate(over):
        if flag:
            ax.axvspan(t[i], t[i] + 1, color='red', alpha=0.08, lw=0)
    ax.set_ylabel('cores')
    ax.set_title('pools (red: overloaded)')
    ax.legend(loc='upper right', fontsize=8, ncol=5)

    plots = [
        (axes[1], 'online_vcpus', 'vCPUs online', None),
        (axes[2], 'util', 'guest util (%)', None),
        (axes[3], 'sf', 'sched. frequency (/s)', 'symlog'),
    ]
    for ax, field, label, scale in plots:
        for n in names:
            ax.step(t, _series(rows, n, field), where='post', label=n,
                    color=COLORS.get(n))
        ax.set_ylabel(label)
        if scale:
            ax.set_yscale(scale)
        ax.legend(loc='upper right', fontsize=8, ncol=3)
    ax = axes[4]
    for n in names:
        values = [r.p99_us.get(n) for r in rows]
        ax.plot([x for x, v in zip(t, values) if v is not None],
                [v / 1000.0 for v in values if v is not None], '.',
                label=n, color=COLORS.get(n), ms=3)
    ax.set_yscale('log')
    ax.set_ylabel('p99 latency (ms)')
    ax.set_xlabel('seconds')
    ax.legend(loc='upper right', fontsize=8, ncol=3)

    # Phase boundaries on every panel.
    last = None
    for x, r in zip(t, rows):
        if r.phase != last:
            for ax in axes:
                ax.axvline(x, color='black', lw=0.6, ls=':')
            axes[0].annotate(r.phase, (x, 1.0),
                             xycoords=('data', 'axes fraction'),
                             xytext=(2, 2), textcoords='offset points',
                             fontsize=8)
            last = r.phase
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    pyplot.close(fig)
