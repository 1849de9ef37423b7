"""Resolve the host CPUs ufo-agent manages, refusing bad sets at start.

The set is ``[host_cpus] managed_cpus`` if given; else Nova's
``[compute] cpu_shared_set`` read from the nova.conf named by
``[host_cpus] nova_config``; else every online CPU.
``[host_cpus] reserved_cpus`` is removed from it. Nova's
``cpu_dedicated_set`` is never managed.
"""

import configparser

from ufo_agent import cpuset


class ManagedCpusError(ValueError):
    """A CPU set option is invalid; the message names the option."""


def _parse(text, option):
    try:
        return cpuset.parse_cpuset(text)
    except cpuset.CpusetError as exc:
        raise ManagedCpusError('%s: %s' % (option, exc))


def read_nova_cpu_sets(path):
    """Return (cpu_shared_set, cpu_dedicated_set) text from a nova.conf."""
    parser = configparser.ConfigParser(interpolation=None, strict=False)
    try:
        with open(path) as handle:
            parser.read_file(handle)
    except (OSError, configparser.Error) as exc:
        raise ManagedCpusError('[host_cpus] nova_config: cannot read %s: %s'
                               % (path, exc))
    get = (lambda key: parser.get('compute', key, fallback='') or '')
    return get('cpu_shared_set'), get('cpu_dedicated_set')


def resolve(online_cpus, managed=None, reserved='', nova_config=None):
    """Return the frozenset of managed host CPUs.

    ``online_cpus`` is what the host has; the other arguments are the
    ``[host_cpus]`` options as given.
    """
    online = frozenset(online_cpus)
    dedicated = frozenset()
    if managed is not None and managed.strip():
        source = '[host_cpus] managed_cpus'
        cpus = _parse(managed, source)
        if nova_config:
            dedicated = _parse(read_nova_cpu_sets(nova_config)[1],
                               'nova.conf [compute] cpu_dedicated_set')
    elif nova_config:
        shared, dedicated_text = read_nova_cpu_sets(nova_config)
        source = 'nova.conf [compute] cpu_shared_set'
        if not shared.strip():
            raise ManagedCpusError(
                '%s is empty in %s: set it, or set [host_cpus] managed_cpus'
                % (source, nova_config))
        cpus = _parse(shared, source)
        dedicated = _parse(dedicated_text,
                           'nova.conf [compute] cpu_dedicated_set')
    else:
        source = 'online CPUs'
        cpus = online
    overlap = cpus & dedicated
    if overlap:
        raise ManagedCpusError(
            '%s overlaps nova.conf [compute] cpu_dedicated_set on CPUs %s'
            % (source, cpuset.format_cpuset(overlap)))
    missing = cpus - online
    if missing:
        raise ManagedCpusError('%s lists CPUs %s that are not online'
                               % (source, cpuset.format_cpuset(missing)))
    reserved_cpus = _parse(reserved or '', '[host_cpus] reserved_cpus')
    stray = reserved_cpus - online
    if stray:
        raise ManagedCpusError('[host_cpus] reserved_cpus lists CPUs %s that '
                               'are not online'
                               % cpuset.format_cpuset(stray))
    result = cpus - reserved_cpus
    if not result:
        raise ManagedCpusError('%s minus [host_cpus] reserved_cpus leaves no '
                               'CPU to manage' % source)
    return result
