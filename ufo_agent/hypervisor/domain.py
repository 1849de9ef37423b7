"""Parse a libvirt domain XML into what ufo-agent needs to manage it.

Nova writes ``<nova:instance>`` metadata into every domain it creates: the
flavor (vCPUs and, since Nova 32.0.0, its extra specs), the image (with its
properties since 32.0.0) and the owner. The namespace version changes
between releases, so any namespace under
``http://openstack.org/xmlns/libvirt/nova/`` is accepted.

Besides the metadata, the parse keeps everything that decides where the
guest's threads run when libvirt starts it from its persistent definition:
``<vcpu cpuset>``, per-vCPU ``<vcpupin>``, ``<emulatorpin>``,
``<iothreadpin>``, ``<numatune>`` and the guest NUMA cells. Two pure
functions answer what ufo-agent needs from them: :func:`restore_pins` (what
to put back, per thread, when ufo-agent lets go of a guest) and
:func:`numa_cpus` (which CPUs the guest may use while managed without
leaving the NUMA nodes its memory is bound to). What Nova 34 writes for each
CPU policy is in ``ufo_agent/tests/fixtures/nova34/``.
"""

import dataclasses
import xml.etree.ElementTree as ET

from ufo_agent import cpuset

NOVA_NS_PREFIX = 'http://openstack.org/xmlns/libvirt/nova/'
# The version Nova writes today, for tools that write Nova's metadata.
NOVA_NS = NOVA_NS_PREFIX + '1.1'


class DomainXMLError(ValueError):
    """A domain XML that cannot be understood."""


@dataclasses.dataclass(frozen=True)
class NovaInstance:
    """The ``<nova:instance>`` metadata of a domain.

    ``extra_specs`` is ``None`` when the metadata has no
    ``<nova:extraSpecs>`` (Nova before 32.0.0), ``image_properties`` when
    it has no ``<nova:image><nova:properties>``; otherwise each is a
    (possibly empty) dict. ``package`` is the Nova version that wrote it.
    """

    name: str
    flavor: str
    vcpus: int
    extra_specs: dict
    project: str
    package: str = ''
    image_properties: dict = None


@dataclasses.dataclass(frozen=True)
class MemNode:
    """One ``<numatune><memnode>``: where a guest NUMA cell's memory is."""

    mode: str
    nodeset: frozenset


@dataclasses.dataclass(frozen=True)
class NumaTune:
    """``<numatune>``: the host NUMA nodes the guest's memory is bound to.

    ``mode`` and ``nodeset`` are the ``<memory>`` element's (libvirt's
    default mode is ``strict``); ``placement`` is ``static`` or ``auto``
    (numad picks the nodes at start); ``memnodes`` maps a guest cell id to
    its :class:`MemNode`.
    """

    mode: str
    nodeset: frozenset
    placement: str
    memnodes: dict

    def bound_nodes(self):
        """Host nodes the memory may only come from; empty if unbound.

        ``preferred`` memory may come from any node, so it binds nothing;
        ``strict``, ``restrictive`` and ``interleave`` keep the memory on
        the nodeset (of ``<memory>`` and of every ``<memnode>``).
        """
        nodes = set()
        for mode, nodeset in [(self.mode, self.nodeset)] + [
                (m.mode, m.nodeset) for m in self.memnodes.values()]:
            if mode != 'preferred':
                nodes |= nodeset
        return frozenset(nodes)


@dataclasses.dataclass(frozen=True)
class CpuTune:
    """CPU bandwidth from ``<cputune>``; ``None`` where not given."""

    shares: int = None
    period: int = None
    quota: int = None
    emulator_period: int = None
    emulator_quota: int = None


@dataclasses.dataclass(frozen=True)
class Domain:
    """A guest as ufo-agent sees it.

    The CPU fields are the XML's as written: in the persistent definition
    they are what libvirt applies when the guest starts.
    """

    uuid: str
    name: str
    vcpus: int                  # <vcpu> current count
    vcpu_cpuset: frozenset      # <vcpu cpuset=...>; empty if absent
    vcpupins: dict              # vcpu index -> frozenset of host CPUs
    emulatorpin: frozenset      # empty if absent
    nova: NovaInstance          # None for a domain Nova did not create
    max_vcpus: int = 0          # <vcpu> maximum; 0 means ``vcpus``
    vcpu_placement: str = 'static'      # <vcpu placement=...>
    iothreadpins: dict = dataclasses.field(default_factory=dict)
    iothreads: int = 0          # <iothreads> count
    numatune: NumaTune = None   # None if absent
    # <cpu><numa><cell>: guest cell id -> frozenset of its vCPUs
    numa_cells: dict = dataclasses.field(default_factory=dict)
    cputune: CpuTune = CpuTune()
    shmem_names: tuple = ()     # <devices><shmem name=...>, in order

    @property
    def vcpu_indexes(self):
        """Every vCPU index of the definition (online or not)."""
        return range(max(self.max_vcpus, self.vcpus))

    def dedicated(self, trust_pins=True):
        """True for a Nova instance with dedicated (pinned) CPUs.

        The flavor says so, or (``trust_pins``: the XML is the persistent
        definition, which ufo-agent never changes) every vCPU is pinned to
        one host CPU, as Nova pins dedicated guests.
        """
        if self.nova is not None:
            specs = self.nova.extra_specs or {}
            policy = specs.get('hw:cpu_policy', 'shared')
            if policy in ('dedicated', 'mixed'):
                return True
        return trust_pins and bool(self.vcpupins) and all(
            len(cpus) == 1 for cpus in self.vcpupins.values())


