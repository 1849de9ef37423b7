"""Parse a libvirt domain XML into what ufo-agent needs to manage it.

Nova writes ``<nova:instance>`` metadata into every domain it creates: the
flavor (vCPUs and, since Nova 32.0.0, its extra specs), the image and the
owner. The namespace version changes between releases, so any namespace
under ``http://openstack.org/xmlns/libvirt/nova/`` is accepted.
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
    """The ``<nova:instance>`` metadata of a domain."""

    name: str
    flavor: str
    vcpus: int
    extra_specs: dict
    project: str


@dataclasses.dataclass(frozen=True)
class Domain:
    """A guest as ufo-agent sees it."""

    uuid: str
    name: str
    vcpus: int                  # <vcpu> current count
    vcpu_cpuset: frozenset      # <vcpu cpuset=...>; empty if absent
    vcpupins: dict              # vcpu index -> frozenset of host CPUs
    emulatorpin: frozenset      # empty if absent
    nova: NovaInstance          # None for a domain Nova did not create

    def dedicated(self, trust_pins=True):
        """True for a Nova instance with dedicated (pinned) CPUs.

        The flavor says so, or (``trust_pins``: the XML is the persistent
        definition, which ufo-agent never changes) every vCPU is pinned to
        one host CPU, as Nova pins dedicated guests.
        """
        if self.nova is not None:
            policy = self.nova.extra_specs.get('hw:cpu_policy', 'shared')
            if policy in ('dedicated', 'mixed'):
                return True
        return trust_pins and bool(self.vcpupins) and all(
            len(cpus) == 1 for cpus in self.vcpupins.values())


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
        specs = {}
        for group in _nova_children(flavor, 'extraSpecs'):
            for spec in _nova_children(group, 'extraSpec'):
                key = spec.get('name')
                if key:
                    specs[key] = (spec.text or '').strip()
        project = ''
        for owner in _nova_children(node, 'owner'):
            for proj in _nova_children(owner, 'project'):
                project = proj.get('uuid', '')
        return NovaInstance(_text(node, 'name'), flavor.get('name', ''),
                            vcpus, specs, project)
    return None


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
        vcpus = int(vcpu.get('current') or vcpu.text)
    except (TypeError, ValueError):
        raise DomainXMLError('domain %s has an invalid <vcpu>' % uuid)
    vcpu_cpuset = _cpus(vcpu.get('cpuset', ''), 'vcpu cpuset')
    pins, emulator = {}, frozenset()
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
    return Domain(uuid, (root.findtext('name') or '').strip(), vcpus,
                  vcpu_cpuset, pins, emulator,
                  _parse_nova(root.find('metadata')))
