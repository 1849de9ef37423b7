"""``ufo-agent``: UFO core management for the guests of one hypervisor.

Runs beside nova-compute. Every ``[controller] tick_interval`` it observes
the guests, runs the UFO controller and enforces its plan. SIGTERM or
SIGINT stop it cleanly: every managed guest gets all its vCPUs online and
its original pins back. SIGHUP reloads the options that may change at run
time (``mutable`` in the sample configuration) and keeps every guest.
``--restore`` only gives the guests back, for the systemd unit's stop and
failure paths (:func:`restore_host`): it needs libvirt, the managed CPUs
and the host-wide lock, nothing else, and retries libvirt within a time
budget.

One agent per host: both the agent and ``--restore`` take a host-wide
lock, ``/run/ufo-agent/ufo-agent.lock`` whatever the configuration,
before they touch libvirt (:mod:`.pidlock`). Under
systemd (``Type=notify``) the agent reports READY=1 once it has adopted
the guests, WATCHDOG=1 after every healthy tick and STOPPING=1 when it
stops; ``[agent] max_failed_ticks`` failed ticks in a row make it give
every guest back and exit with status 1.
"""

import dataclasses
import functools
import logging
import signal
import sys
import time

from oslo_config import cfg
from oslo_log import log as oslo_logging

from ufo_agent.channel import host_channel
from ufo_agent import conf as ufo_conf
from ufo_agent.controller import config as controller_config
from ufo_agent.controller import topology
from ufo_agent.driver import base
from ufo_agent import hostsignal
from ufo_agent.hypervisor import cgroup
from ufo_agent.hypervisor import managed_cpus
from ufo_agent.hypervisor import sysfs
from ufo_agent import publishers
from ufo_agent.service import heartbeat as heartbeat_mod
from ufo_agent.service import loop
from ufo_agent.service import metrics
from ufo_agent.service import pidlock
from ufo_agent.service import restore as restore_mod
from ufo_agent.service import sdnotify
from ufo_agent.service import settings as settings_mod
from ufo_agent import state

LOG = logging.getLogger('ufo_agent')
CONF = ufo_conf.CONF

CLI_OPTS = [
    cfg.BoolOpt('restore', default=False,
                help='Give every managed guest back (all vCPUs online, '
                     'original pins) and exit.'),
    cfg.BoolOpt('dry-run', default=False,
                help='Same as [agent] dry_run = true.'),
    cfg.IntOpt('ticks', default=0, min=0,
               help='Stop after this many ticks (0: run until stopped).'),
]


# How long --restore waits for a dying agent to let go of the lock (the
# unit's ExecStopPost can start while the agent's process is exiting).
RESTORE_LOCK_WAIT = 5.0
# How long --restore keeps trying libvirt (connecting, listing, giving
# guests back), and the pause between two rounds: with the lock wait,
# inside the unit's TimeoutStopSec (60 s).
RESTORE_BUDGET = 40.0
RESTORE_RETRY_PAUSE = 1.0


#: Exit statuses. systemd restarts the agent after EXIT_FAILURE (libvirt
#: not reachable yet, another agent still stopping, ticks that kept
#: failing) and not after EXIT_CONFIG (``RestartPreventExitStatus``): a
#: mistake in a configuration file is not mended by starting again.
EXIT_FAILURE = 1
EXIT_CONFIG = 78        # EX_CONFIG of sysexits.h, systemd's "CONFIG"


class StartupError(Exception):
    """An environment problem found at start; trying again may help."""

    exit_status = EXIT_FAILURE


class ConfigError(StartupError):
    """A configuration mistake found at start; it needs the operator."""

    exit_status = EXIT_CONFIG


def _driver():
    try:
        import libvirt  # noqa: F401
    except ImportError:
        raise ConfigError(
            'libvirt-python is not installed: install ufo-nova with its '
            'agent extra (pip install \'.[agent]\' in its source '
            'checkout; building it needs libvirt-dev and pkg-config)')
    from ufo_agent.driver.libvirt import driver as libvirt_driver
    return libvirt_driver


