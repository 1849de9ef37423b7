"""``ufo-sim cluster``: a simulated Nova cloud, policy by policy.

Every policy runs over the same VM requests (generated, or read from an
Azure-format ``vmtable.csv``) on fresh hosts: Nova's own scheduler
places them, the hosts run under the policy's CPU manager, and each
policy's figures are printed as a ``RESULT`` line, then one
``RESULT cluster_gain`` line judging UFO's full stack against the
best Nova default within the QoS budget. ``cluster.json`` and
``cluster-day.png`` go to ``--out``. See doc/source/cluster-evaluation.rst.
"""

import argparse
import dataclasses
import json
import os
import sys
import time

from ufo_sim import arguments

WORKLOADS = ('generated', 'held-out')


def _csv(kind):
    def parse(text):
        try:
            return [kind(v) for v in text.split(',') if v.strip()]
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
    return parse


def _kinds(text):
    from ufo_sim.cluster import cloud
    kinds = [k.strip() for k in text.split(',') if k.strip()]
    bad = [k for k in kinds if k not in cloud.KINDS]
    if bad or not kinds:
        raise argparse.ArgumentTypeError(
            'policies from %s, not %s' % (', '.join(cloud.KINDS),
                                          ', '.join(bad) or 'none'))
    return kinds


def _strategy_option(text):
    name, sep, value = text.partition('=')
    if not sep:
        raise argparse.ArgumentTypeError('NAME=VALUE, not %r' % text)
    try:
        return name.strip(), json.loads(value)
    except ValueError:
        raise argparse.ArgumentTypeError('%s: %r is not JSON'
                                         % (name, value)) from None


def add_parser(subparsers):
    from ufo_sim.cluster import cloud
    p = subparsers.add_parser(
        'cluster', help='a simulated Nova cloud: VMs per host and LC QoS '
                        'per policy (Nova default, DynIso, UFO)',
        description=__doc__.split('\n\n')[1].replace('\n', ' '))
    p.add_argument('--out', default='ufo-sim-out',
                   help='directory for cluster.json and cluster-day.png')
    p.add_argument('--no-plots', action='store_true',
                   help='skip the PNG figure (no matplotlib)')
    p.add_argument('--seed', type=int, default=1,
                   help='seed of the generated workload, of Nova\'s '
                        'choices and of the hosts\' models')
    arguments.workers(p, help_processes='Ray actors the hosts are sharded '
                                        'over (default 2)')
    w = p.add_argument_group('workload')
    w.add_argument('--workload', choices=WORKLOADS, default='generated',
                   help='generated: WorkloadParams() (the Azure 2019 '
                        'characterization); held-out: the SOSP\'17 one, '
                        'never tuned on')
    w.add_argument('--trace', metavar='VMTABLE.csv[.gz]',
                   help='read the VMs from an Azure public dataset '
                        'vmtable file instead of generating them')
    w.add_argument('--trace-start', type=float, default=0.0,
                   help='trace second the simulation starts at')
    w.add_argument('--trace-unknown', choices=('be', 'lc', 'skip'),
                   default='be', help='VMs of category Unknown')
    w.add_argument('--vms-per-host', type=float, default=80.0,
                   help='generated workload: mean VMs alive per host '
                        '(the arrival rate is sized to it; default 80)')
    c = p.add_argument_group('cloud')
    c.add_argument('--hosts', type=int, default=16, help='default 16')
    c.add_argument('--cores', type=_csv(int), default=[32],
                   help='physical cores per host; a comma-separated list '
                        'splits the hosts evenly over those sizes '
                        '(default 32)')
    c.add_argument('--smt', choices=('on', 'off'), default='on')
    c.add_argument('--memory-gb', type=int, default=256)
    c.add_argument('--hours', type=float, default=24.0,
                   help='simulated hours (default 24)')
    c.add_argument('--warmup-hours', type=float, default=2.0,
                   help='hours not measured at the start (default 2)')
    c.add_argument('--start-spread-minutes', type=float, default=0.0,
                   help='boot the VMs alive at the start one after another '
                        'over these first minutes, each placed with the '
                        'signals of the hosts as they fill, rather than '
                        'all in the first second (at most the warm-up; '
                        'default 0)')
    c.add_argument('--step', type=int, default=60,
                   help='seconds between the scheduler\'s steps '
                        '(default 60)')
    c.add_argument('--fidelity', choices=('engine', 'surrogate'),
                   default='surrogate',
                   help='host model: the discrete-event engine (exact, '
                        'slow) or the surrogate fitted from it (default)')
    c.add_argument('--policies', type=_kinds, default=list(cloud.KINDS),
                   help='comma-separated, of: %s (default: all)'
                        % ', '.join(cloud.KINDS))
    c.add_argument('--ratios', type=_csv(float),
                   default=list(cloud.RATIOS),
                   help='cpu_allocation_ratio values each policy runs at '
                        '(default 1,2,4,8)')
    c.add_argument('--audit-interval', type=float, default=300.0,
                   help='seconds between Watcher audits (ufo-migrate)')
    c.add_argument('--strategy-option', type=_strategy_option,
                   action='append', default=[], metavar='NAME=VALUE',
                   help='an input parameter of the ufo_overload_relief '
                        'strategy (repeatable), e.g. sustain_s=600')
    c.add_argument('--ufo-option', type=arguments.controller_option,
                   action='append',
                   default=[], metavar='NAME=VALUE',
                   help='a [controller] option of the UFO hosts\' agents '
                        '(repeatable; VALUE is JSON), e.g. '
                        'be_policy=\'"soak"\'')
    c.add_argument('--qos-target', action='store_true',
                   help='run the UFO hosts\' agents in their QoS-target '
                        'mode: each LC VM\'s flavor carries its '
                        'profile\'s p99 target and the guest publishes the '
                        'p99 of each second')
    p.set_defaults(func=run, usage=p)
    return p


