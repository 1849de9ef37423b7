"""The ``dynamic`` command: load changes, nothing learned (Fig. 14)."""

from ufo_sim.commands import common


def add_parser(subparsers):
    """Add ``dynamic`` to ``ufo-sim``'s subcommands."""
    cmd = subparsers.add_parser(
        'dynamic', help='load changes, nothing learned '
                        '(Fig. 14)')
    common.add_common(cmd)
    common.add_host(cmd)
    common.add_qos_target(cmd)
    cmd.add_argument('--scale', type=common.positive, default=1.0,
                     help='stretch (>1) or shrink (<1) the 270 s timeline')
    cmd.add_argument('--load-scale', type=common.positive, default=1.0,
                     help='multiply every VM\'s load pattern by this')
    cmd.add_argument('--managers', default='default,dyniso,ufo',
                     help='comma-separated managers to run')
    cmd.set_defaults(func=run, usage=cmd)
    return cmd


def run(args):
    from ufo_sim.experiments import dynamic
    settings = common.settings(args)
    common.checked(settings, [dynamic.first_cell(args.load_scale)],
                   settings.cores + dynamic.EMULATOR_CORES)
    out = dynamic.run(settings, scale=args.scale,
                      managers=args.managers.split(','),
                      processes=args.processes, timeout=args.task_timeout,
                      load_scale=args.load_scale)
    return common.finish(args, dynamic, out, 'dynamic')
