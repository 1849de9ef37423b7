"""Fakes of a compute host, for the agent's unit tests and benchmarks.

``fakelibvirt`` stands in for libvirt-python; ``fakehost`` writes Nova
domain XML and the /proc and /sys trees the libvirt driver reads;
``hypervisor`` combines them into a host of many loaded Nova guests.
None of them reaches the real libvirt or changes anything on this host.
"""
