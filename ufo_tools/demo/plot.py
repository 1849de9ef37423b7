"""The demo's PNG: both runs side by side, one column each.

Rows: the cores given to the guests (without ufo-agent the shared set
every vCPU floats over; with it the pools), each guest's vCPUs online,
the LC guest's p99 latency on a log scale with the QoS target and each
phase's verdict, and the BE guest's work per second. Rows share their y
axis, so the columns compare at a glance.
"""

COLORS = {'lc': '#1f77b4', 'be': '#ff7f0e', 'idle': '#2ca02c',
          'emulator': '#9467bd', 'idle pool': '#c7c7c7',
          'shared set': '#bdbdbd', 'overloaded': '#d62728',
          'qos': '#d62728'}
# Drawn widest first, so lines that coincide all stay visible.
WIDTHS = (4.5, 2.8, 1.2)


def _series(rows, name, field, default=0.0):
    out = []
    for r in rows:
        vm = r.vms.get(name)
        value = vm.get(field) if vm else None
        out.append(default if value is None else value)
    return out


def _spans(t, rows, end):
    """[(phase, start, end)] in the order the phases ran."""
    spans = []
    for x, r in zip(t, rows):
        if not spans or spans[-1][0] != r.phase:
            if spans:
                spans[-1][2] = x
            spans.append([r.phase, x, end])
    return spans


def _pools(ax, t, rows, names):
    base = [0.0] * len(rows)
    layers = [(n, _series(rows, n, 'cores')) for n in names]
    layers.append(('emulator', [r.pools.get('emulator_cores', 0)
                                for r in rows]))
    layers.append(('idle pool', [r.pools.get('idle_cores', 0)
                                 for r in rows]))
    for label, values in layers:
        top = [b + v for b, v in zip(base, values)]
        ax.fill_between(t, base, top, step='post', label=label,
                        facecolor=COLORS[label], edgecolor='white', lw=0.8)
        base = top
    managed = max(r.pools.get('managed_cores', 0) for r in rows)
    # Overload as a strip above the stack, not a tint over it.
    over = [managed + 0.25 if r.pools.get('overloaded') else managed + 0.1
            for r in rows]
    ax.fill_between(t, managed + 0.1, over, step='post',
                    facecolor=COLORS['overloaded'], label='overloaded')


def _shared(ax, t, rows, names):
    cores = [r.pools.get('vcpu_cores', 0) for r in rows]
    vcpus = sum(v['vcpus'] for v in rows[-1].vms.values())
    ax.fill_between(t, 0, cores, step='post', facecolor=COLORS['shared set'],
                    edgecolor='white', hatch='//', label='shared set')
    ax.text(0.5, 0.45, 'all %d vCPUs of %s\nfloat over the whole shared set'
            % (vcpus, ', '.join(names)), transform=ax.transAxes,
            ha='center', va='center', fontsize=10,
            bbox=dict(facecolor='white', edgecolor='none', alpha=0.85))


def _p99(ax, t, rows, lc, qos_ms, summary, spans):
    values = [r.p99_us.get(lc) for r in rows]
    ax.plot([x for x, v in zip(t, values) if v is not None],
            [v / 1000.0 for v in values if v is not None], 'o',
            color=COLORS[lc], ms=3)
    ax.axhline(qos_ms, color=COLORS['qos'], ls='--', lw=1.2,
               label='QoS target (p99 %g ms)' % qos_ms)
    verdicts = {p['phase']: p['guests'].get(lc, {}).get('qos_met')
                for p in summary['phases']}
    for phase, start, end in spans:
        met = verdicts[phase]
        word = 'no load' if met is None else '%s %s' % (
            lc, 'met' if met else 'missed')
        ax.text((start + end) / 2.0, 0.97, word,
                transform=ax.get_xaxis_transform(), ha='center', va='top',
                fontsize=9, bbox=dict(facecolor='white', edgecolor='none',
                                      alpha=0.8, pad=1.5),
                color='black' if met is not False else COLORS['qos'])
    ax.set_yscale('log')


def _work(ax, t, rows, be, summary, spans):
    values = [r.work.get(be) for r in rows]
    ax.step([x for x, v in zip(t, values) if v is not None],
            [v for v in values if v is not None], where='post',
            color=COLORS[be], lw=2)
    means = {p['phase']: p['guests'].get(be, {}).get('work_per_s')
             for p in summary['phases']}
    for phase, start, end in spans:
        if means.get(phase) is not None:
            ax.text((start + end) / 2.0, 0.05, 'mean %.0f' % means[phase],
                    transform=ax.get_xaxis_transform(), ha='center',
                    va='bottom', fontsize=9,
                    bbox=dict(facecolor='white', edgecolor='none',
                              alpha=0.8, pad=1.5))


