"""Sweeps over the §3 scenarios, reduced to the numbers the doc quotes."""

import math

import numpy as np

from ufo_sim.calibration import scenarios
from ufo_sim import profiles

# Fractions of max_rps swept for the load curves.
LOADS = tuple(round(x, 2) for x in np.arange(0.05, 1.21, 0.05))
PCPUS = (2, 4, 6, 8)
# §3.2 ran each application at its Default max load: 60k/350k, 50k/120k
# and 20k/50k of the max load.
PAPER_DEFAULT_LOAD = {'memcached': 60 / 350, 'nginx': 50 / 120,
                      'mysql': 20 / 50}


def qos_cross(points, qos):
    """Load at which a p99 curve crosses ``qos`` (the paper's cross point).

    ``points`` yields ``(load, p99)`` by rising load and is read only up
    to the first p99 above ``qos``. The cross is on the straight line
    from the point before to that one, as read off a plotted curve, so
    a small change of the curve does not move it by a whole load step.
    0 when the first point misses; the last load when none does.
    """
    last = None
    for load, p99 in points:
        if p99 > qos:
            if last is None:
                return 0.0
            met_load, met_p99 = last
            if not math.isfinite(p99):
                return met_load
            return met_load + (load - met_load) * (
                (qos - met_p99) / (p99 - met_p99))
        last = load, p99
    return last[0] if last else 0.0


def _last_met(loads, p99, qos):
    """Highest swept load before p99 first exceeds qos.

    An SF curve's knee: its gap to the next CPU count is read there.
    """
    best = 0.0
    for load, value in zip(loads, p99):
        if value > qos:
            break
        best = load
    return best


def sf_curves(profile, seconds=4.0, loads=LOADS, pcpus=PCPUS):
    """Fig. 4 / 18: host-aware isolation on 2-8 CPUs, load swept."""
    out = {}
    for n in pcpus:
        ws = [scenarios.dedicated(profile, n, profile.max_rps * f, seconds)
              for f in loads]
        p99 = [w.p99_us for w in ws]
        sf = [w.guest_sf for w in ws]
        out[n] = dict(
            loads=list(loads), p99_us=p99, guest_sf=sf,
            guest_util=[w.guest_util for w in ws],
            runtime_per_schedule_us=[w.runtime_per_schedule_us for w in ws],
            knee=_last_met(loads, p99, profile.qos_p99_us),
            sf_peak=loads[int(np.argmax(sf))])
    return out


def sf_gap(sf_low, sf_high):
    """The paper's SF difference between two CPU counts (§4.5, slides).

    ``(SF[c+2] - SF[c]) / SF[c+2]``: how far SF falls with two CPUs
    fewer, as a share of the larger count's. UFO's rule grows past ``c``
    when it exceeds ``sf_threshold`` (the controller's
    ``SF(c)/SF(c+1) < 1 - sf_threshold``).
    """
    return 1.0 - sf_low / sf_high if sf_high else 0.0


def sf_gaps(curves, threshold=0.3):
    """UFO's rule (§4.5) on the curves: where SF falls by over 30%.

    For each adjacent pair of CPU counts: the first swept load at which
    :func:`sf_gap` passes ``threshold``, the knee of the smaller count,
    and the gap at that knee (the paper measures 30, 29 and 27% there
    for Memcached on 2/4/6 against 4/6/8 pCPUs).
    """
    out = []
    counts = sorted(curves)
    for a, b in zip(counts, counts[1:]):
        ca, cb = curves[a], curves[b]
        gaps = [sf_gap(sa, sb)
                for sa, sb in zip(ca['guest_sf'], cb['guest_sf'])]
        first = next((f for f, g in zip(ca['loads'], gaps) if g > threshold),
                     None)
        at_knee = gaps[ca['loads'].index(ca['knee'])] if ca['knee'] else None
        out.append(dict(pcpus=(a, b), first_load=first, knee=ca['knee'],
                        gap_at_knee=at_knee))
    return out


# Where sf_rule_vs_knee starts its 1-point sweep, per smaller CPU count:
# 5-10 points below the knees of the 5-point sweep.
SF_RULE_FROM = {2: 0.15, 4: 0.40, 6: 0.65}
SF_RULE_STEP = 0.01
SF_RULE_POINTS = 30


def sf_rule_vs_knee(profile, low, high, seeds, seconds=4.0,
                    threshold=0.3, host_options=()):
    """Where UFO's SF rule fires against the QoS knee, in 1-point steps.

    Sweeps load upward from ``SF_RULE_FROM[low]`` on ``low`` and
    ``high`` CPUs (host-aware isolation) until both are found: the first
    load at which :func:`sf_gap` passes ``threshold`` (the rule grows
    past ``low``) and the knee (the last load before ``low``'s p99 first
    misses QoS). Each load runs once per seed of ``seeds``; p99 and SF
    are the means over the runs.
    Returns ``dict(fires=, knee=, gap_at_knee=)``, loads as fractions of
    max load; None for one not found in the sweep.
    """
    seeds = list(seeds)
    if not seeds:
        raise ValueError('sf_rule_vs_knee needs at least one seed')

    def mean_of(pcpus, rps):
        ws = [scenarios.dedicated(profile, pcpus, rps, seconds, s,
                                  host_options=host_options) for s in seeds]
        return (float(np.mean([w.p99_us for w in ws])),
                float(np.mean([w.guest_sf for w in ws])))

    fires = knee = None
    gaps = {}
    for i in range(SF_RULE_POINTS):
        load = round(SF_RULE_FROM[low] + SF_RULE_STEP * i, 2)
        rps = profile.max_rps * load
        p99_low, sf_low = mean_of(low, rps)
        sf_high = mean_of(high, rps)[1]
        gaps[load] = sf_gap(sf_low, sf_high)
        if fires is None and gaps[load] > threshold:
            fires = load
        if knee is None and p99_low > profile.qos_p99_us:
            knee = round(load - SF_RULE_STEP, 2)
        if fires is not None and knee is not None:
            break
    return dict(fires=fires, knee=knee, gap_at_knee=gaps.get(knee))


