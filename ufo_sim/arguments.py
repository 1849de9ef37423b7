"""argparse pieces shared by ``ufo-sim`` and its calibration.

Each ``type=`` function wraps a validator of the model and turns its
ValueError into ``argparse.ArgumentTypeError``, so the usage error keeps
the message.
"""

import argparse
import dataclasses
import json

from ufo_sim import profiles


def profile_option(text):
    """``PROFILE.FIELD=VALUE`` (:func:`ufo_sim.profiles.parse_option`)."""
    try:
        return profiles.parse_option(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc))


def controller_option(text):
    """``NAME=VALUE`` of a ControllerConfig field, the value as JSON."""
    from ufo_agent.controller import config
    fields = {f.name for f in dataclasses.fields(config.ControllerConfig)}
    name, sep, raw = text.partition('=')
    if not sep or name not in fields:
        raise argparse.ArgumentTypeError(
            '%r: expected NAME=VALUE with NAME one of %s'
            % (text, ', '.join(sorted(fields))))
    try:
        value = json.loads(raw)
    except ValueError:
        raise argparse.ArgumentTypeError('%r: bad value (not JSON)' % text)
    return name, value


def workers(parser, help_processes='local Ray workers (default 2)'):
    """``--processes`` and ``--ray-address``: where the tasks run."""
    parser.add_argument('--processes', type=_workers, default=2,
                        help=help_processes + '; 0 runs the tasks one '
                        'after the other in this process, without a '
                        'time limit')
    parser.add_argument('--ray-address', default=None, metavar='ADDRESS',
                        help='run the tasks on this Ray cluster (e.g. '
                        'ray://head:10001, or auto) instead of a local '
                        'Ray; its nodes need ufo-nova with the sim extra')


def _workers(text):
    try:
        count = int(text)
    except ValueError:
        count = -1
    if count < 0:
        raise argparse.ArgumentTypeError(
            'a number of workers, 0 or more: %r' % text)
    return count


def use_workers(args):
    """Route this command's tasks as its ``--ray-address`` asks."""
    from ufo_sim.experiments import parallel
    parallel.use_cluster(getattr(args, 'ray_address', None))
