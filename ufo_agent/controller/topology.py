"""Host CPU topology: logical CPUs grouped into physical cores and NUMA nodes.

The unit of allocation is one physical core: all of its managed SMT
siblings go to the same pool, so two guests never share a core (paper
section 3.1). With SMT on, a VM's pCPU count moves in steps of two. A
core is *little* on a host with two classes of cores (hybrid E-cores,
or a lower ``cpu_capacity``): the emulator pool takes those first.
"""

import collections
import dataclasses

from ufo_agent import cpuset

# Distinct core sets whose CPUs cpus_of() remembers (a few per VM).
_CPUS_MEMO_SIZE = 4096


class TopologyError(ValueError):
    """The managed CPU set does not fit the host topology."""


@dataclasses.dataclass(frozen=True, order=True)
class Core:
    """One physical core: its id, NUMA node, managed logical CPUs, class."""

    core_id: int
    numa_node: int
    cpus: tuple
    little: bool = False


class HostTopology:
    """The managed part of a host's CPUs, as whole physical cores.

    ``siblings`` lists every physical core as a tuple of logical CPUs;
    ``numa_of_cpu`` maps a CPU to its NUMA node. Only cores whose CPUs are
    all in ``managed`` (and none in ``reserved``) are managed, so a core is
    never split between a guest and something ufo-agent does not control.
    """

    def __init__(self, siblings, numa_of_cpu=None, managed=None,
                 reserved=frozenset(), little=frozenset()):
        numa_of_cpu = numa_of_cpu or {}
        all_cpus = [cpu for group in siblings for cpu in group]
        if len(all_cpus) != len(set(all_cpus)):
            raise TopologyError('a CPU is listed in two physical cores')
        managed = frozenset(all_cpus) if managed is None else managed
        unknown = set(managed) - set(all_cpus)
        if unknown:
            raise TopologyError(
                'managed CPUs %s do not exist on this host'
                % cpuset.format_cpuset(unknown))
        overlap = set(managed) & set(reserved)
        if overlap:
            raise TopologyError(
                'CPUs %s are both managed and reserved'
                % cpuset.format_cpuset(overlap))
        cores, partial = [], []
        for core_id, group in enumerate(sorted(tuple(sorted(g))
                                               for g in siblings)):
            inside = [cpu for cpu in group if cpu in managed]
            if not inside:
                continue
            if len(inside) != len(group):
                partial.extend(inside)
                continue
            nodes = {numa_of_cpu.get(cpu, 0) for cpu in group}
            if len(nodes) != 1:
                raise TopologyError(
                    'SMT siblings %s span NUMA nodes' % (group,))
            classes = {cpu in little for cpu in group}
            if len(classes) != 1:
                raise TopologyError(
                    'SMT siblings %s are of two core classes' % (group,))
            cores.append(Core(core_id, nodes.pop(), tuple(group),
                              classes.pop()))
        self.cores = tuple(cores)
        self.unmanaged_partial_cpus = frozenset(partial)
        self.by_id = {core.core_id: core for core in self.cores}
        self._core_ids = frozenset(self.by_id)
        # cpus_of() per VM per tick is a hot path; core sets repeat.
        self._cpus_memo = {}
        widths = collections.Counter(len(core.cpus) for core in self.cores)
        # Most common SMT width; used to size hypothetical allocations.
        self.threads_per_core = widths.most_common(1)[0][0] if widths else 1

    @classmethod
    def uniform(cls, cores, threads_per_core=1, numa_nodes=1,
                little_cores=0):
        """A synthetic host: ``cores`` cores, CPUs numbered Linux-style.

        SMT sibling ``t`` of core ``c`` is CPU ``c + t * cores``, as on most
        x86 servers. The last ``little_cores`` cores are little, as a
        hybrid host numbers its E-cores after its P-cores.
        """
        siblings = [tuple(c + t * cores for t in range(threads_per_core))
                    for c in range(cores)]
        per_node = max(1, cores // numa_nodes)
        numa = {cpu: min(c // per_node, numa_nodes - 1)
                for c, group in enumerate(siblings) for cpu in group}
        little = frozenset(cpu for group in siblings[cores - little_cores:]
                           for cpu in group) if little_cores else frozenset()
        return cls(siblings, numa, little=little)

    @property
    def little_core_ids(self):
        """Ids of the managed little cores (empty on a one-class host)."""
        return frozenset(core.core_id for core in self.cores if core.little)

    @property
    def core_ids(self):
        return self._core_ids

    def cpus_of(self, core_ids):
        """The logical CPUs of a set of managed core ids."""
        key = frozenset(core_ids)
        cpus = self._cpus_memo.get(key)
        if cpus is None:
            cpus = frozenset(cpu for cid in key
                             for cpu in self.by_id[cid].cpus)
            if len(self._cpus_memo) >= _CPUS_MEMO_SIZE:
                self._cpus_memo.clear()
            self._cpus_memo[key] = cpus
        return cpus

    def pcpus(self, core_ids):
        return sum(len(self.by_id[cid].cpus) for cid in core_ids)

    def numa_node(self, core_id):
        return self.by_id[core_id].numa_node

    def __len__(self):
        return len(self.cores)

    def is_little(self, core_id):
        return self.by_id[core_id].little

    def __repr__(self):
        little = len(self.little_core_ids)
        return '<HostTopology %d cores x %d threads%s>' % (
            len(self.cores), self.threads_per_core,
            ', %d little' % little if little else '')
