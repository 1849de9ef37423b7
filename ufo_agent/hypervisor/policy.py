"""Which guests ufo-agent manages, and how.

ufo-agent manages a guest only when everything says it is a shared-policy
guest; anything unknown or contradictory means hands off, with the reason:

* Nova metadata is present (domains without it only with ``[agent]
  manage_non_nova_domains``, and then never with per-vCPU pins).
* It carries the flavor's extra specs (Nova writes them since 32.0.0;
  before, a dedicated or mixed flavor cannot be told from a shared one,
  nor ``ufo:managed=false`` seen).
* ``hw:cpu_policy`` (flavor) and ``hw_cpu_policy`` (image properties,
  when the metadata has them) are absent or ``shared``; there is no
  ``hw:cpu_dedicated_mask`` (mixed policy).
* ``ufo:managed`` is not false.
* The persistent definition agrees: every per-vCPU ``<vcpupin>`` equals
  ``<vcpu cpuset>`` or, for a guest with a NUMA topology (Nova pins each
  vCPU of a shared NUMA guest to the shared CPUs of its host node), all
  vCPUs have the same pin and it is exactly the managed CPUs of the nodes
  its memory is bound to. A guest spanning NUMA nodes (vCPUs pinned to
  different nodes) is left alone: ufo-agent pins all vCPUs of a guest
  together.
* Every CPU the definition lets any of its threads use is managed: its
  restore pins never reach ``cpu_dedicated_set`` or reserved CPUs.

A definition that carries ufo-agent's own channel device was copied from
a live XML that ufo-agent pinned: Nova persists a live-migrated guest on
the destination from the source's live XML, rewriting ``<vcpu cpuset>``
for the destination but, for a guest without a NUMA topology, keeping
the source's live ``<vcpupin>``, ``<emulatorpin>`` and ``<iothreadpin>``.
Those pins are then ufo-agent's, numbered for the source host, and are
ignored as a live XML's are (for a NUMA-bound guest Nova rewrites every
pin for the destination, and they are kept).

``ufo:class=lc|be|auto`` hints the service class;
``ufo:latency_target_us`` and ``ufo:latency_percentile`` carry the
operator's tail-latency target. An invalid hint or target is ignored
(and said in the reason): the guest is still managed, in black-box mode.

A managed guest's :class:`Verdict` carries what the driver needs: the
exact restore pins per vCPU, for the emulator and per I/O thread (from the
persistent definition, see :func:`ufo_agent.hypervisor.domain.restore_pins`),
and ``allowed_cpus``, the managed CPUs on the NUMA nodes its memory is
bound to, which every pin ufo-agent gives it must stay within.
"""

import dataclasses

from ufo_agent.controller.plan import VmClass
from ufo_agent import cpuset
from ufo_agent import extraspecs
from ufo_agent.hypervisor import domain as domain_xml

EXTRA_SPEC_MANAGED = extraspecs.MANAGED
EXTRA_SPEC_CLASS = extraspecs.CLASS


@dataclasses.dataclass(frozen=True)
class Verdict:
    """Whether to manage a guest, why, and what managing it must respect.

    For a managed guest: ``restore_vcpus`` maps every vCPU index to the
    CPUs to put back when ufo-agent lets go, ``restore_emulator`` the
    emulator threads' CPUs and ``restore_iothreads`` each pinned I/O
    thread's CPUs (every I/O thread of ``<iothreads>``);
    ``allowed_cpus`` is the set every vCPU, emulator and I/O thread pin
    must stay within while managed (the managed set, narrowed to the NUMA
    nodes the guest's memory is bound to). All empty for a guest left
    alone.
    """

    managed: bool
    reason: str
    vm_class: VmClass = VmClass.AUTO
    vcpus: int = 0
    restore_vcpus: dict = dataclasses.field(default_factory=dict)
    restore_emulator: frozenset = frozenset()
    restore_iothreads: dict = dataclasses.field(default_factory=dict)
    allowed_cpus: frozenset = frozenset()
    # The flavor's tail-latency target, microseconds (None: none).
    latency_target_us: int = None
    latency_percentile: float = extraspecs.DEFAULT_PERCENTILE


