"""``ufo-status``: the pools and guests of the running ufo-agent."""

import argparse
import json
import sys
import urllib.error
import urllib.request


def fetch(url, timeout=5.0):
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return json.loads(response.read().decode())


NO_DATA = 'ufo-agent: no data yet (the agent has not completed a tick)'


def format_status(snap):
    if not snap:
        # The agent answers {} until its first tick.
        return NO_DATA
    pools = snap.get('pools', {})
    out = []
    out.append('ufo-agent: tick %d (%.1f ms)%s; cores saved: %d' % (
        snap.get('ticks', 0), 1000.0 * snap.get('tick_seconds', 0.0),
        ' DRY RUN' if snap.get('dry_run') else '',
        snap.get('cores_saved', 0)))
    if pools:
        out.append('pools: managed %d  vcpu %d  emulator %d (%.0f%% busy)  '
                   'idle %d%s' % (
                       pools['managed_cores'], pools['vcpu_cores'],
                       pools['emulator_cores'],
                       100.0 * pools['emulator_util'], pools['idle_cores'],
                       '  OVERLOADED (short %d cores)'
                       % pools['shortfall_cores']
                       if pools['overloaded'] else ''))
    header = ('NAME', 'UUID', 'MODE', 'SIGNAL', 'CORES', 'WANT', 'VCPUS',
              'UTIL%', 'SF/s', 'R2', 'NOTE')
    rows = [header]
    for vm in snap.get('vms', []):
        rows.append((
            vm['name'][:24], vm['uuid'][:8],
            vm['mode'] + (' (paused)' if vm.get('paused') else ''),
            vm['signal'],
            str(vm['cores']), str(vm['wanted_cores']),
            '%d/%d' % (vm['online_vcpus'], vm['vcpus']),
            '%.0f' % vm['util'], '%.0f' % vm['sf'],
            '-' if vm['r2'] is None else '%.2f' % vm['r2'],
            (vm['reason'] or vm['note'])[:60]))
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    for row in rows:
        out.append('  '.join(cell.ljust(w) for cell, w in
                             zip(row, widths)).rstrip())
    return '\n'.join(out)


def main(argv=None):
    parser = argparse.ArgumentParser(prog='ufo-status', description=__doc__)
    parser.add_argument('--url', default='http://127.0.0.1:9477/status',
                        help='status endpoint of the agent '
                             '([agent] metrics_host and metrics_port)')
    parser.add_argument('--json', action='store_true',
                        help='print the raw status as JSON')
    args = parser.parse_args(argv)
    try:
        snap = fetch(args.url)
    except (urllib.error.URLError, OSError, ValueError) as exc:
        print('ufo-status: cannot reach ufo-agent at %s: %s'
              % (args.url, exc), file=sys.stderr)
        return 1
    print(json.dumps(snap, indent=2, sort_keys=True) if args.json
          else format_status(snap))
    return 0


if __name__ == '__main__':
    sys.exit(main())
