"""The fault-injection soak: the real agent on a simulated host.

:mod:`.world` is the host (a fake libvirt with faults, hangs and
lifecycle, a fake /proc, guest kernel modules answering on real page
files) and the checker of the agent's promises on the affinities the
fake libvirt holds; :mod:`.machine` drives it with a Hypothesis state
machine; ``python -m ufo_agent.tests.soak`` runs it for a number of
ticks. See doc/source/agent-safety.rst, "The fault-injection soak".
"""
