"""``ufo-sim cluster`` with the UFO hosts' ``[controller] be_policy = soak``.

The trial of doc/source/research/2026-12-04-soak-trial.rst: the same
command and arguments as ``ufo-sim cluster``, each UFO host's agent
built with ``ControllerConfig(be_policy='soak')`` instead of the
default idle pool; nothing else differs. Run it in one process
(``--processes 0``): the factory is this script's, which Ray workers
cannot import::

    PYTHONPATH=$PWD python tools/cluster_soak.py --hosts 4 --cores 32 \\
      --memory-gb 2048 --hours 6 --warmup-hours 1 --policies ufo-sched \\
      --ratios 2,3 --processes 0 --seed 1 --no-plots --out /tmp/soak
"""

import sys

from ufo_agent.controller import config as controller_config
from ufo_sim import arguments
from ufo_sim.cluster import host as host_mod
from ufo_sim import cmd
from ufo_sim.commands import cluster


def soak_host(*args, **kwargs):
    """A ClusterHost whose agent soaks best-effort vCPUs."""
    return host_mod.ClusterHost(
        *args, config=controller_config.ControllerConfig(be_policy='soak'),
        **kwargs)


def main(argv=None):
    args = cmd.parser().parse_args(['cluster'] + list(
        sys.argv[1:] if argv is None else argv))
    if args.processes != 0:
        args.usage.error('run the soak trial with --processes 0')
    arguments.use_workers(args)
    return cluster.run(args, factory=soak_host)


if __name__ == '__main__':
    sys.exit(main())
