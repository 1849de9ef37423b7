"""``ufo-status``: the pools and guests of the running ufo-agent.

It reads the agent's own configuration file for the endpoint
(``[agent] metrics_host`` and ``metrics_port``), so it asks the agent that
configuration runs, wherever the operator put it.
"""

import ipaddress
import json
import sys
import urllib.error
import urllib.request

from oslo_config import cfg

from ufo_agent.conf import agent as agent_conf

DEFAULT_CONFIG_FILE = '/etc/ufo/ufo-agent.conf'

CLI_OPTS = [
    cfg.BoolOpt('json', default=False,
                help='Print the raw status as JSON.'),
]


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
    for row in snap.get('held') or ():
        # Cores no pool may take until libvirt answers for their guest.
        owner = ('the emulator threads of hung guests'
                 if row['owner'] == 'emulator' else 'guest ' + row['owner'])
        out.append('held: cores %s by %s (%s)' % (
            ','.join(str(c) for c in row['cores']), owner, row['reason']))
    # EMU%: the guest's emulator, I/O and vhost threads over the last
    # tick, in % of one CPU: the CPU its I/O costs outside its vCPUs.
    # LAT/TGT: the guest's published latency (us; "(stale)" or "rejected"
    # when the controller does not use it) over its flavor's target.
    header = ('NAME', 'UUID', 'MODE', 'SIGNAL', 'CORES', 'WANT', 'VCPUS',
              'UTIL%', 'EMU%', 'SF/s', 'R2', 'LAT/TGT(us)', 'NOTE')
    rows = [header]
    for vm in snap.get('vms', []):
        rows.append((
            vm['name'][:24], vm['uuid'][:8],
            vm['mode'] + (' (soak)' if vm.get('idle_priority') else '') +
            (' (paused)' if vm.get('paused') else ''),
            vm['signal'],
            str(vm['cores']), str(vm['wanted_cores']),
            '%d/%d' % (vm['online_vcpus'], vm['vcpus']),
            '%.0f' % vm['util'], '%.0f' % vm.get('emulator_pct', 0.0),
            '%.0f' % vm['sf'],
            '-' if vm['r2'] is None else '%.2f' % vm['r2'],
            _latency(vm),
            (vm['reason'] or vm['note'])[:60]))
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    for row in rows:
        out.append('  '.join(cell.ljust(w) for cell, w in
                             zip(row, widths)).rstrip())
    return '\n'.join(out)


def _latency(vm):
    """The LAT/TGT cell; an agent that predates them has neither."""
    state = vm.get('latency_state') or 'absent'
    value = vm.get('latency_us')
    if state == 'rejected':
        lat = 'rejected'
    elif value is None:
        lat = '-'
    else:
        lat = '%.0f%s' % (value, '' if state == 'fresh' else '(stale)')
    target = vm.get('latency_target_us')
    if target is None:
        return lat
    return '%s/%d@p%g' % (lat, target, vm.get('latency_percentile') or 99)


def endpoint(conf):
    """The status URL of the agent that ``conf`` configures, or None."""
    host = conf.agent.metrics_host
    port = conf.agent.metrics_port
    if not port:
        return None
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        address = None                  # a host name
    if address is not None and address.is_unspecified:
        # Listening on every address: the local one answers.
        host = '::1' if address.version == 6 else '127.0.0.1'
        address = ipaddress.ip_address(host)
    if address is not None and address.version == 6:
        host = '[%s]' % host
    return 'http://%s:%d/status' % (host, port)


def _config_files(conf):
    return ', '.join(conf.config_file or []) or 'no configuration file'


def make_conf():
    """The agent's [agent] options, in a ConfigOpts of ufo-status's own.

    The group is registered by name, not as the agent's OptGroup object,
    which keeps its options' overrides and would share them.
    """
    conf = cfg.ConfigOpts()
    conf.register_opts(agent_conf.OPTS, group=agent_conf.GROUP.name)
    return conf


def main(argv=None):
    conf = make_conf()
    conf.register_cli_opts(CLI_OPTS)
    try:
        conf(argv if argv is not None else sys.argv[1:],
             project='ufo-agent', prog='ufo-status',
             description='The pools and guests of the running ufo-agent, '
                         'from the endpoint its configuration file names '
                         '([agent] metrics_host and metrics_port).',
             default_config_files=[DEFAULT_CONFIG_FILE])
        url = endpoint(conf)
    except cfg.ConfigFilesNotFoundError as exc:
        print('ufo-status: %s; name the agent\'s configuration with '
              '--config-file' % exc, file=sys.stderr)
        return 2
    except cfg.Error as exc:
        print('ufo-status: %s' % exc, file=sys.stderr)
        return 2
    if url is None:
        print('ufo-status: [agent] metrics_port is 0 in %s: the agent '
              'serves no status' % _config_files(conf), file=sys.stderr)
        return 1
    try:
        snap = fetch(url)
    except (urllib.error.URLError, OSError, ValueError) as exc:
        print('ufo-status: cannot reach ufo-agent at %s ([agent] '
              'metrics_host and metrics_port of %s): %s. Is ufo-agent '
              'running with that configuration?'
              % (url, _config_files(conf), exc), file=sys.stderr)
        return 1
    print(json.dumps(snap, indent=2, sort_keys=True) if conf.json
          else format_status(snap))
    return 0


if __name__ == '__main__':
    sys.exit(main())
