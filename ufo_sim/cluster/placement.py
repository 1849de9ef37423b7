"""Placement's allocation candidates, as a model.

For a boot, nova-scheduler asks Placement for the resource providers
that can take the flavor's VCPU, MEMORY_MB and DISK_GB and carry none of
its forbidden traits. Placement's rule for each resource class is
``(total - reserved) * allocation_ratio - used >= requested`` (and the
request within ``min_unit``/``max_unit``/``step_size``, which Nova sets
so that any flavor of the node's size fits). A real Placement gives the
same answer on the same books (``tests/unit/cluster``; the cross-check
runs in the nova-functional env).
"""


def has_room(total, reserved, ratio, used, requested):
    return (total - reserved) * ratio - used >= requested


def candidates(hosts, vcpus, memory_mb, disk_gb=0,
               forbidden_traits=frozenset()):
    """Names of the hosts (:class:`.nova_scheduler.HostBooks`) with room.

    In the order given: Placement's order does not matter to Nova, which
    weighs every candidate.
    """
    out = []
    for host in hosts:
        if forbidden_traits & host.traits:
            continue
        if vcpus > host.cpus or memory_mb > host.memory_mb:
            continue        # max_unit: the node's own size
        if not has_room(host.cpus, 0, host.cpu_allocation_ratio,
                        host.vcpus_used, vcpus):
            continue
        if not has_room(host.memory_mb, 0, host.ram_allocation_ratio,
                        host.memory_mb_used, memory_mb):
            continue
        if not has_room(host.disk_gb, 0, 1.0, host.disk_gb_used, disk_gb):
            continue
        out.append(host.name)
    return out
