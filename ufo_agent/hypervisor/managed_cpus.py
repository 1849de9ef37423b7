"""Resolve the host CPUs ufo-agent manages, refusing unsafe sets at start.

Nova's CPU sets are read the way nova-compute reads them, with
oslo.config: the files of ``[host_cpus] nova_config`` in order, then the
``*.conf`` files of ``[host_cpus] nova_config_dir`` in name order, a later
value overriding an earlier one (as ``nova-compute --config-file ...
--config-dir ...`` does). Only ``[compute] cpu_shared_set``,
``[compute] cpu_dedicated_set`` and the deprecated ``[DEFAULT]
vcpu_pin_set`` are read; an empty value is unset, and values use Nova's
syntax (``4-12,^8,15``). The default paths (:data:`NOVA_CONFIG_FILES`,
:data:`NOVA_CONFIG_DIR`) are skipped when they do not exist; any other
path that does not exist, cannot be read or parsed, or holds an invalid
value stops the agent, naming the file and the option.

Resolution, in order:

=================  ======================  ==================================
``managed_cpus``   Nova's configuration    managed set
=================  ======================  ==================================
set                not found               ``managed_cpus``
set                found                   ``managed_cpus``; refused if it
                                           overlaps ``cpu_dedicated_set``
                                           (or ``vcpu_pin_set``, see below)
                                           or reaches beyond a
                                           ``cpu_shared_set`` that is set
unset              ``cpu_shared_set`` set  ``cpu_shared_set``; refused if it
                                           overlaps ``cpu_dedicated_set``
unset              no ``cpu_shared_set``   refused
unset              not found               refused
any                ``vcpu_pin_set`` and    refused (nova-compute refuses
                   ``cpu_dedicated_set``   this too)
unset              ``vcpu_pin_set``        refused: with it, Nova pins
                                           dedicated and shared guests on the
                                           same CPUs
=================  ======================  ==================================

Nova's dedicated CPUs (``cpu_dedicated_set``, or the whole legacy
``vcpu_pin_set``) are therefore never managed, nor, where
``cpu_shared_set`` is set, the CPUs outside it: Nova keeps every guest
off them (they are the host's). The set found must then be
online, ``[host_cpus] reserved_cpus`` (online CPUs too) is removed from it,
and something must be left. Every online CPU is never managed by default.
"""

import dataclasses
import glob
import logging
import os

from oslo_config import cfg

from ufo_agent import cpuset

LOG = logging.getLogger(__name__)

#: What nova-compute reads when started without ``--config-file``
#: (oslo.config's defaults for project ``nova``, program ``nova-compute``)
#: and what Debian's and Ubuntu's units pass: skipped when absent.
NOVA_CONFIG_FILES = ('/etc/nova/nova.conf', '/etc/nova/nova-compute.conf')
NOVA_CONFIG_DIR = '/etc/nova/nova.conf.d'

MANAGED = '[host_cpus] managed_cpus'
RESERVED = '[host_cpus] reserved_cpus'
NOVA_CONFIG = '[host_cpus] nova_config'
NOVA_CONFIG_DIR_OPT = '[host_cpus] nova_config_dir'
SHARED = '[compute] cpu_shared_set'
DEDICATED = '[compute] cpu_dedicated_set'
PIN_SET = '[DEFAULT] vcpu_pin_set'


class ManagedCpusError(ValueError):
    """A CPU set option is invalid; the message names the option."""


class ForbiddenCpusError(ManagedCpusError):
    """CPUs to manage that Nova's sets keep for others."""


@dataclasses.dataclass(frozen=True)
class NovaCpuSets:
    """Nova's CPU sets as nova-compute sees them; None where unset."""

    files: tuple
    shared: frozenset = None
    dedicated: frozenset = None
    vcpu_pin_set: frozenset = None

    def where(self, option):
        return 'nova.conf %s (read from %s)' % (option, ', '.join(self.files))


def _parse(text, option):
    try:
        return cpuset.parse_cpuset(text)
    except cpuset.CpusetError as exc:
        raise ManagedCpusError('%s: %s' % (option, exc))


def _paths(files):
    # One path, as before nova_config was a list, is a list of one.
    return [files] if isinstance(files, str) else list(files or ())


def _existing(paths, option, default_paths):
    found = []
    for path in paths:
        if not path:
            continue
        if os.path.exists(path):
            found.append(path)
        elif path in default_paths:
            LOG.info('%s: %s does not exist, skipped', option, path)
        else:
            raise ManagedCpusError(
                '%s: %s does not exist; name the files nova-compute reads, '
                'or set it empty and set %s' % (option, path, MANAGED))
    return found


