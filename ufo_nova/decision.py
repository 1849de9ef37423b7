"""Pure placement decisions of UFOFilter and UFOIdlePoolWeigher.

No Nova import: the Nova classes in :mod:`ufo_nova.filter` and
:mod:`ufo_nova.weigher` only gather their inputs and call these functions.
"""

import collections
import math

from ufo_agent import hostsignal
from ufo_nova import cache
from ufo_nova import conf as ufo_conf


class Verdict(collections.namedtuple('Verdict', 'passes fmt args')):
    """A decision and its reason, formatted only when asked for."""

    __slots__ = ()

    @property
    def reason(self):
        return self.fmt % self.args


def expected_cores(vcpus, fraction):
    """Physical cores a VM of ``vcpus`` vCPUs is expected to need."""
    if vcpus <= 0:
        return 0
    if fraction <= 0:
        return 0
    return max(1, math.ceil(vcpus * fraction - 1e-9))


_PASS_UNDERLOADED = Verdict(True, 'host is underloaded', ())
_PASS_RESIDENT = Verdict(True, 'host is saturated, instance already runs '
                         'here', ())
_PASS_FITS = Verdict(True, 'host is saturated, expected demand fits its '
                     'idle cores', ())


def judge(lookup, need, unknown_policy, already_on_host=False,
          promised=0):
    """Decide whether a host may receive a VM.

    :param lookup: the :class:`ufo_nova.cache.Lookup` of the host.
    :param need: expected cores of the VM (:func:`expected_cores`).
    :param unknown_policy: ``[ufo] unknown_host_policy``.
    :param already_on_host: the instance already runs on this host (resize
        to the same host): its load is already in the host's signal, so
        only the overload check applies.
    :param promised: expected cores of the VMs the scheduler sent to the
        host since its signal was measured (:func:`promised_cores`): they
        will take idle cores that the signal still reports.
    """
    state = lookup.state
    if state == hostsignal.UNDERLOADED:
        return _PASS_UNDERLOADED
    if state == hostsignal.SATURATED:
        if already_on_host:
            return _PASS_RESIDENT
        idle = lookup.signal.idle_cores - promised
        if need <= idle:
            return _PASS_FITS
        return Verdict(False, 'host is saturated, expected demand %d cores '
                       'exceeds %d idle cores (%d reported, %d promised to '
                       'VMs placed since)',
                       (need, max(idle, 0), lookup.signal.idle_cores,
                        promised))
    if state == hostsignal.OVERLOADED:
        return Verdict(False, 'host is overloaded (unmet demand %d cores)',
                       (lookup.signal.unmet_cores,))
    why = 'no signal' if lookup.signal is None else (
        'signal is stale (%.0f s old)' % lookup.age)
    if unknown_policy == ufo_conf.FAIL_CLOSED:
        return Verdict(False, '%s and [ufo] unknown_host_policy is %s',
                       (why, ufo_conf.FAIL_CLOSED))
    return Verdict(True, '%s, passed as [ufo] unknown_host_policy is %s',
                   (why, ufo_conf.FAIL_OPEN))


def promised_cores(vcpus_now, vcpus_at_signal, fraction):
    """Expected cores of the vCPUs placed on a host since its signal.

    :param vcpus_now: the host's vCPUs in use as the scheduler sees them
        now (Nova's HostState.vcpus_used, which also counts the instances
        placed earlier in the same request).
    :param vcpus_at_signal: the same figure when the scheduler first used
        the host's current signal.
    """
    return expected_cores(max(0, vcpus_now - vcpus_at_signal), fraction)


def reclaimable_weight(lookup):
    """Raw weight of a host: its reclaimable cores, 0 when unknown."""
    if lookup.state == cache.UNKNOWN:
        return 0
    return lookup.signal.reclaimable_cores
