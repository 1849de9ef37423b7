"""The demo's record: one row per second from ufo-agent's /status.

Pure: rows in, a summary out, so that it can be tested without guests.
"""

import collections
import dataclasses
import re
import statistics

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

    def summary(self):
        """Per phase and guest: means of cores, vCPUs online, util, p99."""
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
                guests[name] = {
                    'cores': statistics.fmean(v['cores'] for v in seen),
                    'online_vcpus': statistics.fmean(
                        v['online_vcpus'] for v in seen),
                    'util': statistics.fmean(v['util'] for v in seen),
                    'parked_pct': 100.0 * sum(
                        v['mode'] == 'idle' for v in seen) / len(seen),
                    'p99_ms': statistics.median(p99) / 1000.0
                    if p99 else None,
                }
            phases.append({
                'phase': phase, 'seconds': len(rows),
                'guests': guests,
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
            'vcpu_core_seconds': sum(
                r.pools.get('vcpu_cores', 0) for r in self.rows),
            'tick_ms_median': statistics.median(ticks) if ticks else 0.0,
            'tick_ms_max': max(ticks) if ticks else 0.0,
            'phases': phases,
        }


def format_summary(summary, decisions):
    """A short text summary; ``decisions`` counts actions in the log."""
    out = ['UFO demo: %d s, %d guest vCPUs on %d managed cores (%.1fx '
           'oversubscribed)' % (summary['seconds'], summary['guest_vcpus'],
                                summary['managed_cores'],
                                summary['guest_vcpus'] /
                                max(1, summary['managed_cores']))]
    for phase in summary['phases']:
        out.append('phase %-11s %3d s  overloaded %3.0f%%  idle cores %.1f'
                   % (phase['phase'], phase['seconds'],
                      phase['overloaded_pct'], phase['idle_cores']))
        for name, g in sorted(phase['guests'].items()):
            out.append('  %-5s cores %.1f  vCPUs online %.1f  util %5.1f%%'
                       '  parked %3.0f%%  p99 %s' % (
                           name, g['cores'], g['online_vcpus'], g['util'],
                           g['parked_pct'],
                           '%.1f ms' % g['p99_ms'] if g['p99_ms']
                           is not None else '-'))
    out.append('decisions: ' + ', '.join(
        '%s %d' % kv for kv in sorted(decisions.items())))
    out.append('agent tick: median %.2f ms, max %.2f ms' % (
        summary['tick_ms_median'], summary['tick_ms_max']))
    return '\n'.join(out)
