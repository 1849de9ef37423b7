"""UFOOverloadRelief inside the real python-watcher.

The compute model is built with Watcher's own model classes, the strategy
is loaded through its ``watcher_strategies`` entry point by Watcher's
loader, and its solution is what Watcher's planner would receive.

Not collected with the rest of this directory (Nova's tests share its
process, and Nova and Watcher cannot): ``test_watcher_strategy.py`` runs
this file in a child interpreter.
"""

import configparser
import datetime
import importlib.metadata
import json
import os
import subprocess
import sys
import urllib.parse

from observabilityclient import prometheus_client
from oslo_config import cfg
from prometheus_client import parser
import pytest
import requests
from watcher.common.loader import default as watcher_default
from watcher.common import utils as watcher_utils
from watcher.decision_engine.loading import default as watcher_loading
from watcher.decision_engine.model import element
from watcher.decision_engine.model import model_root

from ufo_agent import hostsignal
from ufo_agent.service import metrics
from ufo_nova import migration
from ufo_nova.watcher import signals
from ufo_nova.watcher import strategy as strategy_mod

NOW = 1_800_000_000.0
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))
PROJECT = '91FFFE30-78A0-4152-ACD2-8310FF274DC9'


def _uuid(i):
    return '%08d-dc19-4982-9383-087498bfde03' % i


def build_model(hosts, placements):
    """A Watcher ModelRoot, as its own faker_cluster_state builds one.

    :param hosts: host names, each 32 CPUs at ratio 4, 256 GiB.
    :param placements: ``[(host, vcpus, extra specs, state), ...]``.
    """
    model = model_root.ModelRoot()
    nodes = {}
    for i, host in enumerate(hosts):
        node = element.ComputeNode(
            id=i, uuid='node-%s' % host, hostname=host, memory=262144,
            memory_mb_reserved=0, memory_ratio=1.0, disk=1000,
            disk_gb_reserved=0, disk_ratio=1.0, vcpus=32, vcpu_reserved=0,
            vcpu_ratio=4.0)
        model.add_node(node)
        nodes[host] = node
    for i, (host, vcpus, specs, state) in enumerate(placements):
        instance = element.Instance(
            uuid=_uuid(i), name='vm%d' % i, memory=2048 * vcpus, disk=20,
            vcpus=vcpus, metadata={}, project_id=PROJECT,
            created=datetime.datetime(2026, 12, 1,
                                      tzinfo=datetime.timezone.utc),
            host=host, hypervisor_hostname=host, state=state,
            flavor_extra_specs=specs)
        model.add_instance(instance)
        model.map_instance(instance, nodes[host])
    return model


BE = {'ufo:class': 'be'}
LC = {'ufo:class': 'lc'}
ACTIVE = element.InstanceState.ACTIVE.value


def _signal(state, t, idle=0, unmet=0):
    return hostsignal.HostSignal(
        state=state, idle_cores=idle, reclaimable_cores=idle,
        managed_cores=32, unmet_cores=unmet, sequence=int(t), timestamp=t,
        source='agent')


def feed(source, host, states, idle=0, unmet=0, until=NOW, step=30.0,
         span=600.0):
    """Signals every ``step`` s over ``span`` s; ``states(t)`` per tick."""
    t = until - span
    while t <= until:
        state = states(t)
        source.record(host, _signal(
            state, t, idle=idle,
            unmet=unmet if state == hostsignal.OVERLOADED else 0))
        t += step


def always(state):
    return lambda t: state


class MigrationLog:
    def __init__(self, last=None):
        self.last = dict(last or {})

    def last_migrated(self, now):
        return dict(self.last)


def make_strategy(model, source, params=None, last=None):
    strategy = strategy_mod.UFOOverloadRelief(
        config=watcher_utils.Struct(datasources=None))
    strategy._compute_model = model
    strategy.input_parameters = watcher_utils.Struct(params or {})
    strategy.signal_source = source
    strategy.migration_log = MigrationLog(last)
    strategy.clock = lambda: NOW
    return strategy


