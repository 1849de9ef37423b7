"""Host CPUs from a fake sysfs tree, and from this machine's."""

import pytest

from ufo_agent import cpuset
from ufo_agent.hypervisor import sysfs


def _tree(root, online, siblings=None, nodes=None):
    """``siblings``: CPU -> thread_siblings_list text, None for no file."""
    (root / 'online').write_text(online + '\n')
    for cpu in cpuset.parse_cpuset(online):
        topo = root / ('cpu%d' % cpu) / 'topology'
        topo.mkdir(parents=True)
        text = (siblings or {}).get(cpu, str(cpu))
        if text is not None:
            (topo / 'thread_siblings_list').write_text(text + '\n')
        (topo / 'core_id').write_text('0\n')
        if nodes is not None:
            (root / ('cpu%d' % cpu) / ('node%d' % nodes[cpu])).mkdir()
    return str(root)


def test_smt_siblings_and_numa_nodes(tmp_path):
    # Two sockets of two cores with two threads each, Intel numbering.
    siblings = {0: '0,4', 4: '0,4', 1: '1,5', 5: '1,5',
                2: '2,6', 6: '2,6', 3: '3,7', 7: '3,7'}
    nodes = {0: 0, 1: 0, 4: 0, 5: 0, 2: 1, 3: 1, 6: 1, 7: 1}
    host = sysfs.host_cpus(_tree(tmp_path, '0-7', siblings, nodes))
    assert host.online == frozenset(range(8))
    assert host.siblings == ((0, 4), (1, 5), (2, 6), (3, 7))
    assert host.numa_of_cpu == nodes


def test_offline_cpus_are_left_out_of_their_core(tmp_path):
    (tmp_path / 'cpu3').mkdir()         # offline: present, not online
    siblings = {0: '0-1', 1: '0-1', 2: '2-3'}
    host = sysfs.host_cpus(_tree(tmp_path, '0-2', siblings))
    assert host.online == {0, 1, 2}
    assert host.siblings == ((0, 1), (2,))


def test_missing_topology_makes_a_core_of_its_own(tmp_path):
    host = sysfs.host_cpus(_tree(tmp_path, '0-1,4', {1: None}))
    assert host.siblings == ((0,), (1,), (4,))
    assert host.numa_of_cpu == {}


def test_node_directories_must_be_numbered(tmp_path):
    root = _tree(tmp_path, '0', nodes={0: 2})
    (tmp_path / 'cpu0' / 'nodeX').mkdir()
    (tmp_path / 'cpu0' / 'node').mkdir()
    assert sysfs.host_cpus(root).numa_of_cpu == {0: 2}


@pytest.mark.parametrize('online', ['0-', 'x'])
def test_unreadable_online_list_is_an_error(tmp_path, online):
    (tmp_path / 'online').write_text(online)
    with pytest.raises(cpuset.CpusetError):
        sysfs.host_cpus(str(tmp_path))


def test_missing_tree_is_an_error(tmp_path):
    with pytest.raises(OSError):
        sysfs.host_cpus(str(tmp_path / 'none'))


def test_this_host():
    host = sysfs.host_cpus()
    assert host.online
    grouped = [cpu for group in host.siblings for cpu in group]
    assert sorted(grouped) == sorted(host.online)
    assert set(host.numa_of_cpu) <= host.online


def test_online_cpus(tmp_path):
    (tmp_path / 'online').write_text('0-3,6\n')
    assert sysfs.online_cpus(str(tmp_path)) == frozenset([0, 1, 2, 3, 6])
