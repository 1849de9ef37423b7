"""UFOOverloadRelief: Watcher strategy that live-migrates off overloaded hosts.

Enabled in watcher-decision-engine through the ``watcher_strategies``
entry point ``ufo_overload_relief``. It reads Watcher's compute model
(nodes, instances, Nova's free allocation) and UFO's host signals
(:mod:`ufo_nova.watcher.signals`), and :func:`ufo_nova.migration.decide`
decides; this module only gathers the inputs and turns the moves into
Watcher ``migrate`` actions. The cloud simulator runs this same class with
a :class:`~ufo_nova.watcher.signals.DirectSignalSource`.
"""

import datetime
import time

from oslo_log import log
from watcher.decision_engine.model import element
from watcher.decision_engine.strategy.strategies import base

from ufo_agent import extraspecs
from ufo_nova import migration
from ufo_nova.watcher import signals

LOG = log.getLogger(__name__)

#: The datasources whose Prometheus client the strategy reads UFO's
#: metrics through, in Watcher's order of preference.
PROMETHEUS_DATASOURCES = ('aetos', 'prometheus')


def workload_class(instance):
    """:data:`migration.BE` for ``ufo:class=be`` flavors, else LC."""
    specs = instance.flavor_extra_specs or {}
    value = str(specs.get(extraspecs.CLASS, '')).strip().lower()
    return migration.BE if value == 'be' else migration.LC


def _dedicated(instance):
    specs = instance.flavor_extra_specs or {}
    return str(specs.get('hw:cpu_policy', '')).strip().lower() == 'dedicated'


def _epoch(value):
    if value.tzinfo is None:
        value = value.replace(tzinfo=datetime.timezone.utc)
    return value.timestamp()


class WatcherActionLog:
    """When Watcher last migrated each instance: its own action records."""

    def __init__(self, context, limit=1000):
        self.context = context
        self.limit = limit

    def last_migrated(self, now):
        # Imported here: watcher.objects needs the decision engine's
        # database, which only the cloud path uses.
        from watcher.objects import action as action_obj
        out = {}
        ongoing = action_obj.State.ONGOING
        for state in (ongoing, action_obj.State.SUCCEEDED):
            actions = action_obj.Action.list(
                self.context, filters={'state': state}, limit=self.limit,
                sort_key='updated_at', sort_dir='desc')
            for action in actions:
                if action.action_type != base.BaseStrategy.MIGRATION:
                    continue
                uuid = (action.input_parameters or {}).get('resource_id')
                if not uuid:
                    continue
                # An ongoing migration counts as one that just ended.
                when = now if state == ongoing else _epoch(
                    action.updated_at or action.created_at)
                out[uuid] = max(out.get(uuid, when), when)
        return out


