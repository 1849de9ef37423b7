"""The demo's record: one row per second of each run, and its summary.

A row holds what the guests were given that second (in ``/status``'s
shape: the ufo-agent run reads it from the agent, the run without the
agent from libvirt, see :mod:`ufo_tools.demo.nova_view`) and the p99
latency each guest's workload reported.

Pure: rows in, a summary out, so that it can be tested without guests.
"""

import collections
import dataclasses
import re
import statistics
import textwrap

WL_LINE = re.compile(r'UFO-WL .*?p99_us=(\d+)')


def p99_of(line):
    """The p99 latency (us) of a workload report line, or None."""
    m = WL_LINE.search(line)
    return int(m.group(1)) if m else None


@dataclasses.dataclass
class Row:
    t: float
    phase: str
    pools: dict
    vms: dict           # guest name -> dict of the /status fields used
    p99_us: dict        # guest name -> latest p99 (None: no workload)
    tick_ms: float


FIELDS = ('mode', 'signal', 'cores', 'cpus', 'target_vcpus', 'online_vcpus',
          'util', 'sf', 'vcpus')


def _mean(values):
    values = [v for v in values if v is not None]
    return statistics.fmean(values) if values else None


class Timeline:
    def __init__(self, names):
        self.names = names          # uuid -> guest name
        self.rows = []

    def add(self, t, phase, status, p99_us):
        vms = {}
        for vm in status.get('vms', []):
            name = self.names.get(vm['uuid'])
            if name:
                vms[name] = {k: vm.get(k) for k in FIELDS}
        self.rows.append(Row(t, phase, dict(status.get('pools', {})), vms,
                             dict(p99_us),
                             1000.0 * status.get('tick_seconds', 0.0)))

    def summary(self, qos_p99_ms):
        """Per phase and guest: cores, vCPUs online, util, p99, QoS.

        A guest's p99 in a phase is the median of its per-second p99s;
        it met the QoS target when that is at most ``qos_p99_ms``.
        ``cores`` is what the guest may run on; ``cores_given`` what all
        guests' vCPUs may run on together (the vCPU pools, or the shared
        set they all float over).
        """
        by_phase = collections.OrderedDict()
        for row in self.rows:
            by_phase.setdefault(row.phase, []).append(row)
        phases = []
        for phase, rows in by_phase.items():
            guests = {}
            for name in sorted(set(self.names.values())):
                seen = [r.vms[name] for r in rows if name in r.vms]
                if not seen:
                    continue
                p99 = [r.p99_us[name] for r in rows
                       if r.p99_us.get(name) is not None]
                p99_ms = statistics.median(p99) / 1000.0 if p99 else None
                guests[name] = {
                    'cores': statistics.fmean(v['cores'] for v in seen),
                    'online_vcpus': statistics.fmean(
                        v['online_vcpus'] for v in seen),
                    'util': _mean(v['util'] for v in seen),
                    'parked_pct': 100.0 * sum(
                        v['mode'] == 'idle' for v in seen) / len(seen),
                    'p99_ms': p99_ms,
                    'qos_met': (p99_ms <= qos_p99_ms
                                if p99_ms is not None else None),
                    'qos_seconds_pct': (100.0 * sum(
                        v <= 1000.0 * qos_p99_ms for v in p99) / len(p99)
                        if p99 else None),
                }
            verdicts = [g['qos_met'] for g in guests.values()
                        if g['qos_met'] is not None]
            phases.append({
                'phase': phase, 'seconds': len(rows),
                'guests': guests,
                'cores_given': statistics.fmean(
                    r.pools.get('vcpu_cores', 0) for r in rows),
                'qos_met': all(verdicts) if verdicts else None,
                'overloaded_pct': 100.0 * sum(
                    bool(r.pools.get('overloaded')) for r in rows) /
                len(rows),
                'idle_cores': statistics.fmean(
                    r.pools.get('idle_cores', 0) for r in rows),
            })
        vcpus = sum(v['vcpus'] for v in (self.rows[-1].vms.values()
                                         if self.rows else []))
        ticks = [r.tick_ms for r in self.rows]
        managed = self.rows[-1].pools.get('managed_cores', 0) \
            if self.rows else 0
        return {
            'seconds': len(self.rows),
            'managed_cores': managed,
            'guest_vcpus': vcpus,
            'qos_p99_ms': qos_p99_ms,
            'vcpu_core_seconds': sum(
                r.pools.get('vcpu_cores', 0) for r in self.rows),
            # What each guest may run on, summed over guests.
            'guest_core_seconds': sum(
                v['cores'] for r in self.rows for v in r.vms.values()),
            'tick_ms_median': statistics.median(ticks) if ticks else 0.0,
            'tick_ms_max': max(ticks) if ticks else 0.0,
            'phases': phases,
        }


