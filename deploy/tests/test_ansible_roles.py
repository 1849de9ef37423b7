"""The Ansible roles of deploy/ansible, run for real with ansible-core.

``ansible-playbook -c local`` runs the shipped playbooks with the shipped
Kolla-Ansible example variables into a temporary root (every path is a
role variable), twice: the second run must change nothing. What they
wrote is then read by the programs that will read it: ufo-agent.conf by
the agent's own options and start-up checks, the Kolla-Ansible override
by Nova 34's option loader and its filter and weigher loaders, the
OpenStack-Ansible variables as os_nova's config_template renders them.
"""

import configparser
import grp
import json
import os
import pwd
import re
import subprocess
import sys

from oslo_config import cfg
from oslo_log import log as oslo_log
import pytest
import yaml

from ufo_agent.cmd import agent
from ufo_agent.conf import opts as agent_opts
from ufo_agent.controller import config as controller_config
from ufo_agent import hostsignal
from ufo_agent.hypervisor import managed_cpus
from ufo_agent import publishers
from ufo_agent.service import settings as settings_mod
from ufo_nova import conf as ufo_nova_conf

from conftest import REPO

ANSIBLE = REPO / 'deploy' / 'ansible'
# What an operator's Kolla-Ansible passwords.yml and inventory give.
KOLLA_SECRETS = {
    'rabbitmq_password': 'rabbit-secret',
    'ufo_kolla_rabbitmq_host': '192.0.2.10',
    'nova_keystone_password': 'nova-secret',
    'ufo_kolla_keystone_internal_url': 'http://192.0.2.10:5000',
}
# nova-compute's nova.conf as Kolla-Ansible writes it on a compute host,
# with the operator's cpu_shared_set (node_custom_config/nova-compute.conf).
KOLLA_NOVA_COMPUTE_CONF = """\
[DEFAULT]
compute_driver = libvirt.LibvirtDriver
[compute]
cpu_shared_set = 2-7
cpu_dedicated_set = 8-11
"""
# An operator's own nova-scheduler override, which must survive.
OPERATOR_SCHEDULER_CONF = "[DEFAULT]\ndebug = True\n"
KOLLA_OVERRIDE = 'etc/kolla/config/nova/nova-scheduler.conf'
PLAYBOOKS = ('ufo-agent.yml', 'ufo-scheduler-overrides.yml')
RECAP = re.compile(r'^localhost\s+:\s+ok=(\d+)\s+changed=(\d+)\s+'
                   r'unreachable=(\d+)\s+failed=(\d+)', re.M)


def run_playbooks(playbooks, extra_vars, tmp_path, name):
    """ansible-playbook -c local; returns (ok, changed, failed, output)."""
    vars_file = tmp_path / ('%s-vars.json' % name)
    vars_file.write_text(json.dumps(extra_vars))
    env = dict(os.environ,
               ANSIBLE_LOCAL_TEMP=str(tmp_path / 'ansible-tmp'),
               ANSIBLE_REMOTE_TEMP=str(tmp_path / 'ansible-tmp'),
               ANSIBLE_NOCOLOR='1', ANSIBLE_RETRY_FILES_ENABLED='0',
               ANSIBLE_PYTHON_INTERPRETER=sys.executable)
    proc = subprocess.run(
        [os.path.join(os.path.dirname(sys.executable), 'ansible-playbook'),
         '-c', 'local', '-i', 'localhost,']
        + [str(ANSIBLE / playbook) for playbook in playbooks]
        + ['-e', '@%s' % (ANSIBLE / 'examples' / 'kolla-compute.yml'),
           '-e', '@%s' % vars_file],
        env=env, capture_output=True, text=True, cwd=tmp_path)
    output = proc.stdout + proc.stderr
    match = RECAP.search(proc.stdout)
    assert match, output
    ok, changed, unreachable, failed = map(int, match.groups())
    return ok, changed, failed + unreachable, output