def cloud(overloaded_for=600.0):
    """h0 overloaded (unmet 3) for ``overloaded_for`` s, h1 and h2 not."""
    model = build_model(
        ['h0', 'h1', 'h2'],
        [('h0', 8, LC, ACTIVE), ('h0', 4, BE, ACTIVE),
         ('h0', 2, BE, ACTIVE), ('h0', 16, BE, ACTIVE),
         ('h1', 4, LC, ACTIVE)])
    source = signals.DirectSignalSource()
    feed(source, 'h0', lambda t: (hostsignal.OVERLOADED
                                  if t >= NOW - overloaded_for
                                  else hostsignal.UNDERLOADED), unmet=3)
    feed(source, 'h1', always(hostsignal.UNDERLOADED), idle=6)
    feed(source, 'h2', always(hostsignal.UNDERLOADED), idle=12)
    return model, source


def actions(solution):
    return [(a['action_type'], a['input_parameters']['resource_id'],
             a['input_parameters']['source_node'],
             a['input_parameters']['destination_node'],
             a['input_parameters']['migration_type'])
            for a in solution.actions]


def test_sustained_overload_live_migrates_the_covering_be_guest():
    model, source = cloud()
    # The BE guests of 2, 4 and 16 vCPUs use 1 (expected), 1.5 and 3
    # cores: the 16-vCPU one is the only BE guest that covers the 3 unmet
    # cores, and BE goes before the 8-vCPU LC guest (4 expected cores).
    source.set_instance_cores(_uuid(1), 1.5)
    source.set_instance_cores(_uuid(3), 3.0)
    strategy = make_strategy(model, source)
    solution = strategy.execute()
    assert actions(solution) == [
        ('migrate', _uuid(3), 'h0', 'h2', 'live')]
    # The model Watcher hands to the planner has the instance moved.
    assert model.get_node_by_instance_uuid(_uuid(3)).hostname == 'h2'
    assert solution.model is model
    efficacy = {i.name: i.value for i in solution.global_efficacy}
    assert efficacy == {'live_migrations_count': 20.0}
    [move] = strategy.decision.moves
    # The strategy looks back sustain_s + max_age_s (300 + 120 s).
    assert 'h0 overloaded for at least 420 s (unmet 3 cores)' in move.reason
    assert 'h2 underloaded with 12 reclaimable, 12 idle cores >= 8 ' \
           'needed' in move.reason


def test_no_actions_without_sustained_overload():
    model, source = cloud(overloaded_for=200.0)
    solution = make_strategy(model, source).execute()
    assert actions(solution) == []
    assert model.get_node_by_instance_uuid(_uuid(3)).hostname == 'h0'


def test_no_actions_when_no_host_is_overloaded():
    model, source = cloud(overloaded_for=-1.0)
    assert actions(make_strategy(model, source).execute()) == []


def test_cooldown_keeps_a_recently_migrated_guest():
    model, source = cloud()
    source.set_instance_cores(_uuid(3), 3.0)
    strategy = make_strategy(model, source,
                             params={'cooldown_s': 3600},
                             last={_uuid(3): NOW - 600})
    solution = strategy.execute()
    # The 16-vCPU guest is in cooldown; the 8-vCPU LC guest gives back 4
    # cores and covers the shortfall, where the 4- and 2-vCPU BE guests
    # (2 and 1 cores) do not.
    assert actions(solution) == [('migrate', _uuid(0), 'h0', 'h2', 'live')]
    later = make_strategy(*cloud(), params={'cooldown_s': 3600},
                          last={_uuid(3): NOW - 3600})
    assert [a[1] for a in actions(later.execute())] == [_uuid(3)]


def test_every_guest_in_cooldown_gives_no_action():
    model, source = cloud()
    last = {_uuid(i): NOW - 60 for i in range(4)}
    strategy = make_strategy(model, source, last=last)
    assert actions(strategy.execute()) == []
    assert strategy.decision.held[0][0] == 'h0'


def test_excluded_locked_stopped_and_dedicated_guests_stay():
    model = build_model(
        ['h0', 'h1'],
        [('h0', 4, BE, ACTIVE), ('h0', 4, BE, ACTIVE),
         ('h0', 4, BE, element.InstanceState.STOPPED.value),
         ('h0', 4, dict(BE, **{'hw:cpu_policy': 'dedicated'}), ACTIVE)])
    model.get_instance_by_uuid(_uuid(0)).watcher_exclude = True
    model.get_instance_by_uuid(_uuid(1)).locked = True
    source = signals.DirectSignalSource()
    feed(source, 'h0', always(hostsignal.OVERLOADED), unmet=1)
    feed(source, 'h1', always(hostsignal.UNDERLOADED), idle=20)
    strategy = make_strategy(model, source)
    assert actions(strategy.execute()) == []