def resolve_managed_cpus(conf):
    """The managed host CPUs, before anything touches libvirt."""
    try:
        online = sysfs.online_cpus()
    except (OSError, ValueError) as exc:
        raise StartupError('cannot read the online CPUs: %s' % exc)
    try:
        return managed_cpus.resolve(
            online, conf.host_cpus.managed_cpus,
            conf.host_cpus.reserved_cpus, conf.host_cpus.nova_config,
            conf.host_cpus.nova_config_dir)
    except managed_cpus.ManagedCpusError as exc:
        raise ConfigError(str(exc))


def take_lock(restore=False):
    """The host-wide lock; StartupError if another agent holds it.

    Whatever the configuration: a second agent with its own file and
    state directory finds the same lock.
    """
    try:
        return pidlock.acquire(wait=RESTORE_LOCK_WAIT if restore else 0.0)
    except pidlock.Locked as exc:
        who = 'pid %d' % exc.pid if exc.pid else 'another process'
        if restore:
            raise StartupError(
                'not restoring: ufo-agent (%s) is running and holds %s; it '
                'gives its guests back itself when it stops' % (who,
                                                                exc.path))
        raise StartupError(
            'another ufo-agent (%s) is running on this host: it holds %s. '
            'Two agents would fight over the same guests; stop it first'
            % (who, exc.path))
    except OSError as exc:
        raise StartupError(
            'cannot take the host-wide lock %s: %s. It must be writable by '
            'the agent\'s user only: the packaged unit creates %s for it '
            '(RuntimeDirectory=ufo-agent); elsewhere run the agent as root '
            'or create the directory, mode 0700, owned by its user'
            % (pidlock.host_lock_path(), exc, pidlock.HOST_LOCK_DIR))


def check_qemu_owner(conf, dry_run=False):
    """``[channel] qemu_user`` and ``qemu_group`` exist; StartupError if not.

    Not in dry run: this process must also be able to give pages to QEMU's
    group (root, or a member of it).
    """
    user, group = conf.channel.qemu_user, conf.channel.qemu_group
    uid, gid = host_channel.qemu_ids(user, group)
    if uid is None:
        raise ConfigError(
            '[channel] qemu_user=%s: no such user. It must be the user QEMU '
            'runs as, "user" in libvirt\'s qemu.conf (libvirt-qemu on '
            'Debian and Ubuntu, qemu on RHEL)' % user)
    if gid is None:
        raise ConfigError(
            '[channel] qemu_group=%s: no such group. It must be the group '
            'QEMU runs as, "group" in libvirt\'s qemu.conf (kvm on Debian '
            'and Ubuntu, qemu on RHEL)' % group)
    if not dry_run:
        problem = host_channel.group_problem(user, group)
        if problem:
            raise ConfigError('[channel] qemu_group=%s: %s'
                              % (group, problem))


def build(conf):
    """Check the configuration, lock, build the driver and the agent.

    Returns (driver, agent, lock). Nothing touches libvirt before the lock
    is held.
    """
    try:
        controller = controller_config.ControllerConfig.from_conf(conf)
        settings = settings_mod.AgentSettings.from_conf(conf)
    except (ValueError, cfg.ConfigFileValueError) as exc:
        raise ConfigError(str(exc))
    managed = resolve_managed_cpus(conf)
    try:
        host = sysfs.host_cpus()
        cores = topology.HostTopology(host.siblings, host.numa_of_cpu,
                                      managed=managed, little=host.little)
    except (topology.TopologyError, sysfs.CoreClassError) as exc:
        raise ConfigError(str(exc))
    if controller.be_policy == 'soak':
        try:
            cgroup.check_cpu_idle()
        except cgroup.CgroupError as exc:
            raise ConfigError(
                '[controller] be_policy = soak needs cgroup cpu.idle: %s. '
                'Set be_policy = idle-pool, or let the agent write the '
                'guests\' cgroups ("BE soak mode" in the agent '
                'documentation)' % exc)
    if len(cores) < controller.emulator_min_cores + 1:
        raise ConfigError(
            '[host_cpus] managed_cpus: %d whole physical cores are managed; '
            'ufo-agent needs at least %d ([controller] emulator_min_cores '
            'plus one)' % (len(cores), controller.emulator_min_cores + 1))
    drivers = _driver()
    if conf.dry_run:
        settings = dataclasses.replace(settings, dry_run=True)
    check_qemu_owner(conf, settings.dry_run)
    lock = take_lock()
    try:
        driver, agent = _build_agent(conf, drivers, managed, controller,
                                     settings)
    except BaseException:
        lock.release()
        raise
    return driver, agent, lock


