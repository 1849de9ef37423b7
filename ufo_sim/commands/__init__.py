"""The ``ufo-sim`` subcommands, one module each (see :mod:`ufo_sim.cmd`)."""
