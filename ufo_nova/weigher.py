"""UFOIdlePoolWeigher: prefers hosts with more reclaimable cores.

Enable it in nova.conf by adding its path to the weighers already in use
(Nova's default is ``nova.scheduler.weights.all_weighers``)::

    [filter_scheduler]
    weight_classes = WEIGHERS,ufo_nova.weigher.UFOIdlePoolWeigher

``weight_classes`` is one list, on one line: a second line would replace
the first and drop Nova's own weighers.

Its multiplier is ``[ufo] idle_pool_weight_multiplier``; a host aggregate
overrides it with the metadata key ``ufo_idle_pool_weight_multiplier``, as
Nova's own weighers do. A host whose signal is missing or stale weighs as
having no reclaimable cores.
"""

from nova.scheduler import utils as scheduler_utils
from nova.scheduler import weights

from ufo_nova import conf as ufo_conf
from ufo_nova import coverage
from ufo_nova import decision
from ufo_nova import lifecycle
from ufo_nova import listener

CONF = ufo_conf.CONF
AGGREGATE_KEY = 'ufo_idle_pool_weight_multiplier'


class UFOIdlePoolWeigher(weights.BaseHostWeigher):
    minval = 0

    def __init__(self):
        super().__init__()
        lifecycle.follow_scheduler_service()
        self._multiplier = CONF.ufo.idle_pool_weight_multiplier

    def weight_multiplier(self, host_state):
        if not host_state.aggregates:
            return self._multiplier
        return scheduler_utils.get_weight_multiplier(
            host_state, AGGREGATE_KEY, self._multiplier)

    def weigh_objects(self, weighed_obj_list, weight_properties):
        listener.ensure_listening()
        opts = CONF.ufo
        self._multiplier = opts.idle_pool_weight_multiplier
        snapshot = listener.get_cache().snapshot()
        if coverage.due(opts.signal_report_interval):
            coverage.report(snapshot,
                            (obj.obj.host for obj in weighed_obj_list))
        # Same result as decision.reclaimable_weight() of each host's
        # lookup, without building the lookups (this runs for every host).
        weight = snapshot.reclaimable_cores
        return [weight(obj.obj.host) for obj in weighed_obj_list]

    def _weigh_object(self, host_state, weight_properties):
        return decision.reclaimable_weight(
            listener.get_cache().lookup(host_state.host))