def _libvirt_driver(conf, drivers, managed, pin_wait=0, **channels):
    """The driver over ``[agent] libvirt_uri``; ``channels``: its modes.

    ``pin_wait`` 0: pins wait the whole call deadline (the restore's).
    """
    try:
        return drivers.LibvirtDriver(
            conf.agent.libvirt_uri, managed,
            manage_non_nova=conf.agent.manage_non_nova_domains,
            shm_dir=conf.channel.shm_dir,
            name_prefix=conf.channel.name_prefix,
            shm_size_mib=conf.channel.shm_size_mib,
            read_retries=conf.channel.read_retries,
            qemu_user=conf.channel.qemu_user,
            qemu_group=conf.channel.qemu_group,
            call_timeout=conf.agent.libvirt_call_timeout,
            pin_wait=pin_wait, **channels)
    except base.DriverError as exc:
        raise StartupError(str(exc))


def _pin_wait(conf):
    """``[agent] libvirt_pin_wait``, checked against the call deadline."""
    wait, timeout = (conf.agent.libvirt_pin_wait,
                     conf.agent.libvirt_call_timeout)
    if not wait:
        return timeout
    if timeout and wait > timeout:
        raise StartupError(
            '[agent] libvirt_pin_wait (%g s) is longer than [agent] '
            'libvirt_call_timeout (%g s): a pin cannot wait past the '
            'deadline of its call' % (wait, timeout))
    return wait


def _build_agent(conf, drivers, managed, controller, settings):
    driver = _libvirt_driver(conf, drivers, managed, _pin_wait(conf),
                             attach_channels=not settings.dry_run)
    try:
        outputs = publishers.BackgroundPublisher(publishers.load(
            conf, _hypervisor_hostname(conf, driver)))
        tracker = hostsignal.HostSignalTracker(
            hostsignal.Windows.from_conf(conf))
    except ValueError as exc:
        driver.close()
        raise ConfigError(str(exc))
    store = state.StateStore(conf.agent.state_path)
    agent = loop.Agent(driver, managed, controller, settings, store,
                       signal_tracker=tracker, publishers=outputs)
    return driver, agent


def _hypervisor_hostname(conf, driver):
    """libvirt's host name when [publishers] nodename needs it, else None."""
    if conf.publishers.nodename or not conf.publishers.enabled:
        return None
    try:
        return driver.hostname()
    except base.DriverError as exc:
        driver.close()
        raise StartupError('[publishers] nodename is unset and libvirt does '
                           'not tell this host\'s name: %s' % exc)


def restore_host(conf):
    """``--restore``: give every guest back, then clear the trait.

    Only what giving the guests back needs: the managed CPUs, the lock,
    libvirt, and the in-flight pin record under ``[agent] state_path``
    (kept for the next agent; a record that cannot be read or written
    does not stop the restore). No controller, publisher or signal
    settings are read, so a mistake there cannot stop the guests from
    getting their CPUs back, and no channel is created or attached: a
    guest whose channel is already attached is asked, through it, to
    bring every vCPU online. ``[channel] qemu_user`` only says whose
    pages to trust and is not checked: with a user that does not exist,
    a page QEMU's user owns is not used.
    libvirt failing is tried again for up to :data:`RESTORE_BUDGET`
    seconds (:mod:`ufo_agent.service.restore`). Returns the exit status:
    1, after a message naming them, when guests could not be given back.
    """
    managed = resolve_managed_cpus(conf)
    drivers = _driver()
    lock = take_lock(restore=True)

    def connect():
        try:
            return _libvirt_driver(conf, drivers, managed,
                                   attach_channels=False,
                                   use_attached_channels=True)
        except StartupError as exc:
            raise base.DriverError(str(exc))

    hypervisor_hostname = None
    try:
        outcome = restore_mod.restore_guests(
            connect, RESTORE_BUDGET, RESTORE_RETRY_PAUSE,
            in_flight_record=state.InFlightRecord(conf.agent.state_path))
        driver = outcome.driver
        try:
            if driver is not None and conf.publishers.enabled and \
                    not conf.publishers.nodename:
                try:
                    hypervisor_hostname = driver.hostname()
                except base.DriverError as exc:
                    LOG.warning('libvirt does not tell this host\'s name, '
                                'the trait is cleared on the host name: '
                                '%s', exc)
        finally:
            if driver is not None:
                driver.close()
    finally:
        lock.release()
    if 'placement' in (conf.publishers.enabled or ()):
        # An agent that died may have left the host marked overloaded: on
        # the node the agent named, libvirt's name unless nodename is set.
        from ufo_agent.publishers import placement
        placement.clear_trait(conf, hypervisor_hostname)
    if outcome.ok:
        LOG.info('Gave %d guest(s) back', len(outcome.restored))
        return 0
    message = outcome.summary(RESTORE_BUDGET)
    LOG.error('Restore failed: %s', message)
    print('ufo-agent: restore failed: %s' % message, file=sys.stderr)
    return EXIT_FAILURE