@pytest.fixture(scope='module')
def deployed(tmp_path_factory, ufo_nova_wheel):
    """Both playbooks run twice into one temporary root."""
    tmp = tmp_path_factory.mktemp('deploy')
    root = tmp / 'root'
    nova_compute = root / 'etc/kolla/nova-compute/nova.conf'
    nova_compute.parent.mkdir(parents=True)
    nova_compute.write_text(KOLLA_NOVA_COMPUTE_CONF)
    scheduler_conf = root / KOLLA_OVERRIDE
    scheduler_conf.parent.mkdir(parents=True)
    scheduler_conf.write_text(OPERATOR_SCHEDULER_CONF)
    me = pwd.getpwuid(os.geteuid()).pw_name
    my_group = grp.getgrgid(os.getegid()).gr_name
    extra = dict(
        KOLLA_SECRETS,
        ufo_agent_hosts='localhost',
        ufo_agent_become=False,
        ufo_agent_wheel=str(ufo_nova_wheel),
        ufo_agent_python=sys.executable,
        # The test environment has the dependencies; no libvirt-python
        # build, no download, no system package.
        ufo_agent_system_packages=[],
        ufo_agent_extras=[],
        ufo_agent_pip_extra_args='--no-deps',
        ufo_agent_venv=str(root / 'opt/ufo-nova'),
        ufo_agent_config_dir=str(root / 'etc/ufo'),
        ufo_agent_unit_dir=str(root / 'etc/systemd/system'),
        ufo_agent_state_path=str(root / 'var/lib/ufo-agent'),
        ufo_agent_nova_config=[str(nova_compute)],
        # No system account and no systemd here: this process's own.
        ufo_agent_user=me,
        ufo_agent_group=my_group,
        ufo_agent_manage_service=False,
        ufo_scheduler_kolla_config_dir=str(root / 'etc/kolla/config'),
        ufo_scheduler_osa_vars_file=str(
            root / 'etc/openstack_deploy/user_ufo_nova.yml'),
        ufo_scheduler_osa_pip_package='file://%s' % ufo_nova_wheel,
    )
    # Both playbooks in one run, as a site playbook would.
    runs = [run_playbooks(PLAYBOOKS, extra, tmp, 'run%d' % i)
            for i in (1, 2)]
    return root, runs


def test_playbooks_succeed_and_a_second_run_changes_nothing(deployed):
    first, second = deployed[1]
    assert first[2] == 0 and first[1] > 0, first[3]
    assert second[2] == 0, second[3]
    assert second[1] == 0, second[3]


def test_the_wheel_is_installed_with_the_packaged_unit(deployed):
    root = deployed[0]
    venv = root / 'opt/ufo-nova'
    version = subprocess.run(
        [str(venv / 'bin/python'), '-c',
         'import importlib.metadata as m; print(m.version("ufo-nova"))'],
        capture_output=True, text=True, check=True).stdout.strip()
    assert version == subprocess.run(
        [sys.executable, '-c',
         'import importlib.metadata as m; print(m.version("ufo-nova"))'],
        capture_output=True, text=True, check=True).stdout.strip()
    assert os.access(venv / 'bin/ufo-agent', os.X_OK)
    unit = root / 'etc/systemd/system/ufo-agent.service'
    assert unit.read_text() == (
        REPO / 'etc/systemd/ufo-agent.service').read_text()


def _unit_settings(path):
    """systemd's reading of a drop-in: an empty assignment resets."""
    values = {}
    for line in path.read_text().splitlines():
        if not line or line.startswith(('#', '[')):
            continue
        key, _, value = line.partition('=')
        values[key] = [] if value == '' else values.get(key, []) + [value]
    return values


