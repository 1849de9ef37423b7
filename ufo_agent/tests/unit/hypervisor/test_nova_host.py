"""nova-compute's [DEFAULT] host, read as nova-compute reads it."""

import pytest

from ufo_agent.hypervisor import nova_host


def write(path, text):
    path.write_text(text)
    return str(path)


def test_later_file_and_config_dir_win(tmp_path):
    first = write(tmp_path / 'nova.conf', '[DEFAULT]\nhost = compute-1\n')
    second = write(tmp_path / 'nova-compute.conf',
                   '[DEFAULT]\nhost = compute-2\n')
    found = nova_host.read_nova_host([first, second])
    assert found == nova_host.NovaHost('compute-2', (first, second), True)
    assert found.origin == ('nova.conf [DEFAULT] host (read from %s, %s)'
                            % (first, second))
    conf_d = tmp_path / 'nova.conf.d'
    conf_d.mkdir()
    write(conf_d / '20-b.conf', '[DEFAULT]\nhost = compute-b\n')
    write(conf_d / '10-a.conf', '[DEFAULT]\nhost = compute-a\n')
    assert nova_host.read_nova_host(
        [first, second], str(conf_d)).name == 'compute-b'


def test_unset_is_novas_default_the_hostname(tmp_path):
    path = write(tmp_path / 'nova.conf', '[DEFAULT]\ndebug = true\n')
    found = nova_host.read_nova_host([path], hostname=lambda: 'machine')
    assert (found.name, found.configured) == ('machine', False)
    assert 'is not set in %s' % path in found.origin
    none = nova_host.read_nova_host([], hostname=lambda: 'machine')
    assert none == nova_host.NovaHost('machine')
    assert '[host_cpus] nova_config' in none.origin


def test_missing_default_paths_are_skipped(tmp_path, monkeypatch):
    monkeypatch.setattr(nova_host.managed_cpus, 'NOVA_CONFIG_FILES',
                        (str(tmp_path / 'absent.conf'),))
    found = nova_host.read_nova_host([str(tmp_path / 'absent.conf')],
                                     hostname=lambda: 'machine')
    assert found == nova_host.NovaHost('machine')


@pytest.mark.parametrize('value', ['', 'two words', 'bad_host!'])
def test_invalid_host_names_file_and_option(tmp_path, value):
    # nova-compute refuses these too (HostDomainOpt).
    path = write(tmp_path / 'nova.conf', '[DEFAULT]\nhost = %s\n' % value)
    with pytest.raises(ValueError, match=r'nova.conf \[DEFAULT\] host '
                       r'\(read from .*nova.conf\)'):
        nova_host.read_nova_host([path])