def reload(conf, agent):
    """SIGHUP: read the files again, apply the options that may change.

    The guests stay managed, with their pins and what was learned.
    Options that cannot change at run time keep their values (oslo.config
    warns about each); a value that is not valid leaves everything as it
    was. Returns {option: (old, new)} of what the agent applied.
    """
    LOG.info('Reloading the configuration files')
    try:
        conf.mutate_config_files()
        controller = controller_config.ControllerConfig.from_conf(conf)
        settings = settings_mod.AgentSettings.from_conf(conf)
        changes = agent.reconfigure(controller, settings)
    except (ValueError, cfg.Error) as exc:
        LOG.error('Not applying the reloaded configuration, the agent '
                  'keeps running with the previous one: %s', exc)
        return {}
    if changes:
        LOG.info('Configuration reloaded: %s', ', '.join(
            '%s %s -> %s' % (name, old, new)
            for name, (old, new) in sorted(changes.items())))
    else:
        LOG.info('Configuration reloaded: no agent or controller option '
                 'changed')
    return changes


def run(agent, interval, max_ticks=0, server=None, notifier=None,
        heartbeat=None, reload=None, checks=()):
    """Tick until SIGTERM or SIGINT (or ``max_ticks``), then release.

    SIGHUP calls ``reload(agent)`` before the next tick. ``notifier``
    tells systemd (READY, WATCHDOG after every healthy tick, STOPPING);
    ``heartbeat`` runs from start to stop. ``[agent] max_failed_ticks``
    failed ticks in a row stop the agent too: every guest is given back
    and the exit status is 1, so that systemd starts a new agent (an
    agent that stays up without managing would look healthy). Returns
    the exit status. Each of ``checks`` is called before every tick and
    returns None, or the configuration mistake that stops the agent (it
    then gives every guest back and returns EXIT_CONFIG).
    """
    stopping, reloading = [], []
    gave_up = False
    notifier = notifier or sdnotify.Notifier({})

    def stop(signum, frame):
        LOG.info('Signal %d: stopping', signum)
        stopping.append(signum)

    def hup(signum, frame):
        LOG.info('Signal %d: reloading the configuration', signum)
        reloading.append(signum)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGHUP, hup)
    agent.start()
    if heartbeat is not None:
        heartbeat.start()
    notifier.ready('managing %d guests' % len(agent.guests))
    next_tick = time.monotonic()
    refused = None
    try:
        while not stopping:
            refused = next(filter(None, (check() for check in checks)),
                           None)
            if refused:
                LOG.error('%s: giving every guest back and stopping',
                          refused)
                break
            if reloading:
                del reloading[:]
                if reload is not None:
                    try:
                        reload(agent)
                    except Exception:
                        LOG.exception('Reload failed; the agent keeps its '
                                      'configuration')
            agent.tick()
            if not agent.failed_ticks:
                # Only healthy progress feeds systemd's watchdog.
                notifier.watchdog()
            elif agent.failed_ticks >= agent.settings.max_failed_ticks:
                LOG.error('%d ticks in a row failed ([agent] '
                          'max_failed_ticks): giving every guest back and '
                          'exiting with status 1', agent.failed_ticks)
                gave_up = True
                break
            if server is not None and server.wanted():
                server.publish(agent.snapshot)
            if max_ticks and agent.ticks >= max_ticks:
                break
            next_tick += interval
            delay = next_tick - time.monotonic()
            if delay < 0:
                LOG.warning('Tick took %.0f ms, longer than the %.0f ms '
                            'interval', 1000 * agent.tick_seconds,
                            1000 * interval)
                next_tick = time.monotonic()
            else:
                time.sleep(delay)
    finally:
        notifier.stopping('giving every guest back')
        try:
            failed = agent.stop()
        finally:
            if heartbeat is not None:
                heartbeat.stop()
        LOG.info('Released %d guests (%d failed)',
                 len(agent.guests) - len(failed), len(failed))
    if refused:
        return EXIT_CONFIG
    return EXIT_FAILURE if failed or gave_up else 0


