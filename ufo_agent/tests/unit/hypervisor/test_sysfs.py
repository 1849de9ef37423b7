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


def _devices(tmp_path):
    """``<tmp>/devices`` with the CPU tree at ``devices/system/cpu``."""
    root = tmp_path / 'devices' / 'system' / 'cpu'
    root.mkdir(parents=True)
    return tmp_path / 'devices', root


def test_an_intel_hybrid_host_names_its_little_cores(tmp_path):
    devices, root = _devices(tmp_path)
    # Two P-cores with SMT (0-3), four E-cores without (4-7).
    siblings = {0: '0-1', 1: '0-1', 2: '2-3', 3: '2-3'}
    _tree(root, '0-7', siblings)
    for pmu, cpus in (('cpu_core', '0-3'), ('cpu_atom', '4-7')):
        (devices / pmu).mkdir()
        (devices / pmu / 'cpus').write_text(cpus + '\n')
    host = sysfs.host_cpus(str(root))
    assert host.little == frozenset(range(4, 8))


def test_unequal_cpu_capacity_names_the_little_cores(tmp_path):
    _, root = _devices(tmp_path)
    _tree(root, '0-3')
    for cpu, capacity in enumerate((1024, 1024, 446, 446)):
        (root / ('cpu%d' % cpu) / 'cpu_capacity').write_text(
            '%d\n' % capacity)
    assert sysfs.host_cpus(str(root)).little == {2, 3}


def test_equal_or_missing_capacity_is_one_class(tmp_path):
    _, root = _devices(tmp_path)
    _tree(root, '0-3')
    assert sysfs.host_cpus(str(root)).little == frozenset()
    for cpu in range(4):
        (root / ('cpu%d' % cpu) / 'cpu_capacity').write_text('1024\n')
    assert sysfs.host_cpus(str(root)).little == frozenset()


@pytest.mark.parametrize('text', ['big', '-5', ''])
def test_a_broken_capacity_file_is_an_error_naming_it(tmp_path, text):
    _, root = _devices(tmp_path)
    _tree(root, '0-1')
    (root / 'cpu1' / 'cpu_capacity').write_text(text + '\n')
    with pytest.raises(sysfs.CoreClassError, match='cpu1/cpu_capacity'):
        sysfs.host_cpus(str(root))


def test_a_cpu_in_both_hybrid_classes_is_an_error(tmp_path):
    devices, root = _devices(tmp_path)
    _tree(root, '0-3')
    for pmu, cpus in (('cpu_core', '0-2'), ('cpu_atom', '2-3')):
        (devices / pmu).mkdir()
        (devices / pmu / 'cpus').write_text(cpus + '\n')
    with pytest.raises(sysfs.CoreClassError, match='CPUs 2 are in both'):
        sysfs.host_cpus(str(root))


def test_this_machines_cores_are_read_whole():
    host = sysfs.host_cpus()
    assert host.little <= host.online
