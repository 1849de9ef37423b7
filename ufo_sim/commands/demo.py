"""The ``demo`` command: ufo-demo's scenario without and with UFO."""

import os

from ufo_sim.commands import common


def add_parser(subparsers):
    """Add ``demo`` to ``ufo-sim``'s subcommands."""
    cmd = subparsers.add_parser(
        'demo', help='ufo-demo\'s scenario without and '
                     'with the agent')
    common.add_common(cmd)
    common.add_host(cmd)
    cmd.set_defaults(func=run, usage=cmd)
    return cmd


def run(args):
    from ufo_sim.experiments import demo
    settings = common.settings(args, **demo.QUICK)
    out = demo.run(settings, processes=args.processes,
                   timeout=args.task_timeout)
    os.makedirs(args.out, exist_ok=True)
    common.write_json(os.path.join(args.out, 'demo.json'), out)
    print(demo.table(out))
    return 1 if any('error' in r for r in out['results']) else 0