def _p99_cell(g):
    if g['p99_ms'] is None:
        return '%11s  %-6s' % ('-', '')
    return '%8.1f ms  %-6s' % (g['p99_ms'],
                               'met' if g['qos_met'] else 'MISSED')


def _verdict(phase):
    if phase['qos_met'] is None:
        return 'no load'
    return 'QoS met' if phase['qos_met'] else 'QoS MISSED'


def format_comparison(runs, qos_p99_ms):
    """Both runs side by side, phase by phase: a text table.

    ``runs`` is ``[(title, summary), ...]`` (without ufo-agent first);
    every run went through the same phases with the same guests.
    """
    first = runs[0][1]
    out = ['UFO demo: %d guest vCPUs on %d cores (%.1fx oversubscribed), '
           '%d phases of %d s, run %d times; QoS target: p99 <= %g ms'
           % (first['guest_vcpus'], first['managed_cores'],
              first['guest_vcpus'] / max(1, first['managed_cores']),
              len(first['phases']),
              first['seconds'] // max(1, len(first['phases'])), len(runs),
              qos_p99_ms), '']
    width = 33
    out.append('%-18s' % '' + ''.join('%-*s' % (width, title[:width - 2])
                                      for title, _ in runs))
    out.append('%-11s%-7s' % ('phase', 'guest') + ''.join(
        '%-*s' % (width, 'cores vCPUs         p99  QoS') for _ in runs))
    by_phase = [s['phases'] for _, s in runs]
    for phases in zip(*by_phase):
        name = phases[0]['phase']
        for i, guest in enumerate(sorted(phases[0]['guests'])):
            cells = []
            for phase in phases:
                g = phase['guests'].get(guest)
                cells.append('%-*s' % (width, '%5.1f %5.1f %s' % (
                    g['cores'], g['online_vcpus'], _p99_cell(g))
                    if g else '-'))
            out.append('%-11s%-7s' % (name if i == 0 else '', guest) +
                       ''.join(cells))
        out.append('%-11s%-7s' % ('', 'all') + ''.join(
            '%-*s' % (width, '%5.1f cores  %s'
                      % (p['cores_given'], _verdict(p)))
            for p in phases))
    out.append('')
    out.extend(textwrap.wrap(
        'cores: what a guest may run on (without ufo-agent every guest '
        'floats over the whole shared set; with it, its vCPU pool); all: '
        'the cores the guests\' vCPUs are given together. p99: the median '
        'of the workload\'s per-second p99 in the phase.', 79))
    out.append('cores given to guests, summed over guests, per second: ' +
               ', '.join('%s %.1f' % (title, s['guest_core_seconds'] /
                                      max(1, s['seconds']))
                         for title, s in runs))
    out.append('phases meeting the QoS target: ' + ', '.join(
        '%s %d of %d' % (title, sum(bool(p['qos_met'])
                                    for p in s['phases']),
                         sum(p['qos_met'] is not None
                             for p in s['phases']))
        for title, s in runs))
    return '\n'.join(line.rstrip() for line in out)


def format_agent(summary, decisions):
    """The ufo-agent run's own lines: overload, decisions, tick times."""
    out = ['ufo-agent overloaded: ' + ', '.join(
        '%s %.0f%%' % (p['phase'], p['overloaded_pct'])
        for p in summary['phases'])]
    out.append('decisions: ' + ', '.join(
        '%s %d' % kv for kv in sorted(decisions.items())))
    out.append('agent tick: median %.2f ms, max %.2f ms' % (
        summary['tick_ms_median'], summary['tick_ms_max']))
    return '\n'.join(out)
