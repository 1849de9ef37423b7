"""Read the host's CPUs from sysfs: online CPUs, SMT siblings, NUMA nodes.

``root`` is ``/sys/devices/system/cpu`` or a copy of it for tests. An
online CPU without a ``thread_siblings_list`` is its own core; a CPU
directory without a ``node<N>`` link has no NUMA node (kernels without
NUMA support).
"""

import os

from ufo_agent import cpuset
from ufo_agent.driver import base

CPU_ROOT = '/sys/devices/system/cpu'


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
    return base.HostCpus(tuple(sorted(siblings)), numa, online)
