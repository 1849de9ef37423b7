"""nova-compute's host name, read from nova-compute's own configuration.

nova-scheduler knows each compute service by Nova's ``[DEFAULT] host``,
and UFO's scheduler plugins look host signals up by that name. ufo-agent
reads it from the files of ``[host_cpus] nova_config`` and
``nova_config_dir``, the same files and the same precedence as for the
CPU sets (:func:`ufo_agent.hypervisor.managed_cpus.read_nova_config`: a
later file overrides an earlier one, the ``--config-dir`` files last).
Unset, Nova's default applies: the machine's hostname
(``socket.gethostname()``).
"""

import dataclasses
import socket

from oslo_config import cfg

from ufo_agent.hypervisor import managed_cpus

OPTION = '[DEFAULT] host'


@dataclasses.dataclass(frozen=True)
class NovaHost:
    """nova-compute's host name and where it comes from."""

    name: str
    #: The Nova configuration files read; empty when none exists.
    files: tuple = ()
    #: Whether a file sets ``[DEFAULT] host`` (else Nova's default).
    configured: bool = False

    @property
    def origin(self):
        if self.configured:
            return 'nova.conf %s (read from %s)' % (OPTION,
                                                    ', '.join(self.files))
        if self.files:
            return ('the hostname, Nova\'s default: %s is not set in %s'
                    % (OPTION, ', '.join(self.files)))
        return ('the hostname, Nova\'s default: no nova-compute '
                'configuration found ([host_cpus] nova_config, '
                'nova_config_dir)')


def read_nova_host(files, config_dir=None, hostname=socket.gethostname):
    """nova-compute's :class:`NovaHost`, as nova-compute resolves it.

    :raises ValueError: naming the file and the option, when Nova's
        configuration cannot be read or its host is not a valid host name
        (nova-compute refuses it too).
    """
    # Nova's own type (nova.conf.netconf): a host name, FQDN or address.
    loaded = managed_cpus.read_nova_config(
        files, config_dir, ((None, cfg.HostDomainOpt('host')),))
    if loaded is None:
        return NovaHost(hostname())
    read, nova = loaded
    try:
        name = nova.host
    except cfg.Error as exc:
        raise ValueError('nova.conf %s (read from %s): %s'
                         % (OPTION, ', '.join(read), exc))
    if name is None:
        return NovaHost(hostname(), read)
    return NovaHost(name, read, configured=True)