def test_the_drop_in_runs_the_venvs_agent_with_kollas_ids(deployed):
    root = deployed[0]
    dropin = _unit_settings(
        root / 'etc/systemd/system/ufo-agent.service.d/'
               'ufo-agent-ansible.conf')
    agent_bin = root / 'opt/ufo-nova/bin/ufo-agent'
    conf = root / 'etc/ufo/ufo-agent.conf'
    assert dropin['ExecStart'] == ['%s --config-file %s' % (agent_bin, conf)]
    assert dropin['ExecStopPost'] == [
        '%s --config-file %s --restore' % (agent_bin, conf)]
    assert dropin['SupplementaryGroups'] == ['42436']
    assert dropin['CapabilityBoundingSet'] == ['CAP_CHOWN']
    assert dropin['ReadWritePaths'] == [str(root / 'var/lib/ufo-agent')]
    assert 'Environment' not in dropin


def agent_conf(path):
    """ufo-agent's options, registered as the agent does, read from path."""
    conf = cfg.ConfigOpts()
    for group, opts in agent_opts.list_opts():
        conf.register_group(group)
        conf.register_opts(opts, group=group)
    oslo_log.register_options(conf)
    conf(['--config-file', str(path)], project='ufo-agent',
         default_config_files=[], default_config_dirs=[])
    return conf


def test_ufo_agent_conf_passes_the_agents_own_checks(deployed):
    root = deployed[0]
    path = root / 'etc/ufo/ufo-agent.conf'
    assert os.stat(path).st_mode & 0o777 == 0o640
    conf = agent_conf(path)
    # What ufo-agent checks at start, before it takes its lock.
    controller_config.ControllerConfig.from_conf(conf)
    settings_mod.AgentSettings.from_conf(conf)
    hostsignal.Windows.from_conf(conf)
    agent.check_qemu_owner(conf, dry_run=True)
    assert (conf.channel.qemu_user, conf.channel.qemu_group) == (
        '42436', '42436')
    # nova-compute's cpu_shared_set, read from Kolla's nova.conf.
    managed = managed_cpus.resolve(
        set(range(12)), conf.host_cpus.managed_cpus,
        conf.host_cpus.reserved_cpus, conf.host_cpus.nova_config,
        conf.host_cpus.nova_config_dir)
    assert set(managed) == set(range(2, 8))
    loaded = publishers.load(conf, 'compute-1.example.org')
    try:
        assert sorted(type(p).__name__ for p in loaded.publishers) == [
            'NotificationPublisher', 'PlacementTraitPublisher']
    finally:
        loaded.close()
    assert conf.oslo_messaging_notifications.transport_url == (
        'rabbit://openstack:rabbit-secret@192.0.2.10:5672//')
    assert conf.oslo_messaging_rabbit.rabbit_quorum_queue is True
    # The exchange nova-scheduler's listener binds to by default.
    from ufo_nova import conf as ufo_nova_conf
    default = {o.dest: o.default for o in ufo_nova_conf.OPTS}
    assert conf.control_exchange == default['notification_exchange']
    assert conf.placement.password == 'nova-secret'


def test_ufo_agent_conf_names_only_options_that_exist(deployed):
    path = deployed[0] / 'etc/ufo/ufo-agent.conf'
    conf = agent_conf(path)
    # The publishers register oslo.messaging's and keystoneauth's options
    # (the transport's, the rabbit driver's, the password plugin's).
    publishers.load(conf, 'compute-1').close()
    written = configparser.ConfigParser(interpolation=None)
    written.read(path)
    unknown = []
    for section in ['DEFAULT'] + written.sections():
        names = (written.defaults() if section == 'DEFAULT' else
                 {k: v for k, v in written.items(section)
                  if k not in written.defaults()})
        group = conf if section == 'DEFAULT' else conf[section]
        unknown += ['[%s] %s' % (section, name) for name in names
                    if name not in group]
    assert unknown == []


def nova_view(path):
    """What Nova 34 makes of a nova.conf (its own loaders), as a dict."""
    out = subprocess.run(
        [sys.executable, '-m', 'ufo_nova.tests.devstack.nova_scheduler_view',
         str(path)], capture_output=True, text=True, cwd=REPO)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def ufo_options(path):
    """The [ufo] options as the scheduler plugins read them."""
    conf = cfg.ConfigOpts()
    ufo_nova_conf.register_opts(conf)
    conf(['--config-file', str(path)], project='nova',
         default_config_files=[], default_config_dirs=[])
    return {name: conf.ufo[name] for name in conf.ufo}


