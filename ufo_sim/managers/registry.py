"""The managers by name, in the order the results show them."""

from ufo_sim.managers import default
from ufo_sim.managers import dyniso
from ufo_sim.managers import oracle
from ufo_sim.managers import static
from ufo_sim.managers import ufo

MANAGERS = {
    default.NAME: default.evaluate,
    dyniso.NAME: dyniso.evaluate,
    static.NAME: static.evaluate,
    ufo.NAME: ufo.evaluate,
    ufo.HOST_ONLY_NAME: ufo.evaluate_host_only,
    oracle.NAME: oracle.evaluate,
    oracle.WIDE_NAME: oracle.evaluate_wide,
}


def evaluate(name, cell, settings):
    return MANAGERS[name](cell, settings)