def hosts_of(args):
    from ufo_sim.cluster import cloud
    if args.hosts < 1 or any(c < 1 for c in args.cores) or not args.cores:
        raise SystemExit('ufo-sim cluster: --hosts and --cores must be '
                         'positive')
    sizes = args.cores
    out = []
    for i in range(args.hosts):
        cores = sizes[i * len(sizes) // args.hosts]
        out.append(cloud.HostSpec('host%03d' % i, cores,
                                  2 if args.smt == 'on' else 1,
                                  args.memory_gb * 1024))
    return tuple(out)


def requests_of(args, hosts):
    """(workload label, WorkloadParams, [VmRequest])."""
    from ufo_sim.cluster import azure_trace
    from ufo_sim.cluster import workload
    duration = args.hours * workload.HOUR_S
    params = (workload.held_out() if args.workload == 'held-out'
              else workload.WorkloadParams())
    if args.trace:
        requests = azure_trace.read_vmtable(
            args.trace, unknown=args.trace_unknown,
            start_s=args.trace_start, end_s=args.trace_start + duration,
            seed=args.seed, params=params)
        return 'trace:%s' % os.path.basename(args.trace), params, requests
    rate = (args.vms_per_host * len(hosts) /
            (workload.mean_lifetime_s(params) / workload.HOUR_S))
    params = dataclasses.replace(params, arrivals_per_hour=rate)
    return args.workload, params, workload.generate(params, args.seed,
                                                    duration)


def cloud_of(args):
    """(workload label, CloudConfig, [VmRequest]) of the command line."""
    from ufo_sim.cluster import cloud
    from ufo_sim.cluster import workload
    hosts = hosts_of(args)
    if not 0 <= args.start_spread_minutes <= 60 * args.warmup_hours:
        raise SystemExit('ufo-sim cluster: --start-spread-minutes must be '
                         'between 0 and the warm-up (%.0f minutes)'
                         % (60 * args.warmup_hours))
    label, params, requests = requests_of(args, hosts)
    requests = workload.spread_start(requests,
                                     60.0 * args.start_spread_minutes)
    try:
        config = cloud.CloudConfig(
            hosts=hosts, duration_s=args.hours * 3600.0, step_s=args.step,
            warmup_s=args.warmup_hours * 3600.0, seed=args.seed,
            fidelity=args.fidelity, audit_interval_s=args.audit_interval,
            strategy_params=tuple(args.strategy_option), params=params,
            ufo_config=tuple(args.ufo_option), qos_target=args.qos_target)
    except ValueError as exc:
        raise SystemExit('ufo-sim cluster: %s' % exc)
    return label, config, requests


# The LC VMs the command names after a policy's RESULT line.
WORST_VMS = 3


def worst_line(series, requests):
    """The LC VMs that carry most of a run's violation seconds, or ''."""
    from ufo_sim.cluster import host as host_mod
    from ufo_sim.cluster import metrics
    worst = metrics.worst_vms(series, WORST_VMS)
    if not worst:
        return ''
    total = sum(series.by_vm.values())
    by_id = {r.vm_id: r for r in requests}
    parts = []
    for vm_id, seconds in worst:
        r = by_id[vm_id]
        host, at = series.first_violation[vm_id]
        parts.append('%s (%s, %d vCPUs, %s, peak load %.2f; first on %s '
                     'at %.0f s) %.0f s, %.1f %%'
                     % (vm_id, host_mod.profile_of(r).name, r.vcpus,
                        r.pattern, r.peak_load, host, at, seconds,
                        100.0 * seconds / total))
    return '  most violation seconds (LC VMs with any: %d): %s' % (
        len(series.by_vm), '; '.join(parts))


def run(args, factory=None):
    """The command; ``factory`` builds the hosts (see :func:`.cloud.run`)."""
    from ufo_sim.cluster import cloud
    from ufo_sim.cluster import metrics
    label, config, requests = cloud_of(args)
    hosts = config.hosts
    policy_list = cloud.policies(args.policies, args.ratios)
    print('cluster: %d hosts, %d VM requests (%s), %.1f h, %d policies, '
          '%s' % (len(hosts), len(requests), label, args.hours,
                  len(policy_list),
                  'in this process' if args.processes == 0 else
                  '%d Ray workers' % args.processes), flush=True)
    series, summaries, took = {}, [], {}
    for policy in policy_list:
        start = time.monotonic()
        series.update(cloud.run(config, [policy], requests,
                                workers=args.processes, factory=factory))
        took[policy.name] = time.monotonic() - start
        summary = metrics.summarize(series[policy.name])
        summaries.append(summary)
        line = metrics.result_line(summary, label)
        if config.qos_target and policy.host_policy == 'ufo':
            line += ' qos_target=on'
        print('%s  (%.0f s)' % (line, took[policy.name]), flush=True)
        worst = worst_line(series[policy.name], requests)
        if worst:
            print(worst, flush=True)
    comparison = metrics.compare(summaries)
    print(metrics.compare_line(comparison, label), flush=True)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, 'cluster.json'), 'w') as f:
        json.dump({'workload': label, 'argv': sys.argv[1:],
                   'summaries': summaries, 'comparison': comparison,
                   'seconds': took,
                   'series': {k: v.to_dict() for k, v in series.items()}},
                  f, indent=1, default=str)
    if not args.no_plots:
        try:
            from ufo_sim.cluster import plots
            plots.day(os.path.join(args.out, 'cluster-day.png'), series,
                      '%s, %d hosts' % (label, len(hosts)))
        except ImportError:
            sys.stderr.write('ufo-sim: matplotlib is not installed (pip '
                             'install ufo-nova[plot]): no figure\n')
    return 0
