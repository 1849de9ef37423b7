"""The demo's record: one row per second of each run, and its summary.

A row holds what the guests were given that second (in ``/status``'s
shape: the ufo-agent run reads it from the agent, the run without the
agent from libvirt, see :mod:`ufo_tools.demo.nova_view`), the p99
latency the LC guest's workload reported and the work the BE guest's
batch job reported.

Pure: rows in, a summary out, so that it can be tested without guests.
"""

import collections
import dataclasses
import re
import statistics
import textwrap

WL_LINE = re.compile(r'UFO-WL .*?p99_us=(\d+)')
DONE = re.compile(r'UFO-WL t=\S+ .*?done=(\d+)')


def p99_of(line):
    """The p99 latency (us) of a workload report line, or None."""
    m = WL_LINE.search(line)
    return int(m.group(1)) if m else None


def done_of(line):
    """Units of work (or requests) a workload report counts, or None."""
    m = DONE.search(line)
    return int(m.group(1)) if m else None


@dataclasses.dataclass
class Row:
    t: float
    phase: str
    pools: dict
    vms: dict           # guest name -> dict of the /status fields used
    p99_us: dict        # guest name -> latest p99 (None: no workload)
    tick_ms: float
    # guest name -> units of batch work reported since the row before
    # (None: no batch job)
    work: dict = dataclasses.field(default_factory=dict)


FIELDS = ('mode', 'signal', 'cores', 'cpus', 'target_vcpus', 'online_vcpus',
          'util', 'sf', 'vcpus', 'idle_priority')


def _mean(values):
    values = [v for v in values if v is not None]
    return statistics.fmean(values) if values else None


def _rate(per_row):
    """Work per second of rows a second apart: None if none reported.

    A starved guest reports late, and one late report counts all the
    work since the one before: the sum over the rows is the work done,
    a row without a report is a second without work reported.
    """
    per_row = list(per_row)
    if all(v is None for v in per_row):
        return None
    return sum(v or 0 for v in per_row) / len(per_row)