def test_never_to_a_disabled_or_silent_host():
    model, source = cloud()
    model.get_node_by_uuid('node-h2').status = (
        element.ServiceState.DISABLED.value)
    # h1 has 6 idle cores, the 16-vCPU guest needs 8: the 8-vCPU LC guest
    # (4 cores, covers 3) goes to h1.
    assert actions(make_strategy(model, source).execute()) == [
        ('migrate', _uuid(0), 'h0', 'h1', 'live')]
    model, _ = cloud()
    silent = signals.DirectSignalSource()
    feed(silent, 'h0', always(hostsignal.OVERLOADED), unmet=3)
    feed(silent, 'h2', always(hostsignal.UNDERLOADED), idle=12,
         until=NOW - 200)
    assert actions(make_strategy(model, silent).execute()) == []


def test_nova_allocation_limits_the_destination():
    model, source = cloud()
    # h2 full by Nova's books: 128 vCPUs allocatable, 125 used.
    filler = element.Instance(
        uuid=_uuid(99), name='filler', memory=1024, disk=1, vcpus=125,
        metadata={}, project_id=PROJECT, host='h2',
        hypervisor_hostname='h2', state=ACTIVE, flavor_extra_specs={},
        created=datetime.datetime(2026, 12, 1,
                                  tzinfo=datetime.timezone.utc))
    model.add_instance(filler)
    model.map_instance(filler, model.get_node_by_uuid('node-h2'))
    source.set_instance_cores(_uuid(3), 3.0)
    # Only the 2-vCPU guest would fit h2's 3 free vCPUs but covers 1 core
    # of 3; the 8-vCPU LC guest covers and goes to h1 (6 idle >= 4).
    assert actions(make_strategy(model, source).execute()) == [
        ('migrate', _uuid(0), 'h0', 'h1', 'live')]


def test_max_migrations_per_audit():
    model = build_model(
        ['h0', 'h1', 'h2', 'h3'],
        [('h0', 4, BE, ACTIVE), ('h1', 4, BE, ACTIVE),
         ('h2', 4, BE, ACTIVE)])
    source = signals.DirectSignalSource()
    for host, unmet in (('h0', 1), ('h1', 2), ('h2', 1)):
        feed(source, host, always(hostsignal.OVERLOADED), unmet=unmet)
    feed(source, 'h3', always(hostsignal.UNDERLOADED), idle=32)
    strategy = make_strategy(model, source, params={'max_migrations': 2})
    assert [a[2] for a in actions(strategy.execute())] == ['h1', 'h0']


def _entry_point_source():
    """The entry point as setup.cfg declares it."""
    parser = configparser.ConfigParser()
    parser.read(os.path.join(ROOT, 'setup.cfg'))
    return parser['entry_points']['watcher_strategies']


def test_setup_cfg_declares_the_entry_point():
    assert _entry_point_source().strip() == (
        'ufo_overload_relief = ufo_nova.watcher.strategy:UFOOverloadRelief')


@pytest.fixture
def entry_point(tmp_path, monkeypatch):
    """The entry point visible to stevedore, installed or from setup.cfg."""
    found = importlib.metadata.entry_points(group='watcher_strategies',
                                            name='ufo_overload_relief')
    if not found:
        # A source checkout on PYTHONPATH: publish setup.cfg's entry point
        # the way an install would, in a dist-info directory.
        dist = tmp_path / 'ufo_nova-0.0.0.dist-info'
        dist.mkdir()
        (dist / 'METADATA').write_text(
            'Metadata-Version: 2.1\nName: ufo-nova\nVersion: 0.0.0\n')
        (dist / 'entry_points.txt').write_text(
            '[watcher_strategies]\n%s\n' % _entry_point_source().strip())
        monkeypatch.syspath_prepend(str(tmp_path))
    yield