class UFOOverloadRelief(base.WorkloadStabilizationBaseStrategy):
    """Relieve hosts that UFO reports in sustained overload.

    *Description*

    ufo-agent reports a host overloaded when its idle pool cannot supply
    the cores its guests ask for. A host overloaded for ``sustain_s``
    seconds without a break has more demand than any re-pinning can meet:
    the strategy live-migrates one instance off it, the smallest whose
    departure covers the shortfall (best-effort guests first), to the
    underloaded host with the most reclaimable cores whose idle cores fit
    the instance. At most ``max_migrations`` per audit; an instance
    migrated less than ``cooldown_s`` ago stays.

    *Requirements*

    ufo-agent on the compute nodes, its metrics scraped by the Prometheus
    that Watcher's ``prometheus`` or ``aetos`` datasource queries, with
    the host label Watcher's ``[prometheus_client] fqdn_label`` names.
    Live migration between the compute nodes.

    *Limitations*

    One move per overloaded host and audit: use continuous audits.
    """

    DATASOURCE_METRICS = []

    def __init__(self, config, osc=None):
        super().__init__(config, osc)
        #: A :class:`~ufo_nova.watcher.signals.SignalSource`; built from
        #: Watcher's Prometheus datasource when not set.
        self.signal_source = None
        #: Has ``last_migrated(now)``; Watcher's action records when not
        #: set.
        self.migration_log = None
        self.clock = time.time
        #: The :class:`ufo_nova.migration.Decision` of the last execution.
        self.decision = None
        self.instance_migrations_count = 0

    @classmethod
    def get_name(cls):
        return 'ufo_overload_relief'

    @classmethod
    def get_display_name(cls):
        return 'UFO overload relief'

    @classmethod
    def get_translatable_display_name(cls):
        return 'UFO overload relief'

    @classmethod
    def get_schema(cls):
        return {
            'properties': {
                'sustain_s': {
                    'description': 'Seconds a host must have been '
                                   'overloaded without a break before an '
                                   'instance moves off it.',
                    'type': 'number', 'minimum': 0, 'default': 300.0},
                'max_age_s': {
                    'description': 'Seconds after which a host\'s signal '
                                   'is stale (the host is unknown: never a '
                                   'source nor a destination); a longer '
                                   'gap between two signals breaks an '
                                   'overload. Like [ufo] signal_max_age.',
                    'type': 'number', 'exclusiveMinimum': 0,
                    'default': 120.0},
                'cooldown_s': {
                    'description': 'An instance migrated less than this '
                                   'many seconds ago is not moved again.',
                    'type': 'number', 'minimum': 0, 'default': 3600.0},
                'max_migrations': {
                    'description': 'Live migrations per audit, in all.',
                    'type': 'integer', 'minimum': 0, 'default': 2},
                'expected_demand_fraction': {
                    'description': 'Expected physical cores per vCPU of an '
                                   'instance whose CPU use is unknown, as '
                                   '[ufo] expected_demand_fraction.',
                    'type': 'number', 'minimum': 0, 'maximum': 4,
                    'default': 0.5},
                'cpu_use_period_s': {
                    'description': 'Seconds over which an instance\'s '
                                   'recent CPU use is averaged.',
                    'type': 'number', 'exclusiveMinimum': 0,
                    'default': 300.0},
            },
        }

    def _param(self, name):
        value = self.input_parameters.get(name)
        if value is None:
            value = self.get_schema()['properties'][name]['default']
        return value

    def _default_signal_source(self):
        names = self.config.datasources or (
            base.CONF.watcher_datasources.datasources)
        errors = []
        for name in names or ():
            try:
                if name == 'aetos':
                    from watcher.decision_engine.datasources import aetos
                    ds = aetos.AetosHelper(osc=self.osc)
                elif name == 'prometheus':
                    from watcher.decision_engine.datasources import (
                        prometheus)
                    ds = prometheus.PrometheusHelper()
                else:
                    continue
            except Exception as exc:
                # As Watcher's datasource manager: the next one, if any.
                LOG.warning('UFO: datasource %s unusable: %s', name, exc)
                errors.append('%s: %s' % (name, exc))
                continue
            return signals.PrometheusSignalSource.from_watcher_datasource(ds)
        raise RuntimeError(
            'ufo_overload_relief reads UFO\'s metrics from Prometheus: '
            'configure the aetos or prometheus datasource of Watcher '
            '([watcher_datasources] datasources)%s'
            % (''.join('; ' + e for e in errors)))

    def pre_execute(self):
        self._pre_execute()
        if self.signal_source is None:
            self.signal_source = self._default_signal_source()
        if self.migration_log is None:
            self.migration_log = WatcherActionLog(self.ctx)

    def _nodes(self):
        return [n for n in self.compute_model.get_all_compute_nodes().values()
                if n.state == element.ServiceState.ONLINE.value
                and n.status == element.ServiceState.ENABLED.value]

    def _movable(self, node):
        return [i for i in self.compute_model.get_node_instances(node)
                if not i.watcher_exclude and not i.locked
                and i.state == element.InstanceState.ACTIVE.value
                and not _dedicated(i)]

    def do_execute(self, audit=None):
        now = self.clock()
        sustain = float(self._param('sustain_s'))
        max_age = float(self._param('max_age_s'))
        nodes = {n.hostname: n for n in self._nodes()}
        histories = self.signal_source.histories(
            sorted(nodes), now, sustain + max_age)
        movable = {h: self._movable(n) for h, n in nodes.items()}
        by_uuid = {i.uuid: i for insts in movable.values() for i in insts}
        cores = self.signal_source.instance_cores(
            sorted(by_uuid), now, float(self._param('cpu_use_period_s')))
        instances = {
            h: [migration.Instance(
                uuid=i.uuid, vcpus=i.vcpus, workload_class=workload_class(i),
                cpu_cores=cores.get(i.uuid), memory_mb=i.memory)
                for i in insts]
            for h, insts in movable.items()}
        capacity = {}
        for host, node in nodes.items():
            free = self.compute_model.get_node_free_resources(node)
            capacity[host] = migration.Capacity(vcpus=free['vcpu'],
                                                memory_mb=free['memory'])
        self.decision = migration.decide(
            histories, instances, now, sustain_s=sustain, max_age_s=max_age,
            cooldown_s=float(self._param('cooldown_s')),
            max_migrations=int(self._param('max_migrations')),
            fraction=float(self._param('expected_demand_fraction')),
            last_migrated=self.migration_log.last_migrated(now),
            capacity=capacity)
        for host, reason in self.decision.held:
            LOG.warning('UFO: %s stays overloaded: %s', host, reason)
        for move in self.decision.moves:
            instance = by_uuid[move.instance]
            source = nodes[move.source]
            destination = nodes[move.destination]
            if self.compute_model.migrate_instance(instance, source,
                                                   destination):
                LOG.info('UFO: live-migrate %s: %s', move.instance,
                         move.reason)
                self.add_action_migrate(instance, 'live', source,
                                        destination)
                self.instance_migrations_count += 1

    def post_execute(self):
        self.solution.model = self.compute_model
        self.solution.set_efficacy_indicators(
            instance_migrations_count=self.instance_migrations_count,
            instances_count=len(self.compute_model.get_all_instances()))
