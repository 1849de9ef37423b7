"""Which guests ufo-agent manages, and how.

* Nova instances with the shared CPU policy are managed, unless the flavor
  says ``ufo:managed=false``.
* Dedicated (pinned) instances are never touched: Nova promised them
  their CPUs.
* Domains without Nova metadata are managed only if
  ``[agent] manage_non_nova_domains`` says so.
* ``ufo:class=lc|be|auto`` hints the service class.
* A guest whose CPUs lie outside the managed set is left alone.
"""

import dataclasses

from ufo_agent.controller.plan import VmClass

EXTRA_SPEC_MANAGED = 'ufo:managed'
EXTRA_SPEC_CLASS = 'ufo:class'

_TRUE = ('true', '1', 'yes', 'on')
_FALSE = ('false', '0', 'no', 'off')


@dataclasses.dataclass(frozen=True)
class Verdict:
    managed: bool
    reason: str
    vm_class: VmClass = VmClass.AUTO
    vcpus: int = 0


def decide(domain, managed_cpus, manage_non_nova=False, persistent=True):
    """Return a :class:`Verdict` for a parsed :class:`Domain`.

    ``persistent`` says the XML is the persistent definition: its pins are
    Nova's. A live XML also shows ufo-agent's own live pins, so only the
    flavor can tell a dedicated guest there.
    """
    nova = domain.nova
    if nova is None and not manage_non_nova:
        return Verdict(False, 'no Nova metadata')
    if domain.dedicated(trust_pins=persistent):
        return Verdict(False, 'dedicated CPU policy')
    specs = nova.extra_specs if nova else {}
    flag = specs.get(EXTRA_SPEC_MANAGED, 'true').strip().lower()
    if flag in _FALSE:
        return Verdict(False, '%s=%s' % (EXTRA_SPEC_MANAGED, flag))
    if flag not in _TRUE:
        return Verdict(False, 'invalid %s=%r' % (EXTRA_SPEC_MANAGED, flag))
    hint = specs.get(EXTRA_SPEC_CLASS, 'auto').strip().lower()
    try:
        vm_class = VmClass(hint)
    except ValueError:
        vm_class = VmClass.AUTO
    allowed = set(domain.vcpu_cpuset)
    if persistent:
        for cpus in domain.vcpupins.values():
            allowed |= cpus
    if allowed and not allowed & set(managed_cpus):
        return Verdict(False, 'its CPUs are outside the managed set')
    # The flavor is the contract; the domain may show fewer vCPUs now.
    vcpus = nova.vcpus if nova else domain.vcpus
    reason = 'Nova instance, shared policy' if nova else 'non-Nova domain'
    if hint != vm_class.value:
        reason += '; ignored invalid %s=%r' % (EXTRA_SPEC_CLASS, hint)
    return Verdict(True, reason, vm_class, max(1, vcpus))
