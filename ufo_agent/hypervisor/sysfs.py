"""Read the host's CPUs from sysfs: online CPUs, SMT siblings, NUMA nodes,
core classes.

``root`` is ``/sys/devices/system/cpu`` or a copy of it for tests. An
online CPU without a ``thread_siblings_list`` is its own core; a CPU
directory without a ``node<N>`` link has no NUMA node (kernels without
NUMA support).

Core classes: an Intel hybrid host lists its big and little cores'
CPUs in ``/sys/devices/cpu_core/cpus`` and ``/sys/devices/cpu_atom/cpus``
(the PMU of each class; ``devices`` is ``root``'s grandparent); other
hosts with unequal cores (arm64 big.LITTLE) give each CPU a
``cpu_capacity`` below the largest, 1024. Neither there, or every CPU
alike: one class.
"""

import logging
import os

from ufo_agent import cpuset
from ufo_agent.driver import base

CPU_ROOT = '/sys/devices/system/cpu'
LOG = logging.getLogger(__name__)


class CoreClassError(ValueError):
    """The host's core-class files say something that cannot be."""


def _read_cpuset(path):
    with open(path) as handle:
        return cpuset.parse_cpuset(handle.read().strip())


def online_cpus(root=CPU_ROOT):
    """The online CPUs of this host."""
    return _read_cpuset(os.path.join(root, 'online'))


def host_cpus(root=CPU_ROOT):
    """Return the :class:`~ufo_agent.driver.base.HostCpus` of this host.

    Offline siblings are left out of the sibling groups.
    """
    online = online_cpus(root)
    siblings, numa = set(), {}
    for cpu in sorted(online):
        cpu_dir = os.path.join(root, 'cpu%d' % cpu)
        try:
            group = _read_cpuset(os.path.join(cpu_dir, 'topology',
                                              'thread_siblings_list'))
        except OSError:
            group = frozenset([cpu])
        siblings.add(tuple(sorted(group & online)))
        for name in os.listdir(cpu_dir):
            if name.startswith('node') and name[4:].isdigit():
                numa[cpu] = int(name[4:])
    return base.HostCpus(tuple(sorted(siblings)), numa, online,
                         little_cpus(root, online))


def _read_text(path):
    try:
        with open(path) as handle:
            return handle.read().strip()
    except FileNotFoundError:
        return None


def little_cpus(root, online):
    """The online CPUs of the host's smaller cores (empty: one class).

    Raises :class:`CoreClassError` when the files contradict themselves,
    so the agent stops with the file named rather than guessing.
    """
    devices = os.path.dirname(os.path.dirname(os.path.normpath(root)))
    hybrid = {}
    for pmu in ('cpu_core', 'cpu_atom'):
        path = os.path.join(devices, pmu, 'cpus')
        text = _read_text(path)
        if text is None:
            continue
        try:
            hybrid[pmu] = cpuset.parse_cpuset(text) if text else frozenset()
        except ValueError as exc:
            raise CoreClassError('%s: %s' % (path, exc))
    if hybrid:
        big = hybrid.get('cpu_core', frozenset())
        little = hybrid.get('cpu_atom', frozenset())
        if big & little:
            raise CoreClassError(
                'CPUs %s are in both %s and %s' % (
                    cpuset.format_cpuset(big & little),
                    os.path.join(devices, 'cpu_core', 'cpus'),
                    os.path.join(devices, 'cpu_atom', 'cpus')))
        return frozenset(little & online)
    capacity = {}
    for cpu in online:
        path = os.path.join(root, 'cpu%d' % cpu, 'cpu_capacity')
        text = _read_text(path)
        if text is None:
            continue
        try:
            capacity[cpu] = int(text)
        except ValueError:
            raise CoreClassError('%s: not a number: %r' % (path, text))
        if capacity[cpu] <= 0:
            raise CoreClassError('%s: %d' % (path, capacity[cpu]))
    if not capacity or len(set(capacity.values())) == 1:
        return frozenset()
    if len(capacity) != len(online):
        LOG.warning('cpu_capacity is missing for some CPUs: every core '
                    'is taken as one class')
        return frozenset()
    top = max(capacity.values())
    return frozenset(cpu for cpu, value in capacity.items() if value < top)
