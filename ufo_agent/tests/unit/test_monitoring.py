"""The Grafana dashboard and the Prometheus alert rules in etc/.

Every metric their expressions query must be in what the agent really
exposes: a renamed metric fails here, not on an operator's empty panel or
silent alert. The exposition is made by the agent's collector from the
snapshot of an agent run over the in-memory driver (guests in guest and
host-only mode, a fitted model, a host signal), and read back with
prometheus_client's parser. promtool (Prometheus's own PromQL parser)
checks the expressions themselves.
"""

import dataclasses
import json
import math
import os
import re
import subprocess

from prometheus_client import parser
import yaml

from ufo_agent import hostsignal
from ufo_agent.service import metrics
from ufo_agent.tests.unit.service import fakes
from ufo_agent.tests.unit.service import test_loop

TOP = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.dirname(os.path.abspath(__file__)))))
DASHBOARD = os.path.join(TOP, 'etc', 'grafana', 'ufo-agent-dashboard.json')
ALERTS = os.path.join(TOP, 'etc', 'prometheus', 'ufo-agent-alerts.yaml')

# Series Prometheus makes itself for every target.
SCRAPE_SERIES = frozenset(['up'])

_KEYWORDS = frozenset([
    'and', 'or', 'unless', 'by', 'without', 'on', 'ignoring', 'group_left',
    'group_right', 'bool', 'offset', 'inf', 'nan'])


def metric_names(expr):
    """The metric names a PromQL expression (or Grafana query) selects."""
    expr = re.sub(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'', '""', expr)
    expr = re.sub(r'\{[^}]*\}', ' ', expr)         # label matchers
    expr = re.sub(r'\[[^\]]*\]', ' ', expr)        # ranges, subqueries
    # Label lists: by (...), without (...), on (...), group_left (...).
    expr = re.sub(r'\b(by|without|on|ignoring|group_left|group_right)'
                  r'\s*\([^)]*\)', ' ', expr)
    names = set()
    for match in re.finditer(r'(?<![\w$.])([a-zA-Z_:][\w:]*)\s*(\()?',
                             expr):
        name, call = match.groups()
        if call or name.lower() in _KEYWORDS:
            continue                    # a function or an operator
        names.add(name)
    return names


def _dashboard_queries():
    with open(DASHBOARD) as f:
        dashboard = json.load(f)
    queries = []

    def walk(node):
        if isinstance(node, dict):
            for key, value in node.items():
                if key == 'expr' and isinstance(value, str):
                    queries.append(value)
                else:
                    walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)
    walk(dashboard['panels'])
    for var in dashboard['templating']['list']:
        if var['type'] == 'query':
            query = var['query']
            query = query['query'] if isinstance(query, dict) else query
            # label_values(<selector>, <label>): the selector queries.
            queries.append(re.fullmatch(r'label_values\((.*),\s*\w+\)',
                                        query).group(1))
    return queries


def _alert_queries():
    with open(ALERTS) as f:
        rules = yaml.safe_load(f)
    return [rule['expr'] for group in rules['groups']
            for rule in group['rules']]


def _exposed():
    """Sample names of the agent's exposition of a realistic snapshot."""
    driver = fakes.FakeDriver(cores=6)
    # On the black-box rules, which fit its SF model.
    busy = driver.add(fakes.FakeGuest('0b7e9a1c-busy', 8))
    driver.add(fakes.FakeGuest('5f2d4c3e-nomodule', 4, channel=False))
    quiet = driver.add(fakes.FakeGuest('9a8b7c6d-quiet', 4))
    # With a flavor latency target and a latency it publishes.
    quiet.info = dataclasses.replace(quiet.info, latency_target_us=2000)
    quiet.latency_us = 1500
    agent, tick = test_loop._agent(driver)
    agent.signal_tracker = hostsignal.HostSignalTracker()
    agent.start()
    for t in range(60):
        busy.util = 300 + 200 * math.sin(t / 5.0)
        busy.sf = 2000 + 800 * math.sin(t / 5.0)
        quiet.util = 5.0
        tick()
    families = parser.text_string_to_metric_families(
        metrics.render(agent.snapshot))
    names = set()
    for family in families:
        assert family.samples, '%s has no samples: make the snapshot ' \
            'realistic enough to show it' % family.name
        names.update(s.name for s in family.samples)
    return names


def test_metric_names_of_expressions():
    assert metric_names(
        'sum by (instance, method) (rate(ufo_a_total{job="x", '
        'm=~"$i"}[$__rate_interval])) * 60 / on(instance) group_left '
        'ufo_b and up == 1 or absent(up{job="y"}) > bool 0.5 '
        'unless ufo_c offset 5m') == {'ufo_a_total', 'ufo_b', 'up', 'ufo_c'}
    assert metric_names('changes(process_start_time_seconds[30m]) > 2') \
        == {'process_start_time_seconds'}


def test_every_metric_the_dashboard_and_the_alerts_query_is_exposed():
    exposed = _exposed() | SCRAPE_SERIES
    for source, queries in (('dashboard', _dashboard_queries()),
                            ('alert rules', _alert_queries())):
        assert len(queries) >= 10, source
        queried = set()
        for query in queries:
            names = metric_names(query)
            assert names, 'no metric in %s query %r' % (source, query)
            queried |= names
        missing = queried - exposed
        assert not missing, '%s query metrics the agent does not expose: ' \
            '%s' % (source, sorted(missing))
        assert len([n for n in queried if n.startswith('ufo_')]) >= 8


def test_the_dashboard_shows_what_an_operator_needs():
    queried = set().union(*map(metric_names, _dashboard_queries()))
    for name in ('up', 'ufo_pool_cores', 'ufo_cores_saved', 'ufo_overloaded',
                 'ufo_vm_vcpu_threads_run_delay_seconds_total',
                 'ufo_tick_duration_seconds_count', 'ufo_rollbacks_total',
                 'ufo_enforcement_errors_total',
                 'ufo_host_only_fallbacks_total',
                 'ufo_invariant_violations_total',
                 'process_resident_memory_bytes'):
        assert name in queried, name


def test_alert_rules_and_dashboard_queries_parse_with_promtool(tmp_path):
    with open(ALERTS) as f:
        rules = yaml.safe_load(f)
    names = [rule['alert'] for rule in rules['groups'][0]['rules']]
    assert {'UfoAgentDown', 'UfoAgentAbsent', 'UfoInvariantViolation',
            'UfoHostOverloaded'} <= set(names)
    for rule in rules['groups'][0]['rules']:
        assert rule['labels']['severity'] in ('critical', 'warning', 'info')
        assert rule['annotations']['summary']
    # The dashboard's queries as recording rules, with Grafana's
    # variables as a scrape would see them.
    records = [{'record': 'ufo:dashboard:%d' % i,
                'expr': q.replace('$__rate_interval', '1m').replace(
                    '$instance', '.*').replace('$uuid', '.*')}
               for i, q in enumerate(_dashboard_queries())]
    dashboard_rules = tmp_path / 'dashboard-rules.yaml'
    dashboard_rules.write_text(yaml.safe_dump(
        {'groups': [{'name': 'dashboard', 'rules': records}]}))
    result = subprocess.run(
        ['promtool', 'check', 'rules', ALERTS, str(dashboard_rules)],
        capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    assert 'SUCCESS: %d rules found' % len(names) in result.stdout
