"""The domain XML Nova 34 writes, committed under ``fixtures/nova34/``.

Written by ``python -m ufo_tools.nova_domains`` (Nova's own libvirt driver
in its functional-test harness); ``tox -e nova-functional`` checks that
Nova still writes the same. ``index.json`` names each fixture's flavor,
extra specs and the compute host's CPU layout and ``[compute]`` CPU sets.
"""

import collections
import json
import os
import re
from xml.sax import saxutils

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


_CPU_LISTS = re.compile(
    r'(<(?:vcpu|vcpupin|emulatorpin|iothreadpin)\b[^>]*\bcpuset=")([^"]*)"')
_NODE_LISTS = re.compile(r'(<(?:memory|memnode)\b[^>]*\bnodeset=")([^"]*)"')


def _remap(text, pattern, mapping):
    def sub(match):
        mapped = {mapping[item] for item in cpuset.parse_cpuset(
            match.group(2))}
        return '%s%s"' % (match.group(1), cpuset.format_cpuset(mapped))
    return pattern.sub(sub, text)


def adapt(text, cpu_map, node_map=None, uuid=None, name=None,
          domain_type='qemu', memory_mib=None, kernel=None, initrd=None,
          cmdline=''):
    """A fixture made startable on a real test host.

    Only what the host needs changes: the domain type (``qemu``: TCG), the
    fake host's CPU and NUMA node numbers (``cpu_map``, ``node_map``: fake
    number -> real one; nodes default to 0), the uuid and name (so several
    copies can be defined), the memory (every NUMA cell scaled alike), the
    disk (the image does not exist: dropped, or a direct kernel boot with
    ``kernel``) and the serial console's log file in Nova's instances
    directory. Pins, ``<numatune>``, the Nova metadata and every other
    element stay as Nova wrote them.
    """
    old_uuid = re.search(r'<uuid>([^<]*)</uuid>', text).group(1)
    if uuid:
        text = text.replace(old_uuid, uuid)
    if name:
        text = re.sub(r'<name>[^<]*</name>', '<name>%s</name>' % name, text,
                      count=1)
    text = re.sub(r'<domain type="[^"]*"', '<domain type="%s"' % domain_type,
                  text, count=1)
    text = _remap(text, _CPU_LISTS, cpu_map)
    text = _remap(text, _NODE_LISTS, collections.defaultdict(
        int, node_map or {}))
    if memory_mib:
        old = int(re.search(r'<memory>(\d+)</memory>', text).group(1))
        new = memory_mib * 1024
        text = text.replace('<memory>%d</memory>' % old,
                            '<memory>%d</memory>' % new, 1)
        cells = re.findall(r'(<cell [^>]*memory=")(\d+)"', text)
        for count, (head, kib) in enumerate(cells):
            share = (new // len(cells) if count < len(cells) - 1 else
                     new - new // len(cells) * (len(cells) - 1))
            text = text.replace('%s%s"' % (head, kib),
                                '%s%d"' % (head, share), 1)
    text = re.sub(r'\s*<disk .*?</disk>', '', text, flags=re.S)
    text = re.sub(r'\s*<log file="[^"]*"[^>]*/>', '', text)
    if kernel:
        boot = '<kernel>%s</kernel>' % saxutils.escape(kernel)
        if initrd:
            boot += '<initrd>%s</initrd>' % saxutils.escape(initrd)
        boot += '<cmdline>%s</cmdline>' % saxutils.escape(cmdline)
        text = re.sub(r'<boot dev="hd"/>', boot, text, count=1)
    return text
