"""The cloud run's figures: density and LC violations over the day.

matplotlib (the ``plot`` extra) with the Agg backend, imported inside
the function, so the cloud runs without it.
"""


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


def day(path, series_by_policy, title, smooth_s=900.0):
    """VMs hosted per host and LC VM-seconds in violation over time.

    Two panels sharing the time axis (hours): the top one each policy's
    VMs per host and, dashed, the VMs asking to be alive per host (the
    demand, the same for all); the bottom one the share of LC
    VM-seconds in violation, a trailing mean over ``smooth_s``, against
    the QoS budget. The warm-up is shaded.
    """
    from ufo_sim.cluster import metrics
    plt = _pyplot()
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(9, 7), sharex=True)
    demand_drawn = False
    warmup = 0.0
    for name, s in series_by_policy.items():
        hours = [t / 3600.0 for t in s.t]
        top.plot(hours, [h / s.hosts for h in s.hosted], label=name)
        if not demand_drawn:
            top.plot(hours, [d / s.hosts for d in s.demand], 'k--',
                     linewidth=1, label='demand')
            demand_drawn = True
        width = max(1, int(round(smooth_s / s.step_s)))
        lc_s = [n * s.step_s for n in s.lc_hosted]
        share = [100.0 * v / n if n else 0.0
                 for v, n in zip(smoothed(s.lc_violation_s, width),
                                 smoothed(lc_s, width))]
        bottom.plot(hours, share, label=name)
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