def read_nova_config(files, config_dir=None, opts=()):
    """Parse nova-compute's configuration with the options ``opts``.

    ``files`` are read in order, then the ``*.conf`` files of
    ``config_dir``, with oslo.config as nova-compute reads them; ``opts``
    are ``(group, opt)`` pairs, group None for ``[DEFAULT]``. Returns
    ``(paths read, ConfigOpts)``, or None when no Nova configuration
    exists.
    """
    files = _existing(_paths(files), NOVA_CONFIG, NOVA_CONFIG_FILES)
    dirs = _existing([config_dir] if config_dir else [], NOVA_CONFIG_DIR_OPT,
                     (NOVA_CONFIG_DIR,))
    if dirs and not os.path.isdir(dirs[0]):
        raise ManagedCpusError('%s: %s is not a directory'
                               % (NOVA_CONFIG_DIR_OPT, dirs[0]))
    read = list(files)
    for directory in dirs:
        # What oslo.config reads of a --config-dir.
        read.extend(sorted(glob.glob(os.path.join(directory, '*.conf'))))
    if not read:
        return None
    nova = cfg.ConfigOpts()
    for group, opt in opts:
        nova.register_opt(opt, group=group)
    args = []
    for path in files:
        args += ['--config-file', path]
    for directory in dirs:
        args += ['--config-dir', directory]
    # Only the files named: not ufo-agent's command line, nor the
    # environment (nova-compute's is not ours), nor oslo.config's search.
    try:
        nova(args, project=None, prog='nova-compute',
             default_config_files=[], default_config_dirs=[], use_env=False)
    except (cfg.Error, OSError) as exc:
        raise ManagedCpusError('%s, nova_config_dir: cannot read Nova\'s '
                               'configuration: %s' % (NOVA_CONFIG, exc))
    return tuple(read), nova


def read_nova_cpu_sets(files, config_dir=None):
    """Read Nova's CPU sets; None when no Nova configuration exists.

    ``files`` are read in order, then the ``*.conf`` files of
    ``config_dir``, with oslo.config as nova-compute reads them.
    """
    loaded = read_nova_config(files, config_dir, (
        ('compute', cfg.StrOpt('cpu_shared_set')),
        ('compute', cfg.StrOpt('cpu_dedicated_set')),
        (None, cfg.StrOpt('vcpu_pin_set'))))
    if loaded is None:
        return None
    read, nova = loaded
    sets = NovaCpuSets(tuple(read))
    values = {}
    for field, group, name, option in (
            ('shared', 'compute', 'cpu_shared_set', SHARED),
            ('dedicated', 'compute', 'cpu_dedicated_set', DEDICATED),
            ('vcpu_pin_set', None, 'vcpu_pin_set', PIN_SET)):
        try:
            text = nova[group][name] if group else nova[name]
        except cfg.Error as exc:
            raise ManagedCpusError('%s: %s' % (sets.where(option), exc))
        # As nova.virt.hardware: an empty value is unset, a value that
        # leaves no CPU is an error.
        if not text:
            continue
        cpus = _parse(text, sets.where(option))
        if not cpus:
            raise ManagedCpusError('%s: no CPU left after parsing %r'
                                   % (sets.where(option), text))
        values[field] = cpus
    return dataclasses.replace(sets, **values)


def _no_managed_set(nova, nova_config, nova_config_dir):
    if nova is None:
        looked = ', '.join([p for p in _paths(nova_config) if p] +
                           ([nova_config_dir] if nova_config_dir else []))
        found = ('no Nova configuration found (%s, %s: %s)'
                 % (NOVA_CONFIG, NOVA_CONFIG_DIR_OPT, looked or 'empty'))
    else:
        found = '%s is not set' % nova.where(SHARED)
    return ManagedCpusError(
        'Cannot tell which host CPUs to manage: %s is unset and %s. Set %s, '
        'or point %s at nova-compute\'s configuration files and set %s '
        'there. ufo-agent no longer manages every online CPU by default.'
        % (MANAGED, found, MANAGED, NOVA_CONFIG, SHARED))


def check_against_nova(cpus, source, nova):
    """Refuse ``cpus`` (named ``source``) where Nova's sets forbid them.

    Nova's dedicated CPUs (with the legacy vcpu_pin_set, Nova pins
    dedicated guests anywhere in it, so all of it) are never managed; a
    ``cpu_shared_set`` that is set bounds the managed CPUs: Nova keeps
    every guest off the CPUs outside it and its dedicated set.
    """
    if nova is None:
        return
    protected, protected_name = frozenset(), DEDICATED
    if nova.vcpu_pin_set is not None:
        protected, protected_name = nova.vcpu_pin_set, PIN_SET
    elif nova.dedicated is not None:
        protected = nova.dedicated
    overlap = cpus & protected
    if overlap:
        # Nova refuses a cpu_shared_set that overlaps cpu_dedicated_set too.
        raise ForbiddenCpusError(
            '%s overlaps %s on CPUs %s: Nova\'s dedicated CPUs are never '
            'managed' % (source, nova.where(protected_name),
                         cpuset.format_cpuset(overlap)))
    if nova.shared is not None and nova.vcpu_pin_set is None:
        beyond = cpus - nova.shared
        if beyond:
            raise ForbiddenCpusError(
                '%s reaches CPUs %s outside %s: Nova runs no guest of the '
                'shared policy there, so ufo-agent may not pin one there; '
                'list only CPUs of cpu_shared_set'
                % (source, cpuset.format_cpuset(beyond), nova.where(SHARED)))


