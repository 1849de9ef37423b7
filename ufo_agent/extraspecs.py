"""The flavor extra specs ufo-agent reads: their keys and accepted values.

A contract between the agent (:mod:`ufo_agent.hypervisor.policy` reads
them from Nova's domain metadata) and nova-api
(:mod:`ufo_nova.extra_spec_validators` refuses other values), kept apart
so that the scheduler side imports these constants and nothing else of
the agent. Values are compared stripped and lowercased; the latency
target is read as an integer, the percentile by its pattern.
"""

import re

MANAGED = 'ufo:managed'
CLASS = 'ufo:class'

MANAGED_TRUE = ('true', '1', 'yes', 'on')
MANAGED_FALSE = ('false', '0', 'no', 'off')

# The values of ufo_agent.controller.plan.VmClass.
CLASS_VALUES = ('lc', 'be', 'auto')

# The operator's tail-latency target for the QoS-target mode: microseconds
# at a percentile (default 99) of the latency the guest publishes.
LATENCY_TARGET = 'ufo:latency_target_us'
LATENCY_PERCENTILE = 'ufo:latency_percentile'

# Bounds of a target, as the host bounds what a guest publishes
# (ufo_agent.channel.latency): 1 us .. 10 s.
LATENCY_TARGET_MIN = 1
LATENCY_TARGET_MAX = 10 ** 7
DEFAULT_PERCENTILE = 99.0
# 50 to 99.99, at most two decimals: a median or a tail.
PERCENTILE_PATTERN = r'\s*(5[0-9]|[6-9][0-9])(\.[0-9]{1,2})?\s*'


def latency_target(value):
    """The target in microseconds of an extra-spec value; ValueError if bad.

    Read as nova-api's integer validator reads it (Python's int()).
    """
    target = int(value)
    if not LATENCY_TARGET_MIN <= target <= LATENCY_TARGET_MAX:
        raise ValueError('%d not in %d..%d' % (
            target, LATENCY_TARGET_MIN, LATENCY_TARGET_MAX))
    return target


def latency_percentile(value):
    """The percentile of an extra-spec value; ValueError if bad."""
    if re.fullmatch(PERCENTILE_PATTERN, value) is None:
        raise ValueError('%r is no percentile in 50..99.99' % value)
    return float(value)