class Timeline:
    def __init__(self, names):
        self.names = names          # uuid -> guest name
        self.rows = []
        # phase -> % of the host's CPUs busy outside the guests' QEMU
        # processes (ufo_tools.demo.hostload)
        self.outside = {}
        # pids of ufo-agents other than the demo's seen during the run
        self.other_agents = set()

    def add(self, t, phase, status, p99_us, work=None):
        vms = {}
        for vm in status.get('vms', []):
            name = self.names.get(vm['uuid'])
            if name:
                vms[name] = {k: vm.get(k) for k in FIELDS}
        self.rows.append(Row(t, phase, dict(status.get('pools', {})), vms,
                             dict(p99_us),
                             1000.0 * status.get('tick_seconds', 0.0),
                             dict(work or {})))

    def summary(self, qos_p99_ms):
        """Per phase and guest: cores, vCPUs online, util, p99, QoS, work.

        A guest's p99 in a phase is the median of its per-second p99s;
        it met the QoS target when that is at most ``qos_p99_ms``. Its
        work is the units its batch job reported over the phase, per
        second of the phase.
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
                    'work_per_s': _rate(r.work.get(name) for r in rows),
                    'idle_priority_pct': 100.0 * sum(
                        bool(v.get('idle_priority')) for v in seen) /
                    len(seen),
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
                'outside_cpu_pct': self.outside.get(phase),
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
            'outside_cpu_pct': _mean(self.outside.values()),
            'other_agents': sorted(self.other_agents),
            'tick_ms_median': statistics.median(ticks) if ticks else 0.0,
            'tick_ms_max': max(ticks) if ticks else 0.0,
            'phases': phases,
        }


def _p99_cell(g):
    if g is None or g['p99_ms'] is None:
        return '%10s  %-6s' % ('-', '')
    return '%7.1f ms  %-6s' % (g['p99_ms'],
                               'met' if g['qos_met'] else 'MISSED')


def _work(g):
    return None if g is None else g.get('work_per_s')


def _work_cell(g):
    work = _work(g)
    return '%7s' % ('-' if work is None else '%.0f' % work)


# One run's cell of a phase: lc's p99 and verdict, its cores, be's work.
CELL = '%s %5s  %s'


def _pct(part, whole):
    return 100.0 * part / whole if whole else 0.0


def run_work(summary, guest):
    """Mean units per second of ``guest``'s work over a run's phases."""
    return _mean(_work(p['guests'].get(guest)) for p in summary['phases'])


def qos_counts(summary, guest):
    """(phases ``guest`` met its QoS target in, phases it had load in)."""
    verdicts = [p['guests'][guest]['qos_met'] for p in summary['phases']
                if guest in p['guests'] and
                p['guests'][guest]['qos_met'] is not None]
    return sum(verdicts), len(verdicts)


def _word(before, after, lc):
    """What ufo-agent changed for ``lc`` in one phase (see difference)."""
    was = before['guests'].get(lc, {}).get('qos_met')
    now = after['guests'].get(lc, {}).get('qos_met')
    if was is None or now is None:
        return 'no-load'
    if now and not was:
        return 'better'
    if was and not now:
        return 'worse'
    return 'both-met' if now else 'both-missed'


def difference(nova, ufo, lc):
    """Per phase, what ufo-agent changed for ``lc``: a verdict word.

    ``better``: met with the agent, missed without; ``worse``: the other
    way round; ``both-met``, ``both-missed``; ``no-load``.
    """
    return {before['phase']: _word(before, after, lc)
            for before, after in zip(nova['phases'], ufo['phases'])}


def shows_difference(nova, ufo, lc):
    """True if ufo-agent made lc's QoS better and nowhere worse.

    Better: it met lc's target in a phase where Nova's pins missed it;
    worse: it missed it in one where they met it.
    """
    words = difference(nova, ufo, lc).values()
    return 'better' in words and 'worse' not in words


def _explain(phase, before, after, lc, be, managed):
    """One sentence on what the agent changed in one phase."""
    old, new = before['guests'].get(lc), after['guests'].get(lc)
    was, now = _work(before['guests'].get(be)), _work(after['guests'].get(be))
    if was and now is not None:
        kept = '; %s did %.0f units/s of work, %.0f %% of its %.0f without' \
            % (be, now, _pct(now, was), was)
    else:
        kept = ''
    cores = '%s on %.1f cores of its own (%.1f vCPUs online) instead of ' \
        'floating over %d' % (lc, new['cores'], new['online_vcpus'], managed)
    word = _word(before, after, lc)
    if word == 'no-load':
        return '%s: %s quiet, parked %.0f %% of the phase (%.1f cores)%s.' % (
            phase, lc, new['parked_pct'], new['cores'], kept)
    p99 = 'p99 %.1f ms with ufo-agent, %.1f ms without' % (
        new['p99_ms'], old['p99_ms'])
    text = {
        'better': 'ufo-agent met the target that Nova\'s pins missed',
        'worse': 'ufo-agent MISSED the target that Nova\'s pins met',
        'both-met': 'both met the target',
        'both-missed': 'both missed the target',
    }[word]
    return '%s: %s (%s), %s%s.' % (phase, text, p99, cores, kept)


def cautions(runs, nova_pins=None):
    """What makes a run not what it says: paragraphs, maybe none.

    ``nova_pins`` is (samples with Nova's pins, samples) of the run
    without the agent.
    """
    out = []
    for title, s in runs:
        if s.get('other_agents'):
            out.append('Caution: another ufo-agent ran on this host during '
                       'the run %s (pid %s). It manages every Nova guest '
                       'on the host, this demo\'s too: that run is not '
                       'what it says.' % (title, ', '.join(
                           str(p) for p in s['other_agents'])))
    if nova_pins is not None and nova_pins[0] < nova_pins[1]:
        out.append('Caution: the guests did not have Nova\'s pins in %d of '
                   'the %d samples of the run %s: something changed them.'
                   % (nova_pins[1] - nova_pins[0], nova_pins[1],
                      runs[0][0]))
    return out


def format_comparison(runs, qos_p99_ms, lc, be, loads, nova_pins=None):
    """Both runs side by side, phase by phase: a text table and verdict.

    ``runs`` is ``[(title, summary), ...]``, without ufo-agent first;
    both went through the same phases with the same guests. ``lc`` is
    the latency-critical guest, ``be`` the best-effort one, ``loads``
    maps a phase to a few words on lc's load; ``nova_pins`` see
    :func:`cautions`.
    """
    (t_nova, nova), (t_ufo, ufo) = runs
    managed = nova['managed_cores']
    out = ['UFO demo: %d guest vCPUs on %d cores (%.1fx oversubscribed), '
           '%d phases of %d s, run twice; QoS target of %s: p99 <= %g ms'
           % (nova['guest_vcpus'], managed,
              nova['guest_vcpus'] / max(1, managed), len(nova['phases']),
              nova['seconds'] // max(1, len(nova['phases'])), lc,
              qos_p99_ms), '']
    width = 34
    out.append('%-22s' % '' + ''.join('%-*s' % (width, title[:width - 2])
                                      for title, _ in runs))
    head = CELL % ('%10s  %-6s' % ('%s p99' % lc, 'QoS'), 'cores',
                   '%7s' % ('%s work' % be))
    out.append('%-10s%-12s' % ('phase', '%s load' % lc) + ''.join(
        '%-*s' % (width, head) for _ in runs))
    for before, after in zip(nova['phases'], ufo['phases']):
        cells = []
        for phase in before, after:
            g = phase['guests'].get(lc)
            cells.append('%-*s' % (width, CELL % (
                _p99_cell(g), '%.1f' % g['cores'] if g else '-',
                _work_cell(phase['guests'].get(be)))))
        out.append('%-10s%-12s' % (before['phase'],
                                   loads.get(before['phase'], '')) +
                   ''.join(cells))
    out.append('')
    out.extend(textwrap.wrap(
        '%s p99: the median of its workload\'s per-second p99 in the '
        'phase; cores: the cores %s\'s vCPUs may run on (without '
        'ufo-agent every guest floats over the whole shared set; with it, '
        '%s\'s vCPU pool); %s work: units of its batch job per second, '
        'its progress.' % (lc, lc, lc, be), 79))
    met = [qos_counts(s, lc) for _, s in runs]
    out.append('phases in which %s met its QoS target: %s' % (lc, ', '.join(
        '%s %d of %d' % (title, m, n) for (title, _), (m, n)
        in zip(runs, met))))
    work = [run_work(s, be) for _, s in runs]
    if None not in work:
        out.append('%s\'s work, mean over the phases: %s (%+.0f %%)' % (
            be, ', '.join('%s %.0f units/s' % (title, w)
                          for (title, _), w in zip(runs, work)),
            _pct(work[1] - work[0], work[0])))
    out.append('cores given to guests, summed over guests, per second: ' +
               ', '.join('%s %.1f' % (title, s['guest_core_seconds'] /
                                      max(1, s['seconds']))
                         for title, s in runs))
    if None not in (nova.get('outside_cpu_pct'), ufo.get('outside_cpu_pct')):
        out.append('host CPU busy outside the guests\' QEMU processes '
                   '(libvirtd, this demo, ufo-agent, anything else): ' +
                   ', '.join('%s %.0f %%' % (title, s['outside_cpu_pct'])
                             for title, s in runs))
    out.append('')
    out.append('What ufo-agent changed:')
    for before, after in zip(nova['phases'], ufo['phases']):
        out.extend(textwrap.wrap(
            _explain(before['phase'], before, after, lc, be, managed), 79,
            initial_indent='  ', subsequent_indent='    '))
    for text in cautions(runs, nova_pins) + [verdict(nova, ufo, lc, be)]:
        out.append('')
        out.extend(textwrap.wrap(text, 79))
    return '\n'.join(line.rstrip() for line in out)


# Host CPU busy outside the guests (percent) from which a run says its
# guests were slowed by something else on the machine.
BUSY_OUTSIDE_PCT = 25.0


def verdict(nova, ufo, lc, be):
    """One paragraph: did the difference show in this run, and why not."""
    words = difference(nova, ufo, lc)
    better = [p for p, w in words.items() if w == 'better']
    worse = [p for p, w in words.items() if w == 'worse']
    if shows_difference(nova, ufo, lc):
        was, now = run_work(nova, be), run_work(ufo, be)
        kept = (' while %s kept %.0f %% of its work' % (be, _pct(now, was))
                if was and now is not None else '')
        return ('In short: with ufo-agent %s met its QoS target in %s, '
                'where it missed it without%s, and missed it in no phase '
                'where it met it without.' % (lc, ', '.join(better), kept))
    if worse:
        text = 'In short: ufo-agent did not make %s\'s QoS better in this ' \
            'run: it missed the target in %s, where %s met it without ' \
            'it%s' % (lc, ', '.join(worse), lc,
                      (', and met it in %s' % ', '.join(better))
                      if better else '')
    else:
        text = 'In short: %s met or missed its QoS target in the same ' \
            'phases with and without ufo-agent in this run (%s)' % (
                lc, ', '.join('%s %s' % (p, w.replace('-', ' '))
                              for p, w in words.items() if w != 'no-load'))
    text += '.'
    outside = [s.get('outside_cpu_pct') for s in (nova, ufo)]
    if any(v is not None and v >= BUSY_OUTSIDE_PCT for v in outside):
        text += (' The host was busy outside the guests (%s of its CPUs): '
                 'under TCG a guest runs only as fast as the host CPU its '
                 'QEMU threads get, and ufo-agent sizes a guest by what '
                 'the guest measures, which lags behind when something '
                 'else takes that CPU. Run the demo on an otherwise idle '
                 'machine.' % ' and '.join('%.0f %%' % v for v in outside
                                           if v is not None))
    return text


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
