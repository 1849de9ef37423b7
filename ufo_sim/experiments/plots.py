"""PNG figures of the experiments (matplotlib, the ``plot`` extra).

matplotlib is imported inside the functions with the Agg backend, so
the simulator and its tests run without it or a display.
"""


def _pyplot():
    import matplotlib
    matplotlib.use('Agg')
    from matplotlib import pyplot
    return pyplot


MANAGER_LABELS = {'default': 'Default', 'dyniso': 'DynIso',
                  'static': 'Static pinning', 'ufo': 'UFO',
                  'ufo-host-only': 'UFO, host-only', 'oracle': 'Oracle',
                  'oracle-wide': 'Oracle, wide'}


def heatmaps(path, title, loads, managers, value, budget_cpus,
             paper_pct=None):
    """One heatmap per manager: CPUs needed per (VM1 load, VM2 load).

    ``value(manager, load1, load2)`` returns (cpus, QoS met). Cells
    missing QoS are brown with an x, as in the paper's Fig. 12; the title
    counts the cells met within ``budget_cpus``, next to the paper's
    count where ``paper_pct`` (manager -> %) has one.
    """
    plt = _pyplot()
    from matplotlib import colors
    n = len(loads)
    fig, axes = plt.subplots(1, len(managers),
                             figsize=(3.0 * len(managers) + 1, 3.9),
                             squeeze=False)
    cmap = plt.get_cmap('Blues')
    norm = colors.Normalize(vmin=0, vmax=budget_cpus + 4)
    for ax, manager in zip(axes[0], managers):
        feasible_count = 0
        for i, a in enumerate(loads):
            for j, b in enumerate(loads):
                cpus, ok = value(manager, a, b)
                if ok:
                    feasible_count += cpus <= budget_cpus
                    color = cmap(norm(cpus))
                    text = '%d' % cpus
                else:
                    color, text = '#8c564b', 'x'
                ax.add_patch(plt.Rectangle((j, i), 1, 1, color=color))
                ax.text(j + 0.5, i + 0.5, text, ha='center', va='center',
                        fontsize=7 if n > 5 else 9,
                        color='white' if not ok or cpus > budget_cpus * 0.6
                        else 'black')
        ax.set_xlim(0, n)
        ax.set_ylim(0, n)
        ticks = [k + 0.5 for k in range(n)]
        labels = ['%d' % round(100 * x) for x in loads]
        ax.set_xticks(ticks)
        ax.set_xticklabels(labels, fontsize=7)
        ax.set_yticks(ticks)
        ax.set_yticklabels(labels, fontsize=7)
        ax.set_xlabel('VM2 load (% of max)', fontsize=8)
        if manager == managers[0]:
            ax.set_ylabel('VM1 load (% of max)', fontsize=8)
        label = '%s: QoS in %d%% of cells' % (
            MANAGER_LABELS.get(manager, manager),
            round(100.0 * feasible_count / (n * n)))
        if paper_pct and manager in paper_pct:
            label += ' (paper %d%%)' % paper_pct[manager]
        ax.set_title(label, fontsize=9)
        ax.set_aspect('equal')
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def lines(path, title, xlabel, ylabel, series, hlines=()):
    """Line plot; ``series`` maps a label to (xs, ys)."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6, 3.4))
    for label, (xs, ys) in series.items():
        ys = [float('nan') if y is None else y for y in ys]
        ax.plot(xs, ys,
                marker='o', markersize=3, label=label)
    for y, label in hlines:
        ax.axhline(y, linestyle=':', color='grey', label=label)
    ax.set_xlabel(xlabel, fontsize=8)
    ax.set_ylabel(ylabel, fontsize=8)
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