@pytest.fixture(scope='module')
def nova_defaults(tmp_path_factory):
    empty = tmp_path_factory.mktemp('nova') / 'nova.conf'
    empty.write_text('')
    return nova_view(empty)


@pytest.fixture(scope='module')
def kolla_view(deployed):
    return nova_view(deployed[0] / KOLLA_OVERRIDE)


def test_kolla_override_is_what_nova_scheduler_needs(deployed, kolla_view,
                                                     nova_defaults):
    path = deployed[0] / KOLLA_OVERRIDE
    assert path.read_text().startswith(OPERATOR_SCHEDULER_CONF)
    view = kolla_view
    # Nova's defaults kept, UFO's filter and weigher added.
    assert view['enabled_filters'] == (
        nova_defaults['enabled_filters'] + ['UFOFilter'])
    assert view['available_filters'] == (
        nova_defaults['available_filters'] + ['ufo_nova.filter.UFOFilter'])
    assert view['weight_classes'] == (
        nova_defaults['weight_classes'] +
        ['ufo_nova.weigher.UFOIdlePoolWeigher'])
    # Nova's loaders find every enabled filter and all its weighers.
    assert set(view['enabled_filters']) <= set(
        view['available_filter_classes'])
    assert 'ufo_nova.weigher.UFOIdlePoolWeigher' in view['weigher_classes']
    assert len(view['weigher_classes']) == (
        len(nova_defaults['weigher_classes']) + 1)
    ufo = ufo_options(path)
    assert ufo['unknown_host_policy'] == 'fail-open'
    assert ufo['signal_max_age'] == 120
    assert ufo['notification_topics'] == ['ufo_notifications']


def render_config_template_ini(overrides):
    """os_nova's config_template for an INI file, on overrides alone.

    A YAML set (``? value``, loaded as a mapping whose values are all
    null) is one line per value, a list one comma-separated line, anything
    else its string.
    """
    lines = []
    for section, options in overrides.items():
        lines.append('[%s]' % section)
        for name, value in options.items():
            if isinstance(value, dict) and not any(value.values()):
                lines += ['%s = %s' % (name, v) for v in sorted(value)]
            elif isinstance(value, list):
                lines.append('%s = %s' % (name, ','.join(map(str, value))))
            else:
                lines.append('%s = %s' % (name, value))
    return '\n'.join(lines) + '\n'


def test_osa_variables_render_to_the_same_options(deployed, kolla_view,
                                                  tmp_path, ufo_nova_wheel):
    root = deployed[0]
    osa = yaml.safe_load(
        (root / 'etc/openstack_deploy/user_ufo_nova.yml').read_text())
    assert osa['nova_user_pip_packages'] == ['file://%s' % ufo_nova_wheel]
    # UFOFilter joins OSA's own enabled filters.
    assert osa['nova_scheduler_extra_filters'] == ['UFOFilter']
    rendered = tmp_path / 'nova.conf'
    rendered.write_text(
        render_config_template_ini(osa['nova_nova_conf_overrides']))
    osa_view = nova_view(rendered)
    for name in ('available_filters', 'weight_classes',
                 'available_filter_classes', 'weigher_classes'):
        assert sorted(osa_view[name]) == sorted(kolla_view[name]), name
    assert ufo_options(rendered) == ufo_options(root / KOLLA_OVERRIDE)


def test_a_bare_package_name_is_refused(tmp_path):
    # ufo-nova is not on PyPI: whoever registers the name would be
    # installed on every hypervisor.
    extra = dict(KOLLA_SECRETS, ufo_agent_hosts='localhost',
                 ufo_agent_become=False, ufo_agent_wheel='ufo-nova')
    ok, changed, failed, output = run_playbooks(['ufo-agent.yml'], extra,
                                                tmp_path, 'bare')
    assert failed == 1 and changed == 0, output
    assert 'ufo_agent_wheel must name a ufo-nova wheel' in output
