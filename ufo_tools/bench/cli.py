"""``ufo-bench``: benchmark commands that print figures.

Benchmarks are not tests: each subcommand measures, prints its repeats and
ends with one ``RESULT key=value ...`` line.
"""

import argparse
import importlib
import sys

# subcommand -> module under ufo_tools.bench with add_arguments() and run()
SUBCOMMANDS = {
    'agent': 'ufo_tools.bench.agent',
    'channel': 'ufo_tools.bench.channel',
    'controller': 'ufo_tools.bench.controller',
    'scheduler': 'ufo_tools.bench.scheduler',
}


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog='ufo-bench', description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest='command', required=True)
    modules = {}
    for name, path in sorted(SUBCOMMANDS.items()):
        module = importlib.import_module(path)
        modules[name] = module
        module.add_arguments(sub.add_parser(name, help=module.__doc__))
    args = parser.parse_args(argv)
    return modules[args.command].run(args)


if __name__ == '__main__':
    sys.exit(main())