def resolve(online_cpus, managed=None, reserved='', nova_config=(),
            nova_config_dir=None):
    """Return the frozenset of managed host CPUs (see the module's doc).

    ``online_cpus`` is what the host has; the other arguments are the
    ``[host_cpus]`` options as given. Raises :class:`ManagedCpusError`.
    """
    online = frozenset(online_cpus)
    nova = read_nova_cpu_sets(nova_config, nova_config_dir)
    if nova is not None and nova.vcpu_pin_set is not None \
            and nova.dedicated is not None:
        raise ManagedCpusError(
            '%s and %s are both set; nova-compute refuses this too: unset '
            'vcpu_pin_set' % (nova.where(PIN_SET), DEDICATED))
    if managed is not None and managed.strip():
        source = origin = MANAGED
        cpus = _parse(managed, source)
        if nova is None:
            LOG.info('No Nova configuration read: managing %s without '
                     'checking it against Nova\'s %s', source, DEDICATED)
    elif nova is not None and nova.vcpu_pin_set is not None:
        raise ManagedCpusError(
            '%s is unset and %s is set: with this deprecated option Nova '
            'pins dedicated and shared guests on the same CPUs, so none is '
            'safe to manage. Move Nova to %s and %s, or set %s to CPUs '
            'outside vcpu_pin_set.'
            % (MANAGED, nova.where(PIN_SET), SHARED, DEDICATED, MANAGED))
    elif nova is not None and nova.shared is not None:
        source, origin = 'nova.conf ' + SHARED, nova.where(SHARED)
        cpus = nova.shared
    else:
        raise _no_managed_set(nova, nova_config, nova_config_dir)
    check_against_nova(cpus, source, nova)
    missing = cpus - online
    if missing:
        raise ManagedCpusError('%s lists CPUs %s that are not online'
                               % (origin, cpuset.format_cpuset(missing)))
    reserved_cpus = _parse(reserved or '', RESERVED)
    stray = reserved_cpus - online
    if stray:
        raise ManagedCpusError('%s lists CPUs %s that are not online'
                               % (RESERVED, cpuset.format_cpuset(stray)))
    result = cpus - reserved_cpus
    if not result:
        raise ManagedCpusError('%s minus %s leaves no CPU to manage'
                               % (origin, RESERVED))
    LOG.info('Managing host CPUs %s (%s minus %s)',
             cpuset.format_cpuset(result), origin, RESERVED)
    return result


def _file_state(path):
    try:
        info = os.stat(path)
    except OSError:
        return None
    return info.st_ino, info.st_size, info.st_mtime_ns


class NovaWatch:
    """Checks the managed CPUs again whenever Nova's configuration changes.

    Nova's sets are read at start, as nova-compute reads them at its own
    start: an operator who changes them restarts nova-compute, which may
    then give a dedicated guest CPUs this agent still manages. ``check``
    costs a stat of each file while none changed; after a change it reads
    Nova's sets again (:func:`read_nova_cpu_sets`) and applies the rules
    of :func:`check_against_nova` to ``cpus``, the CPUs the agent pins.
    """

    def __init__(self, cpus, nova_config=(), nova_config_dir=None):
        self.cpus = frozenset(cpus)
        self.files = [path for path in _paths(nova_config) if path]
        self.config_dir = nova_config_dir or None
        self._state = self._files_state()

    def _files_state(self):
        state = [(path, _file_state(path)) for path in self.files]
        if self.config_dir:
            state.append((self.config_dir, _file_state(self.config_dir)))
            state.extend((path, _file_state(path)) for path in sorted(
                glob.glob(os.path.join(self.config_dir, '*.conf'))))
        return tuple(state)

    def check(self):
        """None while the CPUs are still safe to manage; else why not."""
        state = self._files_state()
        if state == self._state:
            return None
        self._state = state
        try:
            nova = read_nova_cpu_sets(self.files, self.config_dir)
            check_against_nova(self.cpus, 'the managed set %s'
                               % cpuset.format_cpuset(self.cpus), nova)
        except ForbiddenCpusError as exc:
            return 'Nova\'s CPU sets changed: %s' % exc
        except ManagedCpusError as exc:
            # Half written, or not Nova's any more: read on its next change.
            LOG.warning('Nova\'s configuration changed but cannot be '
                        'checked: %s', exc)
            return None
        LOG.info('Nova\'s configuration changed; the managed CPUs %s are '
                 'still within its sets', cpuset.format_cpuset(self.cpus))
        return None
