"""Resolving the managed CPU set from options and nova.conf."""

import pytest

from ufo_agent.hypervisor import managed_cpus as mc

ONLINE = frozenset(range(16))


def _nova(tmp_path, shared, dedicated=''):
    path = tmp_path / 'nova.conf'
    # The %(x)s proves nova.conf is read without interpolation.
    path.write_text('[DEFAULT]\nmy_ip = %(x)s\n[compute]\n'
                    'cpu_shared_set = ' + shared + '\n'
                    'cpu_dedicated_set = ' + dedicated + '\n')
    return str(path)


def test_own_option_minus_reserved():
    assert mc.resolve(ONLINE, '2-9', '2,3') == frozenset(range(4, 10))


def test_nova_shared_set_when_no_own_option(tmp_path):
    path = _nova(tmp_path, '4-11', '12-15')
    assert mc.resolve(ONLINE, None, '', path) == frozenset(range(4, 12))


def test_all_online_cpus_by_default():
    assert mc.resolve(ONLINE) == ONLINE


@pytest.mark.parametrize('kwargs,match', [
    (dict(managed='2-x'), r'\[host_cpus\] managed_cpus: invalid'),
    (dict(managed='8-20'), r'\[host_cpus\] managed_cpus lists CPUs 16-20'),
    (dict(managed='0-3', reserved='0-3'), 'leaves no CPU'),
    (dict(reserved='30'), r'\[host_cpus\] reserved_cpus lists CPUs 30'),
])
def test_bad_sets_name_the_option(kwargs, match):
    with pytest.raises(mc.ManagedCpusError, match=match):
        mc.resolve(ONLINE, **kwargs)


def test_overlap_with_dedicated_set_is_refused(tmp_path):
    path = _nova(tmp_path, '4-11', '10-15')
    with pytest.raises(mc.ManagedCpusError,
                       match='overlaps nova.conf .compute. '
                             'cpu_dedicated_set on CPUs 10-11'):
        mc.resolve(ONLINE, None, '', path)
    with pytest.raises(mc.ManagedCpusError, match='managed_cpus overlaps'):
        mc.resolve(ONLINE, '0-10', '', path)


def test_missing_or_empty_nova_config(tmp_path):
    with pytest.raises(mc.ManagedCpusError, match='nova_config: cannot'):
        mc.resolve(ONLINE, None, '', str(tmp_path / 'absent.conf'))
    with pytest.raises(mc.ManagedCpusError, match='cpu_shared_set is empty'):
        mc.resolve(ONLINE, None, '', _nova(tmp_path, ''))