def _soak_note(ax, rows, be):
    soaked = [r for r in rows if (r.vms.get(be) or {}).get('idle_priority')]
    if soaked:
        ax.text(0.99, 0.97, '%s: no core of its own, runs at idle\n'
                'priority on every CPU (soak)' % be,
                transform=ax.transAxes, ha='right', va='top', fontsize=8,
                bbox=dict(facecolor='white', edgecolor='none', alpha=0.85))


def write_png(runs, path, qos_ms, lc, be, title=''):
    """``runs``: ``[(title, with_agent, timeline, summary), ...]``."""
    import matplotlib
    matplotlib.use('Agg')
    from matplotlib import lines as mlines
    from matplotlib import patches
    from matplotlib import pyplot
    from matplotlib import ticker

    if not runs or any(not tl.rows for _, _, tl, _ in runs):
        raise ValueError('nothing recorded')
    names = sorted(set(runs[0][2].names.values()))
    fig, axes = pyplot.subplots(
        4, len(runs), figsize=(7 * len(runs), 12), sharex='col',
        sharey='row', squeeze=False,
        gridspec_kw={'height_ratios': (1.3, 0.8, 1.6, 1.0)})
    top_cores = 0
    for col, (label, with_agent, tl, summary) in enumerate(runs):
        rows = tl.rows
        t0 = rows[0].t
        t = [r.t - t0 for r in rows]
        end = t[-1] + 1.0
        spans = _spans(t, rows, end)
        ax = axes[0][col]
        (_pools if with_agent else _shared)(ax, t, rows, names)
        if with_agent:
            _soak_note(ax, rows, be)
        top_cores = max(top_cores, max(r.pools.get('managed_cores', 0)
                                       for r in rows))
        ax.set_title(label, fontsize=12, pad=18)
        ax = axes[1][col]
        for n, width in zip(names, WIDTHS):
            ax.step(t, _series(rows, n, 'online_vcpus'), where='post',
                    color=COLORS[n], lw=width)
        _p99(axes[2][col], t, rows, lc, qos_ms, summary, spans)
        _work(axes[3][col], t, rows, be, summary, spans)
        axes[3][col].set_xlabel('seconds into the run')
        for i, (phase, start, stop) in enumerate(spans):
            for ax in axes[:, col]:
                if i % 2:
                    ax.axvspan(start, stop, color='black', alpha=0.04,
                               lw=0)
                ax.axvline(start, color='black', lw=0.6, ls=':')
            axes[0][col].text((start + stop) / 2.0, 1.01, phase,
                              transform=axes[0][col].get_xaxis_transform(),
                              ha='center', va='bottom', fontsize=9)
        axes[0][col].set_xlim(0, end)
    axes[0][0].set_ylim(0, top_cores + 0.35)
    axes[0][0].set_ylabel('cores given to guests')
    axes[1][0].set_ylabel('vCPUs online')
    axes[1][0].set_ylim(0, max(v['vcpus'] for _, _, tl, _ in runs
                               for r in tl.rows for v in r.vms.values())
                        + 0.5)
    axes[2][0].set_ylabel('%s p99 latency (ms)' % lc)
    axes[3][0].set_ylabel('%s work (units/s)' % be)
    axes[3][0].set_ylim(bottom=0)
    for ax in axes[0][0], axes[1][0]:
        ax.yaxis.set_major_locator(ticker.MaxNLocator(integer=True))
    handles = [mlines.Line2D([], [], color=COLORS[n], lw=3, label=n)
               for n in names]
    handles += [patches.Patch(facecolor=COLORS['shared set'], hatch='//',
                              label='shared set (no agent)'),
                patches.Patch(facecolor=COLORS['emulator'],
                              label='emulator pool'),
                patches.Patch(facecolor=COLORS['idle pool'],
                              label='idle pool'),
                patches.Patch(facecolor=COLORS['overloaded'],
                              label='agent reports overload'),
                mlines.Line2D([], [], color=COLORS['qos'], ls='--',
                              label='QoS target (p99 %g ms)' % qos_ms)]
    fig.legend(handles=handles, loc='upper center', ncol=len(handles),
               fontsize=9, frameon=False, bbox_to_anchor=(0.5, 0.955))
    if title:
        fig.suptitle(title, fontsize=13)
    fig.tight_layout(rect=(0, 0, 1, 0.93))
    fig.savefig(path, dpi=90)
    pyplot.close(fig)