@dataclasses.dataclass(frozen=True)
class RestorePins:
    """Where each thread of a guest runs when started from its definition.

    ``vcpus`` maps every vCPU index to its CPUs, ``iothreads`` every I/O
    thread id (1 to ``<iothreads>``) to its CPUs; ``emulator`` is the
    emulator threads' CPUs. An entry is ``None`` where the definition
    leaves the thread unrestricted and the host's CPUs were not given.
    """

    vcpus: dict
    emulator: frozenset
    iothreads: dict

    def all_cpus(self):
        """Every CPU a thread of the guest may run on; None if unknown."""
        sets = [self.emulator] + list(self.vcpus.values()) + list(
            self.iothreads.values())
        if any(cpus is None for cpus in sets):
            return None
        return frozenset().union(*sets)


def restore_pins(domain, all_cpus=None):
    """Return the :class:`RestorePins` of a domain's definition.

    libvirt's rules when it starts a guest: a vCPU runs on its
    ``<vcpupin>``, else on ``<vcpu cpuset>``, else on every host CPU; the
    emulator threads on ``<emulatorpin>``, an I/O thread on its
    ``<iothreadpin>``, else both on ``<vcpu cpuset>``, else on every host
    CPU. ``all_cpus`` is "every host CPU" (the online CPUs); where the
    definition leaves a thread unrestricted and ``all_cpus`` is ``None``,
    that thread's entry is ``None``.
    """
    unrestricted = frozenset(all_cpus) if all_cpus is not None else None
    default = domain.vcpu_cpuset or unrestricted
    vcpus = {index: domain.vcpupins.get(index, default)
             for index in domain.vcpu_indexes}
    ids = set(range(1, domain.iothreads + 1)) | set(domain.iothreadpins)
    iothreads = {index: domain.iothreadpins.get(index, default)
                 for index in sorted(ids)}
    return RestorePins(vcpus, domain.emulatorpin or default, iothreads)


def numa_cpus(domain, numa_of_cpu, cpus):
    """The CPUs of ``cpus`` on the host nodes the guest's memory is bound to.

    ``numa_of_cpu`` maps a host CPU to its NUMA node (a CPU it does not
    list is on node 0, as on a host without NUMA). Without a binding (no
    ``<numatune>``, or only ``preferred`` memory) the answer is ``cpus``.
    """
    cpus = frozenset(cpus)
    if domain.numatune is None:
        return cpus
    nodes = domain.numatune.bound_nodes()
    if not nodes:
        return cpus
    return frozenset(cpu for cpu in cpus if numa_of_cpu.get(cpu, 0) in nodes)


def _local(tag):
    return tag.rsplit('}', 1)[-1]


def _nova_children(node, name):
    return [child for child in node
            if _local(child.tag) == name and
            child.tag.startswith('{' + NOVA_NS_PREFIX)]


def _text(node, name, default=''):
    found = _nova_children(node, name)
    return (found[0].text or default).strip() if found else default


def _cpus(text, what):
    try:
        return cpuset.parse_cpuset(text)
    except cpuset.CpusetError as exc:
        raise DomainXMLError('%s: %s' % (what, exc))


def _int(node, name, what):
    text = node.findtext(name) if node is not None else None
    if text is None:
        return None
    try:
        return int(text.strip())
    except ValueError:
        raise DomainXMLError('invalid %s %r' % (what, text))


def _named(node, group, item):
    """``{name: text}`` of ``<nova:group><nova:item name=...>``; or None."""
    groups = _nova_children(node, group)
    if not groups:
        return None
    found = {}
    for element in groups:
        for entry in _nova_children(element, item):
            key = entry.get('name')
            if key:
                found[key] = (entry.text or '').strip()
    return found


