"""Cpuset lists and the host topology model."""

import pytest

from ufo_agent.controller import topology
from ufo_agent import cpuset


@pytest.mark.parametrize('text,cpus', [
    ('', set()),
    ('3', {3}),
    ('0-3,8', {0, 1, 2, 3, 8}),
    ('0-7,^2,^4-5', {0, 1, 3, 6, 7}),
    (' 1 , 2-3 ', {1, 2, 3}),
])
def test_parse_cpuset(text, cpus):
    assert cpuset.parse_cpuset(text) == frozenset(cpus)


@pytest.mark.parametrize('bad', ['a', '3-1', '-1', '1-2-3', None])
def test_parse_cpuset_rejects_garbage(bad):
    with pytest.raises(cpuset.CpusetError):
        cpuset.parse_cpuset(bad)


def test_format_cpuset_round_trips():
    cpus = {0, 1, 2, 5, 7, 8, 9}
    assert cpuset.format_cpuset(cpus) == '0-2,5,7-9'
    assert cpuset.parse_cpuset(cpuset.format_cpuset(cpus)) == cpus


def test_uniform_topology_groups_smt_siblings_linux_style():
    host = topology.HostTopology.uniform(4, threads_per_core=2,
                                         numa_nodes=2)
    assert host.threads_per_core == 2
    assert [c.cpus for c in host.cores] == [(0, 4), (1, 5), (2, 6), (3, 7)]
    assert [c.numa_node for c in host.cores] == [0, 0, 1, 1]
    assert host.cpus_of({0, 3}) == {0, 4, 3, 7}
    assert host.pcpus({1, 2}) == 4


def test_managed_set_keeps_only_whole_cores():
    siblings = [(0, 4), (1, 5), (2, 6), (3, 7)]
    host = topology.HostTopology(siblings, managed={1, 5, 2, 3, 7},
                                 reserved={0})
    assert [c.cpus for c in host.cores] == [(1, 5), (3, 7)]
    assert host.unmanaged_partial_cpus == {2}


def test_topology_rejects_bad_sets():
    siblings = [(0, 2), (1, 3)]
    with pytest.raises(topology.TopologyError, match='do not exist'):
        topology.HostTopology(siblings, managed={0, 9})
    with pytest.raises(topology.TopologyError, match='both managed and'):
        topology.HostTopology(siblings, managed={0, 2}, reserved={2})
    with pytest.raises(topology.TopologyError, match='two physical cores'):
        topology.HostTopology([(0, 1), (1, 2)])
    with pytest.raises(topology.TopologyError, match='span NUMA'):
        topology.HostTopology(siblings, numa_of_cpu={0: 0, 2: 1})


def test_a_core_carries_its_class():
    host = topology.HostTopology([(0, 1), (2, 3), (4,), (5,)],
                                 little={4, 5})
    assert [c.little for c in host.cores] == [False, False, True, True]
    assert host.little_core_ids == {2, 3}
    assert host.is_little(2) and not host.is_little(0)
    assert 'little' in repr(host)
    hybrid = topology.HostTopology.uniform(6, 2, little_cores=2)
    assert hybrid.little_core_ids == {4, 5}
    assert hybrid.cpus_of(hybrid.little_core_ids) == {4, 5, 10, 11}
    assert topology.HostTopology.uniform(6, 2).little_core_ids == set()


def test_siblings_of_two_classes_are_refused():
    with pytest.raises(topology.TopologyError, match='two core classes'):
        topology.HostTopology([(0, 1), (2, 3)], little={3})


def test_cpus_of_answers_the_same_from_its_memo_and_keeps_it_bounded(
        monkeypatch):
    monkeypatch.setattr(topology, '_CPUS_MEMO_SIZE', 4)
    host = topology.HostTopology.uniform(6, 2)
    for cores in ([0, 1], {0, 1}, frozenset([0, 1]), (1, 0)):
        assert host.cpus_of(cores) == {0, 1, 6, 7}
    for n in range(6):
        assert host.cpus_of(range(n)) == frozenset(
            cpu for c in range(n) for cpu in (c, c + 6))
        assert len(host._cpus_memo) <= 4
    with pytest.raises(KeyError):
        host.cpus_of([9])


@pytest.mark.parametrize('huge', ['0-999999999', '^0-999999999',
                                  '8192', '0-3,4-%d' % 10 ** 12])
def test_parse_cpuset_rejects_cpus_no_host_has(huge):
    # Before the range is made: a list from a config option or a domain
    # XML must not fill the agent's memory with CPU numbers.
    with pytest.raises(cpuset.CpusetError, match='beyond the 8192 CPUs'):
        cpuset.parse_cpuset(huge)


def test_parse_cpuset_takes_the_largest_host():
    assert cpuset.parse_cpuset('0-8191,^1-8190') == {0, 8191}
    assert len(cpuset.parse_cpuset(','.join(['0-8191'] * 10000))) == 8192
