"""Check what a guest claims against what the host saw it run.

The guest's page is untrusted. Its utilization cannot exceed the CPU time
its vCPU threads really got from the host (plus a tolerance for the two
sides sampling at different instants), so a guest that claims more is
lying or broken: the agent then treats it in host-only mode.
"""

import dataclasses


@dataclasses.dataclass(frozen=True)
class Verdict:
    ok: bool
    reason: str = ''


def check_guest_util(guest_util_pct, host_vcpu_pct, tolerance=0.10,
                     slack_pct=10.0):
    """Judge a guest's utilization claim.

    ``guest_util_pct`` is summed over vCPUs; ``host_vcpu_pct`` is the CPU
    time of its vCPU threads over the same second, in percent of one CPU.
    """
    limit = host_vcpu_pct * (1.0 + tolerance) + slack_pct
    if guest_util_pct > limit:
        return Verdict(False, 'guest claims %.0f%% utilization, its vCPU '
                              'threads ran %.0f%%' % (guest_util_pct,
                                                      host_vcpu_pct))
    return Verdict(True)