def _latency_target(specs):
    """(target us or None, percentile, note on ignored values)."""
    notes = []
    target = specs.get(extraspecs.LATENCY_TARGET)
    if target is not None:
        try:
            target = extraspecs.latency_target(target)
        except ValueError:
            notes.append('ignored invalid %s=%r' % (
                extraspecs.LATENCY_TARGET, target))
            target = None
    percentile = specs.get(extraspecs.LATENCY_PERCENTILE)
    if percentile is None:
        percentile = extraspecs.DEFAULT_PERCENTILE
    else:
        try:
            percentile = extraspecs.latency_percentile(percentile)
        except ValueError:
            notes.append('ignored invalid %s=%r' % (
                extraspecs.LATENCY_PERCENTILE, percentile))
            percentile = extraspecs.DEFAULT_PERCENTILE
    return target, percentile, ''.join('; ' + n for n in notes)


def _fmt(cpus):
    return cpuset.format_cpuset(cpus) or '(none)'


def _hands_off(reason):
    return Verdict(False, reason)


def _flavor_verdict(nova):
    """The reason the Nova metadata rules a guest out, or None."""
    if nova.extra_specs is None:
        return ('its Nova metadata has no <nova:extraSpecs> (Nova %s; '
                'written since 32.0.0): its CPU policy is unknown'
                % (nova.package or 'before 32.0.0'))
    specs, props = nova.extra_specs, nova.image_properties or {}
    for source, key in (('flavor', 'hw:cpu_policy'),
                        ('image', 'hw_cpu_policy')):
        value = (specs if source == 'flavor' else props).get(key)
        if value is not None and value.strip().lower() != 'shared':
            return '%s %s=%s' % (source, key, value)
    for source, key in (('flavor', 'hw:cpu_dedicated_mask'),
                        ('image', 'hw_cpu_dedicated_mask')):
        value = (specs if source == 'flavor' else props).get(key)
        if value is not None:
            return '%s %s=%s (mixed CPU policy)' % (source, key, value)
    return None


def _pins_verdict(domain, managed, numa_of_cpu):
    """The reason the definition's per-vCPU pins rule a guest out, or None.

    Returns (reason, note); ``note`` describes accepted NUMA pins.
    """
    pins = domain.vcpupins
    if not pins:
        return None, ''
    if domain.vcpu_cpuset:
        for index, cpus in sorted(pins.items()):
            if cpus != domain.vcpu_cpuset:
                return ('vCPU %d is pinned to %s, not to its <vcpu cpuset> '
                        '%s' % (index, _fmt(cpus),
                                _fmt(domain.vcpu_cpuset))), ''
        return None, ''
    distinct = sorted({cpus for cpus in pins.values()}, key=sorted)
    if len(distinct) > 1:
        return ('its vCPUs are pinned to different CPU sets (%s): a guest '
                'pinned per vCPU or spanning NUMA nodes'
                % ', '.join(_fmt(c) for c in distinct)), ''
    pinned = distinct[0]
    missing = [i for i in domain.vcpu_indexes if i not in pins]
    if missing:
        return ('vCPU %d has no <vcpupin> while others are pinned to %s'
                % (missing[0], _fmt(pinned))), ''
    tune = domain.numatune
    nodes = tune.bound_nodes() if tune is not None else frozenset()
    if not nodes:
        return ('every vCPU is pinned to %s without <vcpu cpuset> or a '
                'NUMA memory binding' % _fmt(pinned)), ''
    if numa_of_cpu is None:
        return ('every vCPU is pinned to %s, its memory to NUMA node(s) '
                '%s, and the host NUMA layout is unknown'
                % (_fmt(pinned), _fmt(nodes))), ''
    expected = domain_xml.numa_cpus(domain, numa_of_cpu, managed)
    if pinned != expected:
        return ('every vCPU is pinned to %s, not to the managed CPUs %s of '
                'its NUMA node(s) %s' % (_fmt(pinned), _fmt(expected),
                                         _fmt(nodes))), ''
    return None, '; vCPUs pinned to the shared CPUs of NUMA node(s) %s' % (
        _fmt(nodes))


