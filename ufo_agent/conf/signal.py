"""Options of the host signal that ufo-agent reports to the cloud scheduler.

The signal follows the paper's Appendix B.4: an idle pool consistently above
a few cores means *underloaded*, an idle pool of zero to a few cores means
*saturated* ("just right"), an idle pool that fails to supply the vCPU or
emulator pools means *overloaded*. The windows below give the hysteresis
that keeps the state from flapping.
"""

from oslo_config import cfg

GROUP = cfg.OptGroup(
    'signal',
    title='Host signal',
    help='How ufo-agent turns its idle-pool measurements into the host '
         'state (underloaded, saturated, overloaded) reported to the '
         'scheduler.')

OPTS = [
    cfg.IntOpt(
        'saturated_max_idle_cores', default=2, min=0,
        help='Largest idle pool, in physical cores, that still counts as '
             'saturated ("just right": send no more VMs). A host whose idle '
             'pool stays above it is underloaded. The paper uses 2.'),
    cfg.IntOpt(
        'overload_min_unmet_cores', default=1, min=1,
        help='Cores that the vCPU and emulator pools asked for and the idle '
             'pool could not supply, in one tick, from which the tick counts '
             'as overloaded.'),
    cfg.FloatOpt(
        'overloaded_after', default=10.0, min=0.0,
        help='Seconds the idle pool must keep failing to supply the other '
             'pools before the host becomes overloaded.'),
    cfg.FloatOpt(
        'overloaded_clear_after', default=30.0, min=0.0,
        help='Seconds without unmet demand before an overloaded host leaves '
             'the overloaded state.'),
    cfg.FloatOpt(
        'underloaded_after', default=30.0, min=0.0,
        help='Seconds the idle pool must stay above saturated_max_idle_cores '
             'before the host becomes underloaded.'),
    cfg.FloatOpt(
        'saturated_after', default=5.0, min=0.0,
        help='Seconds the idle pool must stay at or below '
             'saturated_max_idle_cores before an underloaded host becomes '
             'saturated. Keep it short: it stops new VMs.'),
]


def register_opts(conf):
    conf.register_group(GROUP)
    conf.register_opts(OPTS, group=GROUP)


def list_opts():
    return {GROUP: OPTS}
