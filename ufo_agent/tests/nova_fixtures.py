"""The domain XML Nova 34 writes, committed under ``fixtures/nova34/``.

Written by ``python -m ufo_tools.nova_domains`` (Nova's own libvirt driver
in its functional-test harness); ``tox -e nova-functional`` checks that
Nova still writes the same. ``index.json`` names each fixture's flavor,
extra specs and the compute host's CPU layout and ``[compute]`` CPU sets.
"""

import json
import os
import re

from ufo_agent import cpuset

FIXTURE_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                           'fixtures', 'nova34')


def index():
    with open(os.path.join(FIXTURE_DIR, 'index.json')) as handle:
        return json.load(handle)


def names():
    """Fixture names in boot order."""
    return [entry['name'] for entry in index()['fixtures']]


def xml(name):
    with open(os.path.join(FIXTURE_DIR, name + '.xml')) as handle:
        return handle.read()


class Host:
    """The compute host the fixtures were written for."""

    def __init__(self, layout=None):
        layout = layout or index()['host']
        per_node = layout['cpu_cores'] * layout['cpu_threads']
        nodes = layout['cpu_nodes'] * layout['cpu_sockets']
        self.online = frozenset(range(per_node * nodes))
        # fakelibvirt numbers CPUs node after node.
        self.numa_of_cpu = {cpu: cpu // per_node for cpu in self.online}
        self.shared = cpuset.parse_cpuset(layout['cpu_shared_set'])
        self.dedicated = cpuset.parse_cpuset(layout['cpu_dedicated_set'])
        self.reserved = self.online - self.shared - self.dedicated

    def node_cpus(self, node):
        return frozenset(cpu for cpu, n in self.numa_of_cpu.items()
                         if n == node)


def old_nova(text, version='31.0.0'):
    """The XML as Nova before 32.0.0 writes it: no extra specs.

    Nova before 32.0.0 writes the flavor without ``<nova:extraSpecs>``;
    the ``<nova:image>`` element (with the image properties) goes too, the
    worst case. The CPU pins and everything else stay.
    """
    text = re.sub(r'\s*<nova:extraSpecs>.*?</nova:extraSpecs>', '', text,
                  flags=re.S)
    text = re.sub(r'\s*<nova:extraSpecs/>', '', text)
    text = re.sub(r'\s*<nova:image\b.*?</nova:image>', '', text, flags=re.S)
    return re.sub(r'<nova:package version="[^"]*"/>',
                  '<nova:package version="%s"/>' % version, text)
