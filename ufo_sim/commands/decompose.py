"""The ``decompose`` command: vCPU-only, emulator-only, both."""

from ufo_sim.commands import common


def add_parser(subparsers):
    """Add ``decompose`` to ``ufo-sim``'s subcommands."""
    cmd = subparsers.add_parser('decompose', help='vCPU-only, emulator-only, '
                                                  'combined (Fig. 15)')
    common.add_common(cmd)
    cmd.add_argument('--apps', default='memcached,nginx,mysql')
    cmd.add_argument('--cpus', default='4,8,12,16',
                     help='host CPU counts to find the max load at')
    cmd.add_argument('--vcpus', type=int, default=16,
                     help='flavor size (the paper uses 16)')
    cmd.set_defaults(func=run, usage=cmd)
    return cmd


def run(args):
    from ufo_sim.experiments import decompose
    out = decompose.run(common.settings(args), apps=args.apps.split(','),
                        cpu_counts=[int(x) for x in args.cpus.split(',')],
                        vcpus=args.vcpus, processes=args.processes,
                        timeout=args.task_timeout)
    return common.finish(args, decompose, out, 'decompose')
