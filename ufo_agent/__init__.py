"""ufo-agent: the per-hypervisor UFO core manager."""
