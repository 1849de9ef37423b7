"""``ufo-agent`` refuses to start when its managed CPUs are not safe.

The managed set is resolved before the driver is loaded: these tests run
without libvirt, and fail if the agent gets as far as the driver.
"""

import pytest

from ufo_agent.cmd import agent
from ufo_agent.driver import base
from ufo_agent.hypervisor import cgroup
from ufo_agent.hypervisor import managed_cpus as mc
from ufo_agent.hypervisor import sysfs


@pytest.fixture
def start(agent_main_state, tmp_path, monkeypatch, capsys):
    """Run ``ufo-agent --config-file`` on the given text; (rc, stderr)."""
    def no_driver():
        pytest.fail('the driver was loaded before the managed set was safe')

    monkeypatch.setattr(agent, '_driver', no_driver)
    monkeypatch.setattr(sysfs, 'online_cpus',
                        lambda root=None: frozenset(range(16)))

    def run(text):
        path = tmp_path / 'ufo-agent.conf'
        path.write_text(text)
        rc = agent.main(['--config-file', str(path),
                         '--log-file', str(tmp_path / 'agent.log')])
        return rc, capsys.readouterr().err

    return run


def test_missing_nova_config_and_no_managed_cpus(start, tmp_path):
    rc, err = start('[host_cpus]\nnova_config = %s\n'
                    % (tmp_path / 'nova.conf'))
    assert rc == agent.EXIT_CONFIG
    assert err.startswith('ufo-agent: [host_cpus] nova_config: ')
    assert 'nova.conf does not exist' in err
    assert '[host_cpus] managed_cpus' in err


def test_no_nova_config_at_the_default_paths(start, tmp_path, monkeypatch):
    """Nothing configured on a host without Nova: refused, naming why."""
    absent = str(tmp_path / 'etc-nova' / 'nova.conf')
    monkeypatch.setattr(mc, 'NOVA_CONFIG_FILES', (absent,))
    rc, err = start('[host_cpus]\nnova_config = %s\nnova_config_dir =\n'
                    % absent)
    assert rc == agent.EXIT_CONFIG
    for name in ('[host_cpus] managed_cpus is unset',
                 'no Nova configuration found', '[host_cpus] nova_config',
                 '[compute] cpu_shared_set'):
        assert name in err
    assert 'Cannot start: Cannot tell which host CPUs to manage' in (
        tmp_path / 'agent.log').read_text()


def test_managed_cpus_overlapping_the_dedicated_set(start, tmp_path):
    nova = tmp_path / 'nova.conf'
    nova.write_text('[compute]\ncpu_shared_set = 0-7\n'
                    'cpu_dedicated_set = 8-15\n')
    rc, err = start('[host_cpus]\nmanaged_cpus = 4-11\nnova_config = %s\n'
                    'nova_config_dir =\n' % nova)
    assert rc == agent.EXIT_CONFIG
    assert ('[host_cpus] managed_cpus overlaps nova.conf [compute] '
            'cpu_dedicated_set' in err)


def test_a_safe_set_goes_on_to_the_driver(start, tmp_path, monkeypatch):
    """With a safe set, build() resolves it, then loads the driver."""
    nova = tmp_path / 'nova.conf'
    nova.write_text('[compute]\ncpu_shared_set = 2-7\n'
                    'cpu_dedicated_set = 8-15\n')
    resolved = []
    real_resolve = mc.resolve

    def resolve(*args):
        resolved.append(real_resolve(*args))
        return resolved[-1]

    class DriverLoaded(Exception):
        pass

    def driver():
        raise DriverLoaded()

    monkeypatch.setattr(mc, 'resolve', resolve)
    monkeypatch.setattr(agent, '_driver', driver)
    # The host's cores are read (sysfs) before the driver is loaded.
    monkeypatch.setattr(sysfs, 'host_cpus', lambda root=None: base.HostCpus(
        tuple((c,) for c in range(16)), {}, frozenset(range(16))))
    with pytest.raises(DriverLoaded):
        start('[host_cpus]\nnova_config = %s\nnova_config_dir =\n' % nova)
    assert resolved == [frozenset(range(2, 8))]