def _check_watchdog(notifier, interval, settings):
    usec = notifier.watchdog_usec
    if not usec:
        return
    needed = settings.liveness_window(interval)
    if usec / 1e6 < needed:
        LOG.warning('systemd\'s WatchdogSec (%.0f s) is shorter than %.0f s '
                    '(3 x [controller] tick_interval + [agent] '
                    'libvirt_call_timeout): slow ticks will get the agent '
                    'killed', usec / 1e6, needed)


def _exit_status(exc):
    """EXIT_CONFIG for a configuration mistake, else EXIT_FAILURE."""
    return getattr(exc, 'exit_status', EXIT_CONFIG)


def main(argv=None):
    CONF.register_cli_opts(CLI_OPTS)
    oslo_logging.register_options(CONF)
    try:
        CONF(argv if argv is not None else sys.argv[1:],
             project='ufo-agent', prog='ufo-agent')
    except cfg.Error as exc:
        print('ufo-agent: %s' % exc, file=sys.stderr)
        return EXIT_CONFIG
    oslo_logging.setup(CONF, 'ufo-agent')
    if CONF.restore:
        try:
            return restore_host(CONF)
        except (StartupError, cfg.Error) as exc:
            LOG.error('Cannot restore: %s', exc)
            print('ufo-agent: %s' % exc, file=sys.stderr)
            return _exit_status(exc)
    try:
        driver, agent, lock = build(CONF)
    except (StartupError, cfg.Error) as exc:
        LOG.error('Cannot start: %s', exc)
        print('ufo-agent: %s' % exc, file=sys.stderr)
        return _exit_status(exc)
    try:
        try:
            for uuid in driver.remove_stale_pages():
                LOG.info('Removed the channel page of gone guest %s', uuid)
        except (base.DriverError, OSError) as exc:
            LOG.warning('Could not look for stale channel pages: %s', exc)
        server = None
        interval = CONF.controller.tick_interval
        if CONF.agent.metrics_port:
            try:
                # A request waits for the snapshot after the next tick.
                server = metrics.MetricsServer(CONF.agent.metrics_host,
                                               CONF.agent.metrics_port,
                                               wait=2 * interval)
            except OSError as exc:
                print('ufo-agent: [agent] metrics_port %d: %s'
                      % (CONF.agent.metrics_port, exc), file=sys.stderr)
                return EXIT_FAILURE
            server.start()
        notifier = sdnotify.Notifier()
        _check_watchdog(notifier, interval, agent.settings)
        heartbeat = heartbeat_mod.Heartbeat(
            driver, agent.settings.heartbeat_interval,
            agent.settings.liveness_window(interval),
            lambda: agent.last_progress)
        # Nova's CPU sets, read at start, are checked again when its
        # files change: nova-compute applies them when it restarts.
        nova = managed_cpus.NovaWatch(agent.enforcer.managed_cpus,
                                      CONF.host_cpus.nova_config,
                                      CONF.host_cpus.nova_config_dir)
        try:
            return run(agent, interval, CONF.ticks, server, notifier,
                       heartbeat, functools.partial(reload, CONF),
                       checks=(nova.check,))
        finally:
            notifier.close()
            if server is not None:
                server.stop()
    finally:
        driver.close()
        lock.release()


if __name__ == '__main__':
    sys.exit(main())