def test_watcher_loads_the_strategy_by_its_entry_point_name(entry_point):
    # Watcher's strategy loader, on a configuration of its own: the
    # loader registers the strategy's options and re-reads the
    # configuration files, which needs a parsed ConfigOpts (the decision
    # engine's is; the test process's global one is Nova's too).
    conf = cfg.ConfigOpts()
    conf([], project='watcher')
    loader = watcher_loading.DefaultStrategyLoader()
    loader = watcher_default.DefaultLoader(loader.namespace, conf=conf)
    assert loader.list_available()['ufo_overload_relief'] is (
        strategy_mod.UFOOverloadRelief)
    strategy = loader.load('ufo_overload_relief')
    assert isinstance(strategy, strategy_mod.UFOOverloadRelief)
    assert strategy.goal.name == 'workload_balancing'
    assert strategy.name == 'ufo_overload_relief'
    # The loader registered the strategy's options under its group.
    assert strategy.config.datasources is None
    # And it runs once given a model and signals.
    model, source = cloud()
    strategy._compute_model = model
    strategy.input_parameters = watcher_utils.Struct()
    strategy.signal_source = source
    strategy.migration_log = MigrationLog()
    strategy.clock = lambda: NOW
    assert len(strategy.execute().actions) == 1


def test_schema_defaults_validate_with_watchers_own_validator():
    import jsonschema
    schema = strategy_mod.UFOOverloadRelief.get_schema()
    params = {k: v['default'] for k, v in schema['properties'].items()}
    jsonschema.validate(params, schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(dict(params, max_migrations=-1), schema)


def test_without_a_prometheus_datasource_the_strategy_says_so():
    strategy = strategy_mod.UFOOverloadRelief(
        config=watcher_utils.Struct(datasources=['gnocchi']))
    with pytest.raises(RuntimeError, match='aetos or prometheus'):
        strategy._default_signal_source()
    # Watcher's prometheus datasource without [prometheus_client] host.
    strategy = strategy_mod.UFOOverloadRelief(
        config=watcher_utils.Struct(datasources=['gnocchi', 'prometheus']))
    with pytest.raises(RuntimeError, match='prometheus: .*host must be set'):
        strategy._default_signal_source()


def test_the_prometheus_source_uses_watchers_datasource_client(
        monkeypatch):
    from watcher.decision_engine.datasources import prometheus as ds_mod

    _, client = prometheus({'h0.example.com': []})

    class Helper(ds_mod.PrometheusHelper):
        def _setup_prometheus_client(self):
            return client

    # Watcher's own helper, but for where its client connects to.
    monkeypatch.setattr(ds_mod, 'PrometheusHelper', Helper)
    strategy = strategy_mod.UFOOverloadRelief(
        config=watcher_utils.Struct(datasources=['prometheus']))
    source = strategy._default_signal_source()
    assert source.client is client
    assert source.host_label == 'fqdn'


# The Prometheus source, over the agent's real exposition.


class FakePrometheus(requests.adapters.BaseAdapter):
    """Answers /api/v1/query like Prometheus, from canned scrapes.

    A requests transport adapter (no socket: the decision engine's
    imports may monkey-patch them): ``scrapes`` is ``{host: [(t, text
    exposition), ...]}``; each scrape is parsed with prometheus_client's
    own parser and served back as the samples a range selector or the
    CPU-use query selects.
    """

    def __init__(self, scrapes, host_label='fqdn'):
        super().__init__()
        self.scrapes = scrapes
        self.host_label = host_label
        self.queries = []

    def samples(self):
        for host, scrapes in self.scrapes.items():
            for t, text in scrapes:
                for family in parser.text_string_to_metric_families(text):
                    for s in family.samples:
                        labels = dict(s.labels, __name__=s.name)
                        labels[self.host_label] = host
                        yield labels, t, s.value

    def send(self, request, **kwargs):
        url = urllib.parse.urlparse(request.url)
        if url.path == '/api/v1/targets':
            # What Watcher's datasource reads its host labels from.
            return self._respond(request, {'activeTargets': [
                {'labels': {self.host_label: host, 'job': 'ufo-agent',
                            'instance': host + ':9477'}}
                for host in self.scrapes]})
        assert url.path == '/api/v1/query', url.path
        query = urllib.parse.parse_qs(url.query)
        promql = query['query'][0]
        now = float(query['time'][0]) if 'time' in query else NOW
        self.queries.append(promql)
        if promql.startswith('{__name__=~'):
            body = self._range(promql, now)
        else:
            body = self._cpu(promql, now)
        return self._respond(request, body)

    @staticmethod
    def _respond(request, body):
        response = requests.Response()
        response.status_code = 200
        response._content = json.dumps(
            {'status': 'success', 'data': body}).encode()
        response.headers['Content-Type'] = 'application/json'
        response.request = request
        response.url = request.url
        return response

    def close(self):
        pass

    def _range(self, promql, now):
        names = promql.split('"')[1].split('|')
        window = float(promql.rsplit('[', 1)[1].rstrip('s]'))
        series = {}
        for labels, t, value in self.samples():
            if labels['__name__'] in names and now - window < t <= now:
                key = tuple(sorted(labels.items()))
                series.setdefault(key, []).append([t, repr(value)])
        return {'resultType': 'matrix', 'result': [
            {'metric': dict(k), 'values': v} for k, v in series.items()]}

    def _cpu(self, promql, now):
        assert promql.startswith('avg_over_time(ufo_vm_utilization_vcpus[')
        values = {}
        for labels, t, value in self.samples():
            if labels['__name__'] == 'ufo_vm_utilization_vcpus':
                values.setdefault(labels['uuid'], []).append(value)
        return {'resultType': 'vector', 'result': [
            {'metric': {'uuid': u}, 'value': [now, repr(sum(v) / len(v))]}
            for u, v in values.items()]}


def prometheus(scrapes):
    """A real PrometheusAPIClient whose requests reach FakePrometheus."""
    fake = FakePrometheus(scrapes)
    session = requests.Session()
    session.mount('http://', fake)
    client = prometheus_client.PrometheusAPIClient(
        'prometheus.example.com:9090', session=session, scheme='http')
    return fake, client


def _exposition(state, idle, unmet, vms=()):
    return metrics.render({
        'pools': {'managed_cores': 32, 'vcpu_cores': 32 - idle,
                  'emulator_cores': 0, 'idle_cores': idle,
                  'emulator_util': 0.0,
                  'overloaded': state == hostsignal.OVERLOADED,
                  'shortfall_cores': unmet},
        'signal': {'state': state, 'reclaimable_cores': idle,
                   'unmet_cores': unmet, 'sequence': 7},
        'vms': [{'uuid': u, 'util': util} for u, util in vms],
    })


def test_prometheus_source_rebuilds_signals_from_the_agents_metrics():
    over = _exposition(hostsignal.OVERLOADED, 0, 3,
                       vms=[(_uuid(3), 300.0), (_uuid(1), 150.0)])
    under = _exposition(hostsignal.UNDERLOADED, 12, 0)
    steps = [NOW - 600 + 30 * k for k in range(21)]
    fake, client = prometheus({
        'h0.example.com': [(t, over) for t in steps],
        'h2.example.com': [(t, under) for t in steps],
        'h1.example.com': [(t, _exposition(hostsignal.UNDERLOADED, 6, 0))
                           for t in steps[:3]],
    })
    source = signals.PrometheusSignalSource(client, 'fqdn')
    histories = source.histories(['h0', 'h1', 'h2', 'h9'], NOW, 420)
    # h1's last scrape is older than the window; h9 has no agent.
    assert sorted(histories) == ['h0', 'h2']
    h0 = histories['h0']
    assert [s.timestamp for s in h0] == steps[-14:]
    assert {(s.state, s.unmet_cores, s.idle_cores, s.managed_cores,
             s.sequence) for s in h0} == {(hostsignal.OVERLOADED, 3, 0,
                                           32, 7)}
    assert histories['h2'][-1].idle_cores == 12
    cores = source.instance_cores([_uuid(3), _uuid(1), _uuid(2)], NOW, 300)
    # ufo_vm_utilization_vcpus is exported in vCPUs (percent / 100).
    assert cores == {_uuid(3): 3.0, _uuid(1): 1.5}
    assert fake.queries == [
        '{__name__=~"ufo_host_state|ufo_host_signal_reclaimable_cores|'
        'ufo_host_signal_sequence|ufo_host_signal_unmet_cores|'
        'ufo_managed_cores|ufo_pool_cores"}[420s]',
        'avg_over_time(ufo_vm_utilization_vcpus[300s])']

    # The strategy over that source: h1's signal is 540 s old (unknown).
    model, _ = cloud()
    solution = make_strategy(model, source).execute()
    assert actions(solution) == [('migrate', _uuid(3), 'h0', 'h2', 'live')]


def test_resolve_hosts_follows_watchers_fqdn_rule():
    labels = ['a.example.com', 'b', 'c.x.y']
    assert signals.resolve_hosts(['a', 'b', 'c', 'a.example.com', 'd'],
                                 labels) == {
        'a': 'a.example.com', 'b': 'b', 'c': 'c.x.y',
        'a.example.com': 'a.example.com'}


def test_direct_source_keeps_order_and_a_bounded_history():
    source = signals.DirectSignalSource(keep_s=100)
    for t in range(0, 300, 10):
        source.record('h', _signal(hostsignal.UNDERLOADED, float(t)))
    assert [s.timestamp for s in source.histories(['h'], 290, 1000)['h']][
        0] == 190.0
    with pytest.raises(ValueError):
        source.record('h', _signal(hostsignal.UNDERLOADED, 5.0))
    assert source.histories(['x'], 290, 1000) == {}


# Run apart: it parses the global oslo.config CONF for Watcher's database,
# which the other cases of this process share.
_ACTION_LOG_SCRIPT = """
import json, sys
from oslo_config import cfg
from watcher import objects
objects.register_all()
from watcher.common import context
from watcher.tests.local_fixtures import db as db_fixture
from ufo_nova.watcher import strategy

cfg.CONF([], project='watcher')
cfg.CONF.set_override('connection', 'sqlite://', group='database')
fixture = db_fixture.WatcherDatabase()
fixture.setUp()
try:
    db = fixture.dbapi
    db.create_action_plan({'uuid': '76be87bd-3422-43f9-93a0-e85a577e3061',
                           'audit_id': 1, 'strategy_id': 1,
                           'state': 'ONGOING'})
    rows = [('migrate', 'vm-a', 'SUCCEEDED'), ('migrate', 'vm-a', 'SUCCEEDED'),
            ('migrate', 'vm-b', 'FAILED'), ('resize', 'vm-c', 'SUCCEEDED'),
            ('migrate', 'vm-d', 'ONGOING')]
    for i, (kind, vm, state) in enumerate(rows):
        uuid = '10a47dd1-4874-4298-91cf-eff046dbdb%02d' % i
        db.create_action({'uuid': uuid, 'action_plan_id': 1,
                          'action_type': kind, 'state': 'PENDING',
                          'input_parameters': {'resource_id': vm},
                          'parents': []})
        db.update_action(uuid, {'state': state})
    ctx = context.make_context(is_admin=True)
    log = strategy.WatcherActionLog(ctx)
    json.dump({'last': log.last_migrated(float(sys.argv[1])),
               'updated': [db.get_action_by_uuid(
                   ctx, '10a47dd1-4874-4298-91cf-eff046dbdb%02d' % i
               ).updated_at.isoformat() for i in range(2)]}, sys.stdout)
finally:
    fixture.cleanUp()
"""


def test_watcher_action_log_reads_watchers_own_action_records():
    out = subprocess.run(
        [sys.executable, '-c', _ACTION_LOG_SCRIPT, repr(NOW)],
        capture_output=True, text=True, timeout=120,
        env=dict(os.environ, PYTHONPATH=os.pathsep.join(
            [ROOT] + [p for p in sys.path if p])))
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    last = result['last']
    # Succeeded migrations at their last update (the later of vm-a's
    # two); an ongoing one counts as now; failed ones and other actions
    # not at all.
    assert sorted(last) == ['vm-a', 'vm-d']
    assert last['vm-d'] == NOW
    latest = max(datetime.datetime.fromisoformat(u).replace(
        tzinfo=datetime.timezone.utc) for u in result['updated'])
    assert last['vm-a'] == pytest.approx(latest.timestamp())


def test_workload_class_reads_the_flavor_extra_spec():
    model = build_model(['h'], [('h', 1, {'ufo:class': ' BE '}, ACTIVE),
                                ('h', 1, {'ufo:class': 'auto'}, ACTIVE),
                                ('h', 1, {}, ACTIVE)])
    classes = [strategy_mod.workload_class(model.get_instance_by_uuid(
        _uuid(i))) for i in range(3)]
    assert classes == [migration.BE, migration.LC, migration.LC]
