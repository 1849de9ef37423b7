"""``ufo-sim``: the paper's evaluation on the simulated host.

Subcommands (``ufo-sim <command> --help`` for options):

* ``grid [--quick]``: co-location grids (pairs, or any mix of VMs), each
  cell on three seeds shared by the managers, CPUs per cell per manager,
  heatmaps, JSON, a ``RESULT`` line setting UFO beside the Oracle cell by
  cell, and one closing ``RESULT`` line after a ``conditions:`` line
  naming the settings that produced it;
* ``mal``: maximum aggregated load per CPU count, from a grid's JSON;
* ``dynamic``: changing load with nothing learned (paper Fig. 14);
* ``dynamic-set``: UFO on many dynamic runs (seeds, load scales, host
  sizes), summed, with a ``RESULT`` line; ``--against`` a saved set of
  the same runs (or ``dynamic-diff`` of two saved sets) pairs them per
  load step;
* ``grid-set``: the held-out grid protocol (H1-H9, and the tuning
  grids by name) as one command: each grid's JSON, the set's JSON, two
  ``RESULT`` lines per grid and the recall over the set; ``--against``
  a saved set pairs them cell by cell (cells lost and gained,
  Oracle-met cells missed), and ``--oracle-from`` reuses a saved set's
  Oracle results;
* ``decompose``: vCPU-only, emulator-only, combined (paper Fig. 15);
* ``allocation``: fixed allocations of one cell, measured as the Oracle
  judges them, with the utilization, per-core utilization and SF the
  agent would see and the emulator threads' run delay the host sees;
* ``edge GRID.json``: the Oracle's allocations of a saved grid run and
  their one-core neighbours, read with the controller's rules: which
  rule holds a pool above the Oracle's size, which lets it step down
  onto a QoS miss, whether any threshold on a signal separates the
  two, and UFO's CPUs against the Oracle's plus a core for each pool a
  rule grows there (a ``RESULT`` line);
* ``be-soak [--quick]``: LC pairs plus one BE VM under UFO, BE guests in
  the idle pool against BE soak mode (SCHED_IDLE on every core), with a
  closing ``RESULT`` line;
* ``demo``: ufo-demo's scenario (an LC VM light, busy and quiet beside a
  BE batch VM and an idle VM) without and with the agent.
* ``cluster``: a simulated Nova cloud for a day, every policy over the
  same VM requests (Nova's own scheduler, the real agent on each host),
  a ``RESULT`` line per policy (see doc/source/cluster-evaluation.rst);
* ``results [--dry-run]``: every command behind the result files and
  figures committed under ``doc/source/_static``, run again into that
  tree (see doc/source/sim-method.rst, "Regenerating the results").

Everything else is written under ``--out`` (default ``ufo-sim-out``). Grid
and dynamic take held-out conditions nobody tuned on: ``--cores``,
``--smt``, ``--vcpus``, ``--host-option`` (any HostSpec field), ``--seed``
and the loads.

Each command is a module of :mod:`ufo_sim.commands` with
``add_parser(subparsers)`` and ``run(args)``; a new one is added to
:data:`COMMANDS`, in the order ``--help`` lists them.
"""


import argparse
import sys

from ufo_sim import arguments
from ufo_sim.commands import allocation
from ufo_sim.commands import be_soak
from ufo_sim.commands import cluster
from ufo_sim.commands import common
from ufo_sim.commands import decompose
from ufo_sim.commands import demo
from ufo_sim.commands import dynamic
from ufo_sim.commands import dynamic_diff
from ufo_sim.commands import dynamic_set
from ufo_sim.commands import edge
from ufo_sim.commands import grid
from ufo_sim.commands import grid_set
from ufo_sim.commands import mal
from ufo_sim.commands import results

COMMANDS = (grid, mal, dynamic, dynamic_set, dynamic_diff, grid_set,
            decompose, allocation, edge, be_soak, demo, cluster,
            results)


def parser():
    p = argparse.ArgumentParser(prog='ufo-sim', description=__doc__.split(
        '\n')[0])
    sub = p.add_subparsers(dest='command', required=True)
    for command in COMMANDS:
        command.add_parser(sub)
    return p


def main(argv=None):
    args = parser().parse_args(argv)
    arguments.use_workers(args)
    try:
        return args.func(args)
    except common.UsageError as exc:
        args.usage.error(str(exc))


if __name__ == '__main__':
    sys.exit(main())
