"""A Nova cloud of simulated hosts: workload, Nova's scheduler, hosts."""