def _parse_nova(metadata):
    for node in metadata if metadata is not None else ():
        if _local(node.tag) != 'instance' or \
                not node.tag.startswith('{' + NOVA_NS_PREFIX):
            continue
        flavor = _nova_children(node, 'flavor')
        if not flavor:
            raise DomainXMLError('nova:instance has no nova:flavor')
        flavor = flavor[0]
        try:
            vcpus = int(_text(flavor, 'vcpus'))
        except ValueError:
            raise DomainXMLError('nova:flavor has no valid nova:vcpus')
        specs = _named(flavor, 'extraSpecs', 'extraSpec')
        properties = None
        for image in _nova_children(node, 'image'):
            properties = _named(image, 'properties', 'property')
        project = ''
        for owner in _nova_children(node, 'owner'):
            for proj in _nova_children(owner, 'project'):
                project = proj.get('uuid', '')
        package = ''
        for pkg in _nova_children(node, 'package'):
            package = pkg.get('version', '')
        return NovaInstance(_text(node, 'name'), flavor.get('name', ''),
                            vcpus, specs, project, package, properties)
    return None


def _parse_numatune(root):
    tune = root.find('numatune')
    if tune is None:
        return None
    memory = tune.find('memory')
    mode, nodeset, placement = 'strict', frozenset(), 'static'
    if memory is not None:
        mode = memory.get('mode', 'strict')
        nodeset = _cpus(memory.get('nodeset', ''), 'numatune nodeset')
        placement = memory.get('placement') or (
            'static' if nodeset else 'auto')
    memnodes = {}
    for memnode in tune.findall('memnode'):
        try:
            cell = int(memnode.get('cellid'))
        except (TypeError, ValueError):
            raise DomainXMLError('memnode without a valid cellid')
        memnodes[cell] = MemNode(
            memnode.get('mode', 'strict'),
            _cpus(memnode.get('nodeset', ''), 'memnode nodeset'))
    return NumaTune(mode, nodeset, placement, memnodes)


def _parse_numa_cells(root):
    cells = {}
    for cell in root.findall('cpu/numa/cell'):
        try:
            index = int(cell.get('id', len(cells)))
        except ValueError:
            raise DomainXMLError('NUMA cell without a valid id')
        cells[index] = _cpus(cell.get('cpus', ''), 'NUMA cell cpus')
    return cells


def parse_domain(xml):
    """Return a :class:`Domain` for the XML of ``virDomainGetXMLDesc``."""
    try:
        root = ET.fromstring(xml)
    except ET.ParseError as exc:
        raise DomainXMLError('not XML: %s' % exc)
    if root.tag != 'domain':
        raise DomainXMLError('root element is <%s>, not <domain>'
                             % root.tag)
    uuid = (root.findtext('uuid') or '').strip()
    if not uuid:
        raise DomainXMLError('domain has no <uuid>')
    vcpu = root.find('vcpu')
    if vcpu is None:
        raise DomainXMLError('domain %s has no <vcpu>' % uuid)
    try:
        max_vcpus = int(vcpu.text)
        vcpus = int(vcpu.get('current') or max_vcpus)
    except (TypeError, ValueError):
        raise DomainXMLError('domain %s has an invalid <vcpu>' % uuid)
    vcpu_cpuset = _cpus(vcpu.get('cpuset', ''), 'vcpu cpuset')
    pins, emulator, iothreads = {}, frozenset(), {}
    tune = root.find('cputune')
    if tune is not None:
        for pin in tune.findall('vcpupin'):
            try:
                index = int(pin.get('vcpu'))
            except (TypeError, ValueError):
                raise DomainXMLError('vcpupin without a valid vcpu')
            pins[index] = _cpus(pin.get('cpuset', ''), 'vcpupin cpuset')
        emu = tune.find('emulatorpin')
        if emu is not None:
            emulator = _cpus(emu.get('cpuset', ''), 'emulatorpin cpuset')
        for pin in tune.findall('iothreadpin'):
            try:
                index = int(pin.get('iothread'))
            except (TypeError, ValueError):
                raise DomainXMLError('iothreadpin without a valid iothread')
            iothreads[index] = _cpus(pin.get('cpuset', ''),
                                     'iothreadpin cpuset')
    try:
        iothread_count = int(root.findtext('iothreads') or 0)
    except ValueError:
        raise DomainXMLError('domain %s has an invalid <iothreads>' % uuid)
    bandwidth = CpuTune(*(_int(tune, name, 'cputune ' + name) for name in (
        'shares', 'period', 'quota', 'emulator_period', 'emulator_quota')))
    return Domain(
        uuid, (root.findtext('name') or '').strip(), vcpus, vcpu_cpuset,
        pins, emulator, _parse_nova(root.find('metadata')),
        max_vcpus=max_vcpus, vcpu_placement=vcpu.get('placement') or 'static',
        iothreadpins=iothreads, iothreads=iothread_count,
        numatune=_parse_numatune(root), numa_cells=_parse_numa_cells(root),
        cputune=bandwidth, shmem_names=tuple(
            shmem.get('name') or '' for shmem in root.findall(
                'devices/shmem')))