def test_contradicting_core_class_files_stop_the_agent(start, tmp_path,
                                                       monkeypatch):
    def broken(root=None):
        raise sysfs.CoreClassError(
            '/sys/devices/system/cpu/cpu3/cpu_capacity: not a number')

    monkeypatch.setattr(sysfs, 'host_cpus', broken)
    nova = tmp_path / 'nova.conf'
    nova.write_text('[compute]\ncpu_shared_set = 0-7\n')
    rc, err = start('[host_cpus]\nnova_config = %s\nnova_config_dir =\n'
                    % nova)
    assert rc == agent.EXIT_CONFIG
    assert 'cpu3/cpu_capacity: not a number' in err


def test_soak_without_cpu_idle_stops_the_agent(start, tmp_path,
                                               monkeypatch):
    def old_kernel(proc_root='/proc'):
        raise cgroup.CgroupError('no mounted cpu controller has cpu.idle')

    monkeypatch.setattr(cgroup, 'check_cpu_idle', old_kernel)
    monkeypatch.setattr(sysfs, 'host_cpus', lambda root=None: base.HostCpus(
        tuple((c,) for c in range(16)), {}, frozenset(range(16))))
    nova = tmp_path / 'nova.conf'
    nova.write_text('[compute]\ncpu_shared_set = 0-7\n')
    rc, err = start('[host_cpus]\nnova_config = %s\nnova_config_dir =\n'
                    '[controller]\nbe_policy = soak\n' % nova)
    assert rc == agent.EXIT_CONFIG
    assert '[controller] be_policy = soak needs cgroup cpu.idle' in err
    assert 'no mounted cpu controller has cpu.idle' in err


def test_a_heartbeat_slower_than_half_the_guest_watchdog_stops_the_agent(
        start, tmp_path, monkeypatch):
    monkeypatch.setattr(sysfs, 'host_cpus', lambda root=None: base.HostCpus(
        tuple((c,) for c in range(16)), {}, frozenset(range(16))))
    rc, err = start('[host_cpus]\nmanaged_cpus = 0-15\nnova_config =\n'
                    'nova_config_dir =\n[agent]\nheartbeat_interval = 6\n')
    assert rc == agent.EXIT_CONFIG
    assert err.startswith('ufo-agent: Value for option heartbeat_interval')
    assert 'less than or equal to 2.5' in err


def test_soak_where_the_cgroups_cannot_be_written_stops_the_agent(
        start, tmp_path, monkeypatch):
    def protected(proc_root='/proc'):
        raise cgroup.CgroupError(
            '/sys/fs/cgroup is mounted read-only for ufo-agent (under '
            'systemd: ProtectControlGroups=yes, as in the packaged unit)')

    monkeypatch.setattr(cgroup, 'check_cpu_idle', protected)
    monkeypatch.setattr(sysfs, 'host_cpus', lambda root=None: base.HostCpus(
        tuple((c,) for c in range(16)), {}, frozenset(range(16))))
    rc, err = start('[host_cpus]\nmanaged_cpus = 0-15\nnova_config =\n'
                    'nova_config_dir =\n[controller]\nbe_policy = soak\n')
    assert rc == agent.EXIT_CONFIG
    assert err.startswith('ufo-agent: [controller] be_policy = soak needs '
                          'cgroup cpu.idle: /sys/fs/cgroup is mounted '
                          'read-only')
    assert 'Set be_policy = idle-pool' in err


def test_a_configuration_mistake_and_an_unreachable_libvirt_exit_apart(
        start, agent_main_state, monkeypatch):
    """systemd must restart the second (status 1) and not the first (78)."""
    rc, err = start('[controller]\ntick_interval = -1\n')
    assert rc == agent.EXIT_CONFIG and 'tick_interval' in err
    agent.CONF.reset()
    agent.CONF.clear()

    def unreachable(conf):
        raise agent.StartupError('cannot connect to qemu:///system')
    monkeypatch.setattr(agent, 'build', unreachable)
    rc, err = start('')
    assert rc == agent.EXIT_FAILURE and 'cannot connect' in err