# The paper's talk slides fit Memcached's guest SF on 8 pCPUs as
# -1.837 x^2 + 860.2 x + 4713 (x in thousands of requests per second;
# its max load under QoS is 350k).
SLIDES_SF_8 = (-1.837, 860.2, 4713.0)
SLIDES_MAX_KRPS = 350.0
SF_PEAK_STEP = 0.025
SF_PEAK_TOP = {2: 0.4, 4: 0.7, 6: 0.95, 8: 1.1}


def slides_sf_peak():
    """(peak load, SF at the max load / SF at the peak) of the slides' fit.

    The load is a fraction of the max load under QoS.
    """
    a, b, c = SLIDES_SF_8
    peak = -b / (2 * a)

    def sf(x):
        return a * x * x + b * x + c
    return peak / SLIDES_MAX_KRPS, sf(SLIDES_MAX_KRPS) / sf(peak)


def sf_peak_vs_knee(profile, pcpus, seeds, seconds=4.0, host_options=()):
    """Where guest SF peaks on ``pcpus`` dedicated CPUs, against the knee.

    Sweeps load in ``SF_PEAK_STEP`` steps up to ``SF_PEAK_TOP[pcpus]``
    of max load (past the knee); each load runs once per seed and p99
    and SF are the means. Returns ``dict(peak=, knee=, ratio=)``: the
    load of the highest SF, the last load before p99 first misses QoS
    (None if the first does), and SF there as a share of the peak's.
    """
    seeds = list(seeds)
    if not seeds:
        raise ValueError('sf_peak_vs_knee needs at least one seed')
    points = []
    for i in range(1, int(round(SF_PEAK_TOP[pcpus] / SF_PEAK_STEP)) + 1):
        load = round(SF_PEAK_STEP * i, 3)
        ws = [scenarios.dedicated(profile, pcpus, profile.max_rps * load,
                                  seconds, s, host_options=host_options)
              for s in seeds]
        points.append((load, float(np.mean([w.guest_sf for w in ws])),
                       float(np.mean([w.p99_us for w in ws]))))
    loads, sf, p99 = zip(*points)
    peak = int(np.argmax(sf))
    knee = _last_met(loads, p99, profile.qos_p99_us) or None
    return dict(peak=loads[peak], knee=knee,
                ratio=knee and sf[loads.index(knee)] / sf[peak])


def isolation_modes(profile, seconds=4.0, loads=LOADS):
    """Fig. 2 / 3: four VMs under default, isolation, host-aware."""
    paper_load = PAPER_DEFAULT_LOAD[profile.name]
    out = {}
    for mode in scenarios.MODES:
        p99 = []
        for f in loads:
            ws = scenarios.four_vms(profile, profile.max_rps * f, mode,
                                    seconds)
            p99.append(scenarios.geomean([w.p99_us for w in ws]))
        ws = scenarios.four_vms(profile, profile.max_rps * paper_load,
                                mode, seconds)
        out[mode] = dict(
            loads=list(loads), p99_us=p99,
            max_load=qos_cross(zip(loads, p99), profile.qos_p99_us),
            at_load=paper_load,
            vcpu_switches=float(np.mean([w.vcpu_switches for w in ws])),
            host_ctxsw=float(np.mean([w.host_ctxsw for w in ws])),
            vcpu_wait_ms=float(np.mean([w.vcpu_wait_ms for w in ws])),
            guest_sf=float(np.mean([w.guest_sf for w in ws])))
    return out


def emulator_modes(profile, seconds=4.0, loads=LOADS):
    """Fig. 5 and 7: emulator threads shared with vCPUs or isolated."""
    out = {}
    for name, isolated in (('shared', False), ('isolated', True)):
        ws = [scenarios.emulator_placement(profile, profile.max_rps * f,
                                           isolated, seconds)
              for f in loads]
        p99 = [w.p99_us for w in ws]
        out[name] = dict(loads=list(loads), p99_us=p99,
                         max_load=qos_cross(zip(loads, p99),
                                            profile.qos_p99_us))
    share = []
    for f in (0.2, 0.5, 0.8):
        w = scenarios.dedicated(profile, 8, profile.max_rps * f, seconds)
        share.append(dict(load=f, emulator_per_vcpu=w.emulator_util /
                          w.vcpu_util,
                          emulator_per_guest_time=w.emulator_util /
                          w.vcpu_guest_util,
                          emulator_per_guest=w.emulator_util / w.guest_util))
    out['share'] = share
    return out


def be_modes(seconds=10.0):
    """§3.5 and Fig. 7b: BE throughput per mode, emulator share."""
    res = scenarios.be_modes(seconds)
    base = sum(w.done for w in res['default'])
    out = {}
    for mode, ws in res.items():
        out[mode] = dict(
            throughput=sum(w.done for w in ws) / base,
            emulator_per_vcpu=sum(w.emulator_util for w in ws) /
            sum(w.vcpu_util for w in ws),
            vcpu_switches=float(np.mean([w.vcpu_switches for w in ws])),
            guest_sf=float(np.mean([w.guest_sf for w in ws])))
    return out


def all_results(seconds=4.0):
    """Every sweep, keyed by profile name (and 'be')."""
    res = {}
    for p in profiles.LC_PROFILES:
        res[p.name] = dict(sf=sf_curves(p, seconds),
                           isolation=isolation_modes(p, seconds),
                           emulator=emulator_modes(p, seconds))
    res['be'] = be_modes()
    return res