def decide(domain, managed_cpus, manage_non_nova=False, persistent=True,
           online_cpus=None, numa_of_cpu=None, channel_name=None):
    """Return a :class:`Verdict` for a parsed :class:`Domain`.

    ``persistent`` says the XML is the persistent definition: its pins are
    Nova's, and what to restore. A live XML (a transient domain) also shows
    ufo-agent's own live pins, so its ``<vcpupin>``, ``<emulatorpin>`` and
    ``<iothreadpin>`` are ignored and only ``<vcpu cpuset>`` restricts it.
    ``online_cpus`` are the host's online CPUs (where a thread the
    definition does not restrict runs); without them such a guest is left
    alone. ``numa_of_cpu`` maps host CPUs to NUMA nodes; without it a guest
    whose memory is bound to NUMA nodes is left alone. ``channel_name``
    is the name of ufo-agent's channel device for this domain: a
    persistent definition that carries it holds ufo-agent's pins (see the
    module docstring).
    """
    managed = frozenset(managed_cpus)
    nova = domain.nova
    if nova is None and not manage_non_nova:
        return _hands_off('no Nova metadata')
    if nova is not None:
        reason = _flavor_verdict(nova)
        if reason:
            return _hands_off(reason)
    specs = nova.extra_specs if nova else {}
    flag = specs.get(EXTRA_SPEC_MANAGED, 'true').strip().lower()
    if flag in extraspecs.MANAGED_FALSE:
        return _hands_off('%s=%s' % (EXTRA_SPEC_MANAGED, flag))
    if flag not in extraspecs.MANAGED_TRUE:
        return _hands_off('invalid %s=%r' % (EXTRA_SPEC_MANAGED, flag))
    if domain.vcpu_placement == 'auto' or (
            domain.numatune is not None and
            domain.numatune.placement == 'auto'):
        return _hands_off("placement='auto': numad picks its CPUs at start")

    note = ''
    carried = (persistent and channel_name is not None and
               channel_name in domain.shmem_names and
               not (domain.numatune is not None and
                    domain.numatune.bound_nodes()))
    if carried and (domain.vcpupins or domain.emulatorpin or
                    domain.iothreadpins):
        note = ('; pins of a live XML ufo-agent pinned (a live migration '
                'copied them) ignored')
    if not persistent or carried:
        # Only <vcpu cpuset> is the definition's in a live XML.
        domain = dataclasses.replace(domain, vcpupins={},
                                     emulatorpin=frozenset(), iothreadpins={})
    if nova is None and domain.vcpupins:
        return _hands_off('non-Nova domain with per-vCPU <vcpupin>')
    reason, pins_note = _pins_verdict(domain, managed, numa_of_cpu)
    if reason:
        return _hands_off(reason)
    note += pins_note

    pins = domain_xml.restore_pins(domain, online_cpus)
    if pins.all_cpus() is None:
        return _hands_off('its definition does not restrict its CPUs and '
                          'the host\'s online CPUs are unknown')
    used = pins.all_cpus()
    outside = used - managed
    if outside:
        return _hands_off('its definition lets it run on CPUs %s outside '
                          'the managed set' % _fmt(outside))

    allowed = managed
    tune = domain.numatune
    if tune is not None and tune.bound_nodes():
        nodes = tune.bound_nodes()
        if numa_of_cpu is None:
            return _hands_off('its memory is bound to NUMA node(s) %s and '
                              'the host NUMA layout is unknown' % _fmt(nodes))
        allowed = domain_xml.numa_cpus(domain, numa_of_cpu, managed)
        if not used <= allowed:
            return _hands_off('its definition lets it run on CPUs %s off '
                              'the NUMA node(s) %s of its memory'
                              % (_fmt(used - allowed), _fmt(nodes)))
        if not note:
            note = '; memory on NUMA node(s) %s' % _fmt(nodes)

    hint = specs.get(EXTRA_SPEC_CLASS, 'auto').strip().lower()
    try:
        vm_class = VmClass(hint)
    except ValueError:
        vm_class = VmClass.AUTO
    # The flavor is the contract; the domain may show fewer vCPUs now.
    vcpus = nova.vcpus if nova else domain.vcpus
    reason = 'Nova instance, shared policy' if nova else 'non-Nova domain'
    reason += note
    if hint != vm_class.value:
        reason += '; ignored invalid %s=%r' % (EXTRA_SPEC_CLASS, hint)
    target, percentile, ignored = _latency_target(specs)
    reason += ignored
    return Verdict(True, reason, vm_class, max(1, vcpus), dict(pins.vcpus),
                   pins.emulator, dict(pins.iothreads), allowed,
                   latency_target_us=target, latency_percentile=percentile)
