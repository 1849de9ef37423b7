"""The ufo-agent service: the controller loop over a hypervisor driver."""
