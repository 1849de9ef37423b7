"""VM requests for the host tests: steady load, alive from the start."""

from ufo_sim.cluster import workload


def steady(vm_id, vcpus=4, lc=True, seed=0, mean=0.3):
    """A VM of ``vcpus`` offering ``mean`` of its max, profile by seed."""
    return workload.VmRequest(
        vm_id=vm_id, arrive_s=0.0, lifetime_s=1e6, vcpus=vcpus,
        memory_mb=4096 * vcpus, lc=lc, pattern='steady', mean_load=mean,
        peak_load=mean, phase_s=0.0, seed=seed)
