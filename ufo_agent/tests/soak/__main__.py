"""``python -m ufo_agent.tests.soak``: the fault-injection soak by command.

Runs the state machine of :mod:`.machine` in rounds of ``--examples``
examples of at most ``--steps`` steps, round r with seed ``--seed`` + r,
until ``--ticks`` host seconds have passed, then prints what was
injected and what was found. A failure is shrunk to a minimal example
(unless ``--no-shrink``), printed by Hypothesis, and ends the run with
status 1. The agent's own log goes to ``--log`` (default: nowhere).
"""

import argparse
import logging
import sys
import time

from ufo_agent.tests.soak import machine
from ufo_agent.tests.soak import world


def _args(argv):
    parser = argparse.ArgumentParser(
        prog='python -m ufo_agent.tests.soak', description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--ticks', type=int, default=10000,
                        help='host seconds to run (default 10000)')
    parser.add_argument('--seed', type=int, default=0,
                        help='seed of the first round (default 0)')
    parser.add_argument('--examples', type=int, default=5,
                        help='examples per round (default 5)')
    parser.add_argument('--steps', type=int, default=200,
                        help='most steps per example (default 200)')
    parser.add_argument('--call-timeout', type=float,
                        default=world.DEFAULT_CALL_TIMEOUT,
                        help='the agent\'s libvirt call deadline, s')
    parser.add_argument('--disable', default='',
                        help='comma-separated kinds of injection to leave '
                        'out: %s' % ', '.join(machine.KINDS))
    parser.add_argument('--ignore', default='',
                        help='comma-separated violations to count but not '
                        'fail on: %s' % ', '.join(
                            cls.__name__ for cls in world.VIOLATIONS))
    parser.add_argument('--no-shrink', action='store_true',
                        help='report a failure as found, unshrunk')
    parser.add_argument('--log', default=None,
                        help='write the agent\'s log (WARNING and up) here')
    args = parser.parse_args(argv)
    unknown = set(filter(None, args.disable.split(','))) - set(machine.KINDS)
    if unknown:
        parser.error('unknown kinds: %s' % ', '.join(sorted(unknown)))
    names = {cls.__name__ for cls in world.VIOLATIONS}
    unknown = set(filter(None, args.ignore.split(','))) - names
    if unknown:
        parser.error('unknown violations: %s' % ', '.join(sorted(unknown)))
    return args


def summary(started):
    stats = world.STATS
    print('soak: %d ticks (%d with an agent), %d steps, %d examples in '
          '%.0f s' % (stats['ticks'], stats['agent ticks'], stats['steps'],
                      stats['examples'], time.monotonic() - started))
    for name, count in sorted(stats.items()):
        if name not in ('ticks', 'agent ticks', 'steps', 'examples'):
            print('soak:   %-44s %d' % (name, count))


def main(argv=None):
    args = _args(sys.argv[1:] if argv is None else argv)
    if args.log:
        logging.basicConfig(filename=args.log, level=logging.WARNING,
                            format='%(asctime)s %(levelname)s %(name)s '
                            '%(message)s')
    else:
        logging.basicConfig(handlers=[logging.NullHandler()],
                            level=logging.WARNING)
    machine.DISABLED.update(filter(None, args.disable.split(',')))
    world.IGNORED.update(filter(None, args.ignore.split(',')))
    print('soak: seed %d, %d ticks wanted, %d examples of at most %d steps '
          'a round, call deadline %.2f s%s%s'
          % (args.seed, args.ticks, args.examples, args.steps,
             args.call_timeout, ', without ' + args.disable
             if args.disable else '', ', ignoring ' + args.ignore
             if args.ignore else ''))
    sys.stdout.flush()
    started = time.monotonic()
    seed = args.seed
    while world.STATS['ticks'] < args.ticks:
        try:
            machine.run(seed, args.examples, args.steps, args.call_timeout,
                        shrink=not args.no_shrink)
        except BaseException as exc:
            print('soak: FAILED in the round of seed %d: %s'
                  % (seed, type(exc).__name__))
            summary(started)
            print('soak: reproduce with: python -m ufo_agent.tests.soak '
                  '--seed %d --examples %d --steps %d --ticks 1%s%s'
                  % (seed, args.examples, args.steps, ' --disable ' +
                     args.disable if args.disable else '', ' --ignore ' +
                     args.ignore if args.ignore else ''))
            raise
        print('soak: round of seed %d passed (%d ticks so far)'
              % (seed, world.STATS['ticks']))
        sys.stdout.flush()
        seed += 1
    summary(started)
    print('soak: PASSED')
    return 0


if __name__ == '__main__':
    sys.exit(main())
