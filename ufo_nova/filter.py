"""UFOFilter: keeps new VMs off hosts whose idle pool cannot take them.

Enable it in nova.conf::

    [filter_scheduler]
    available_filters = nova.scheduler.filters.all_filters
    available_filters = ufo_nova.filter.UFOFilter
    enabled_filters = ...,UFOFilter

What it does per request type (the request is judged against the
*destination* host; nothing ever stops a VM from leaving a host):

* boot, unshelve, evacuate, cold migration, resize to another host, live
  migration without a forced host: overloaded hosts are rejected; saturated
  hosts are rejected unless ceil(flavor vCPUs x [ufo]
  expected_demand_fraction) fits their idle cores (for a resize, the new
  flavor), less the cores expected for the vCPUs the scheduler already
  sent there since the signal was measured; underloaded hosts pass.
* resize to the same host (the instance already runs on the candidate):
  only an overloaded host is rejected; the instance's current load is
  already part of the host's signal.
* rebuild: not run (``RUN_ON_REBUILD = False``): a rebuild keeps the
  instance on its host and changes no CPU demand, so Nova passes the host.
* forced destinations (``host`` with ``force``) bypass the scheduler.

A host whose signal is missing or stale is judged by ``[ufo]
unknown_host_policy``. Now and then it logs how many hosts have fresh,
stale and no signals (:mod:`ufo_nova.coverage`).
"""

from oslo_log import log as logging

from nova.scheduler import filters
from nova.scheduler import utils as scheduler_utils

from ufo_agent import hostsignal
from ufo_nova import conf as ufo_conf
from ufo_nova import coverage
from ufo_nova import decision
from ufo_nova import lifecycle
from ufo_nova import listener

LOG = logging.getLogger(__name__)
CONF = ufo_conf.CONF


class UFOFilter(filters.BaseHostFilter):
    """Reject overloaded hosts and saturated hosts that cannot fit."""

    RUN_ON_REBUILD = False
    # Signals change between two instances of one multi-create request
    # only through new notifications; run for every instance anyway so
    # that a newly received signal is used.
    run_filter_once_per_request = False

    def __init__(self):
        super().__init__()
        lifecycle.follow_scheduler_service()
        # host -> (signal, HostState.vcpus_used when that signal was first
        # used); replaced whenever a new signal of the host is used.
        self._vcpus_at_signal = {}

    def filter_all(self, filter_obj_list, spec_obj):
        if not self.RUN_ON_REBUILD and scheduler_utils.request_is_rebuild(
                spec_obj):
            return filter_obj_list
        listener.ensure_listening()
        snapshot = listener.get_cache().snapshot()
        opts = CONF.ufo
        if coverage.due(opts.signal_report_interval):
            filter_obj_list = list(filter_obj_list)
            coverage.report(snapshot, (h.host for h in filter_obj_list))
        vcpus = _vcpus(spec_obj)
        instance_uuid = _instance_uuid(spec_obj)
        need = decision.expected_cores(vcpus, opts.expected_demand_fraction)
        return self._filter(filter_obj_list, snapshot, need, instance_uuid,
                            opts.unknown_host_policy,
                            opts.expected_demand_fraction)

    def _filter(self, host_states, snapshot, need, instance_uuid, policy,
                fraction):
        lookup = snapshot.lookup
        judge = decision.judge
        for host_state in host_states:
            # Inlined: this loop runs for every host of every request.
            instances = host_state.instances
            found = lookup(host_state.host)
            promised = (self._promised(host_state, found.signal, fraction)
                        if found.state == hostsignal.SATURATED else 0)
            verdict = judge(found, need, policy,
                            bool(instances) and instance_uuid in instances,
                            promised)
            if verdict.passes:
                yield host_state
            elif LOG.isEnabledFor(logging.DEBUG):
                LOG.debug('UFOFilter rejects host %s for instance %s: %s',
                          host_state.host, instance_uuid, verdict.reason)

    def _promised(self, host_state, signal, fraction):
        """Cores promised to VMs sent to the host since ``signal``.

        The signal's idle cores stay the same until the agent measures
        again, while the scheduler may send several VMs in a burst (or in
        one multi-create request). Nova's vCPUs in use on the host, noted
        the first time this signal is used, tell how many vCPUs went there
        since.
        """
        noted = self._vcpus_at_signal.get(host_state.host)
        if noted is None or noted[0] is not signal:
            self._vcpus_at_signal[host_state.host] = (
                signal, host_state.vcpus_used)
            return 0
        return decision.promised_cores(host_state.vcpus_used, noted[1],
                                       fraction)

    def host_passes(self, host_state, spec_obj):
        return any(True for _ in self.filter_all([host_state], spec_obj))


def _vcpus(spec_obj):
    flavor = getattr(spec_obj, 'flavor', None) if spec_obj else None
    if flavor is None:
        return 0
    return flavor.vcpus


def _instance_uuid(spec_obj):
    if spec_obj is None or not spec_obj.obj_attr_is_set('instance_uuid'):
        return None
    return spec_obj.instance_uuid
