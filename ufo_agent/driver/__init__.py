"""The hypervisor driver interface between the agent loop and the world."""
