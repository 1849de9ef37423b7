"""The hypervisor driver for libvirt/QEMU hosts, split like Nova's.

* :mod:`.host`: the connection, its keepalive, libvirt's event loop
  thread and the lifecycle event queue.
* :mod:`.guest`: the operations on one managed domain (pins, threads,
  counters, channel target, release).
* :mod:`.config`: the device XML ufo-agent generates.
* :mod:`.driver`: :class:`~.driver.LibvirtDriver`, the
  :class:`~ufo_agent.driver.base.HypervisorDriver` that composes them.

libvirt-python is imported when a driver is built, not by this package.
"""
