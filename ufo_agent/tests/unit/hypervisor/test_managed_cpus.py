"""Resolving the managed CPU set from options and Nova's configuration."""

import logging
import os

import pytest

from ufo_agent import cpuset
from ufo_agent.hypervisor import managed_cpus as mc

ONLINE = frozenset(range(16))


def _write(path, compute='', default=''):
    path.write_text('[DEFAULT]\n' + default + '[compute]\n' + compute)
    return str(path)


def _nova(tmp_path, shared, dedicated='', name='nova.conf'):
    # The %(x)s proves nova.conf is not read with configparser's
    # interpolation; the quotes are how Nova's own docs write the sets.
    return _write(tmp_path / name,
                  'cpu_shared_set = "%s"\ncpu_dedicated_set = %s\n'
                  % (shared, dedicated),
                  default='my_ip = %(x)s\n')


@pytest.fixture
def defaults(tmp_path, monkeypatch):
    """Nova's default paths, moved into tmp_path (nothing there yet)."""
    etc = tmp_path / 'etc-nova'
    etc.mkdir()
    files = (str(etc / 'nova.conf'), str(etc / 'nova-compute.conf'))
    directory = str(etc / 'nova.conf.d')
    monkeypatch.setattr(mc, 'NOVA_CONFIG_FILES', files)
    monkeypatch.setattr(mc, 'NOVA_CONFIG_DIR', directory)
    return etc, files, directory


def test_own_option_minus_reserved():
    assert mc.resolve(ONLINE, '2-9', '2,3') == frozenset(range(4, 10))


def test_a_cpu_range_no_host_has_is_an_error_naming_the_option(tmp_path):
    with pytest.raises(mc.ManagedCpusError,
                       match=r'^\[host_cpus\] managed_cpus: CPU 999999999'):
        mc.resolve(ONLINE, '0-999999999')
    path = _nova(tmp_path, '4-99999999')
    with pytest.raises(mc.ManagedCpusError, match='cpu_shared_set'):
        mc.resolve(ONLINE, None, '', [path])


def test_nova_shared_set_when_no_own_option(tmp_path):
    path = _nova(tmp_path, '4-11', '12-15')
    assert mc.resolve(ONLINE, None, '', [path]) == frozenset(range(4, 12))
    # One path as a string, as before nova_config became a list.
    assert mc.resolve(ONLINE, None, '', path) == frozenset(range(4, 12))


def test_every_online_cpu_is_no_longer_the_default():
    """Neither option nor Nova: refused (it used to manage every CPU)."""
    with pytest.raises(mc.ManagedCpusError) as err:
        mc.resolve(ONLINE)
    message = str(err.value)
    assert '[host_cpus] managed_cpus' in message
    assert '[host_cpus] nova_config' in message
    assert '[compute] cpu_shared_set' in message


def test_default_paths_are_read(defaults):
    etc, files, directory = defaults
    _nova(etc, '2-11', '12-15')
    assert mc.resolve(ONLINE, None, '', files, directory) == frozenset(
        range(2, 12))
    # nova-compute.conf and nova.conf.d override nova.conf, as for
    # nova-compute started with no --config-file.
    _write(etc / 'nova-compute.conf', 'cpu_shared_set = 4-11\n')
    assert mc.resolve(ONLINE, None, '', files, directory) == frozenset(
        range(4, 12))
    os.mkdir(directory)
    _write(etc / 'nova.conf.d' / '50-cpu.conf', 'cpu_shared_set = 6-11\n')
    assert mc.resolve(ONLINE, None, '', files, directory) == frozenset(
        range(6, 12))


def test_missing_default_paths_are_fine_with_managed_cpus(defaults, caplog):
    _, files, directory = defaults
    with caplog.at_level(logging.INFO, logger=mc.__name__):
        assert mc.resolve(ONLINE, '2-9', '', files, directory) == frozenset(
            range(2, 10))
    assert files[0] + ' does not exist, skipped' in caplog.text
    assert 'No Nova configuration read' in caplog.text
    assert all(r.levelno == logging.INFO for r in caplog.records)


def test_missing_default_paths_without_managed_cpus_are_refused(defaults):
    _, files, directory = defaults
    with pytest.raises(mc.ManagedCpusError) as err:
        mc.resolve(ONLINE, None, '', files, directory)
    message = str(err.value)
    for name in ('[host_cpus] managed_cpus is unset',
                 'no Nova configuration found', '[host_cpus] nova_config',
                 '[compute] cpu_shared_set', files[0], directory):
        assert name in message


def test_nova_config_without_shared_set_is_refused(tmp_path):
    path = _write(tmp_path / 'nova.conf', 'cpu_dedicated_set = 8-15\n')
    with pytest.raises(mc.ManagedCpusError,
                       match=r'\[host_cpus\] managed_cpus is unset and '
                             r'nova.conf \[compute\] cpu_shared_set \(read '
                             r'from .*nova.conf\) is not set. Set '
                             r'\[host_cpus\] managed_cpus'):
        mc.resolve(ONLINE, None, '', [path])


def test_missing_explicit_paths_are_refused(tmp_path):
    absent = str(tmp_path / 'absent.conf')
    for value in ([absent], absent):
        with pytest.raises(mc.ManagedCpusError,
                           match=r'\[host_cpus\] nova_config: .*absent.conf '
                                 r'does not exist.*\[host_cpus\] '
                                 'managed_cpus'):
            mc.resolve(ONLINE, '2-9', '', value)
    path = _nova(tmp_path, '4-11')
    with pytest.raises(mc.ManagedCpusError,
                       match=r'\[host_cpus\] nova_config_dir: .*absent.d '
                             'does not exist'):
        mc.resolve(ONLINE, None, '', [path], str(tmp_path / 'absent.d'))
    with pytest.raises(mc.ManagedCpusError,
                       match=r'nova_config_dir: .* is not a directory'):
        mc.resolve(ONLINE, None, '', [], path)


def test_empty_nova_config_means_not_read(tmp_path):
    assert mc.resolve(ONLINE, '0-3', '', [], '') == frozenset(range(4))
    assert mc.resolve(ONLINE, '0-3', '', ['', ''], None) == frozenset(
        range(4))


def test_config_dir_overrides_the_files_in_name_order(tmp_path):
    first = _nova(tmp_path, '0-15', '', name='a.conf')
    second = _write(tmp_path / 'b.conf', 'cpu_shared_set = 1-15\n')
    conf_d = tmp_path / 'nova.conf.d'
    conf_d.mkdir()
    assert mc.resolve(ONLINE, None, '', [first, second], str(conf_d)) == \
        frozenset(range(1, 16))
    _write(conf_d / '20-late.conf', 'cpu_shared_set = 3-15\n')
    _write(conf_d / '10-early.conf', 'cpu_shared_set = 2-15\n')
    # Not *.conf: not read, as with oslo.config's --config-dir.
    _write(conf_d / '99-ignored.conf.bak', 'cpu_shared_set = 0\n')
    _write(conf_d / '.99-hidden.conf', 'cpu_shared_set = 0\n')
    assert mc.resolve(ONLINE, None, '', [first, second], str(conf_d)) == \
        frozenset(range(3, 16))
    # The order of nova_config matters: the later file wins.
    assert mc.resolve(ONLINE, None, '', [second, first]) == ONLINE


def test_an_empty_later_value_unsets_an_earlier_one(tmp_path):
    first = _nova(tmp_path, '4-15', '12-15', name='a.conf')
    with pytest.raises(mc.ManagedCpusError, match='overlaps'):
        mc.resolve(ONLINE, '8-15', '', [first])
    second = _write(tmp_path / 'b.conf', 'cpu_dedicated_set =\n')
    # As for nova-compute, cpu_dedicated_set is unset: 12-15 may be managed.
    assert mc.resolve(ONLINE, '8-15', '', [first, second]) == frozenset(
        range(8, 16))
    third = _write(tmp_path / 'c.conf', 'cpu_shared_set =\n')
    with pytest.raises(mc.ManagedCpusError, match='cpu_shared_set .* is not '
                                                  'set'):
        mc.resolve(ONLINE, None, '', [first, third])


def test_dedicated_cpus_are_never_managed(tmp_path):
    path = _nova(tmp_path, '4-11', '12-15')
    # An explicit set beside the dedicated one is fine...
    assert mc.resolve(ONLINE, '6-11', '', [path]) == frozenset(range(6, 12))
    # ...one that reaches into it is refused, naming both options.
    with pytest.raises(mc.ManagedCpusError,
                       match=r'^\[host_cpus\] managed_cpus overlaps nova.conf '
                             r'\[compute\] cpu_dedicated_set \(read from '
                             r'.*nova.conf\) on CPUs 12-13'):
        mc.resolve(ONLINE, '8-13', '', [path])
    # Reserving the overlap does not make it acceptable.
    with pytest.raises(mc.ManagedCpusError, match='overlaps'):
        mc.resolve(ONLINE, '8-13', '12-13', [path])


def test_managed_cpus_stay_inside_novas_shared_set(tmp_path):
    # 0-3 are in neither of Nova's sets: Nova keeps every guest off them.
    path = _nova(tmp_path, '4-11', '12-15')
    with pytest.raises(mc.ManagedCpusError,
                       match=r'^\[host_cpus\] managed_cpus reaches CPUs 2-3 '
                             r'outside nova.conf \[compute\] cpu_shared_set '
                             r'\(read from .*nova.conf\): Nova runs no guest '
                             r'of the shared policy there'):
        mc.resolve(ONLINE, '2-7', '', [path])
    # Reserving them does not make the option right.
    with pytest.raises(mc.ManagedCpusError, match='outside'):
        mc.resolve(ONLINE, '2-7', '2-3', [path])
    assert mc.resolve(ONLINE, '4-7', '', [path]) == frozenset(range(4, 8))
    # Without cpu_shared_set (no shared guests), only the dedicated set
    # bounds it.
    path = _write(tmp_path / 'ded.conf', 'cpu_dedicated_set = 12-15\n')
    assert mc.resolve(ONLINE, '2-7', '', [path]) == frozenset(range(2, 8))


def test_shared_set_overlapping_dedicated_set_is_refused(tmp_path):
    path = _nova(tmp_path, '4-11', '10-15')
    with pytest.raises(mc.ManagedCpusError,
                       match=r'^nova.conf \[compute\] cpu_shared_set overlaps '
                             r'nova.conf \[compute\] cpu_dedicated_set .* on '
                             r'CPUs 10-11'):
        mc.resolve(ONLINE, None, '', [path])


def test_caret_exclusions(tmp_path):
    path = _nova(tmp_path, '1,4-12,^8,15', '0-3,^1')
    assert mc.resolve(ONLINE, None, '^13,9-13', [path]) == frozenset(
        [1, 4, 5, 6, 7, 15])
    # CPU 1 is excluded from the dedicated set, so it may be managed.
    assert mc.resolve(ONLINE, '1,4-7', '', [path]) == frozenset(
        [1, 4, 5, 6, 7])
    with pytest.raises(mc.ManagedCpusError, match='on CPUs 0,2-3'):
        mc.resolve(ONLINE, '0-7,^1', '', [path])


def test_vcpu_pin_set_with_dedicated_set_is_refused(tmp_path):
    path = _write(tmp_path / 'nova.conf', 'cpu_dedicated_set = 8-15\n',
                  default='vcpu_pin_set = 2-7\n')
    for managed in (None, '2-7'):
        with pytest.raises(mc.ManagedCpusError,
                           match=r'\[DEFAULT\] vcpu_pin_set .* and '
                                 r'\[compute\] cpu_dedicated_set are both '
                                 'set'):
            mc.resolve(ONLINE, managed, '', [path])


def test_vcpu_pin_set_alone_is_refused_without_managed_cpus(tmp_path):
    # With vcpu_pin_set, Nova's cpu_shared_set only places emulator
    # threads: it is not where shared guests run.
    path = _write(tmp_path / 'nova.conf', 'cpu_shared_set = 0-1\n',
                  default='vcpu_pin_set = 2-15\n')
    with pytest.raises(mc.ManagedCpusError) as err:
        mc.resolve(ONLINE, None, '', [path])
    message = str(err.value)
    for name in ('[host_cpus] managed_cpus is unset',
                 'nova.conf [DEFAULT] vcpu_pin_set',
                 '[compute] cpu_shared_set', '[compute] cpu_dedicated_set'):
        assert name in message


def test_vcpu_pin_set_is_protected_like_the_dedicated_set(tmp_path):
    path = _write(tmp_path / 'nova.conf', '',
                  default='vcpu_pin_set = 4-15,^9\n')
    assert mc.resolve(ONLINE, '0-3', '', [path]) == frozenset(range(4))
    assert mc.resolve(ONLINE, '0-3,9', '', [path]) == frozenset(
        [0, 1, 2, 3, 9])
    with pytest.raises(mc.ManagedCpusError,
                       match=r'managed_cpus overlaps nova.conf \[DEFAULT\] '
                             r'vcpu_pin_set .* on CPUs 4'):
        mc.resolve(ONLINE, '0-4', '', [path])


@pytest.mark.parametrize('compute,default,match', [
    ('cpu_shared_set = 1,^1\n', '',
     r'cpu_shared_set \(read from .*nova.conf\): no CPU left'),
    ('cpu_shared_set = 0-3\ncpu_dedicated_set = 4-x\n', '',
     r'nova.conf \[compute\] cpu_dedicated_set \(read from .*nova.conf\): '
     'invalid'),
    ('cpu_shared_set = 0-3\n', 'vcpu_pin_set = ^\n',
     r'\[DEFAULT\] vcpu_pin_set \(read from .*\): invalid'),
    ('cpu_shared_set = $nova_cpus\n', '',
     r'cpu_shared_set \(read from .*\): .*nova_cpus'),
    ('cpu_shared_set 0-3\n', '',
     r'\[host_cpus\] nova_config, nova_config_dir: cannot read Nova.s '
     r'configuration: .*nova.conf'),
])
def test_invalid_nova_config_names_file_and_option(tmp_path, compute,
                                                   default, match):
    path = _write(tmp_path / 'nova.conf', compute, default=default)
    with pytest.raises(mc.ManagedCpusError, match=match):
        mc.resolve(ONLINE, None, '', [path])


def test_unreadable_nova_config_names_the_option(tmp_path):
    path = tmp_path / 'nova.conf'
    path.mkdir()     # exists, but is no file (root reads any mode)
    with pytest.raises(mc.ManagedCpusError,
                       match=r'\[host_cpus\] nova_config.*cannot read'):
        mc.resolve(ONLINE, '0-3', '', [str(path)])


@pytest.mark.parametrize('kwargs,match', [
    (dict(managed='2-x'), r'\[host_cpus\] managed_cpus: invalid'),
    (dict(managed='8-20'), r'\[host_cpus\] managed_cpus lists CPUs 16-20'),
    (dict(managed='0-3', reserved='0-3'), 'leaves no CPU'),
    (dict(managed='0-3', reserved='30'),
     r'\[host_cpus\] reserved_cpus lists CPUs 30'),
])
def test_bad_sets_name_the_option(kwargs, match):
    with pytest.raises(mc.ManagedCpusError, match=match):
        mc.resolve(ONLINE, **kwargs)


def test_shared_set_not_online_names_the_file(tmp_path):
    path = _nova(tmp_path, '8-20')
    with pytest.raises(mc.ManagedCpusError,
                       match=r'nova.conf \[compute\] cpu_shared_set \(read '
                             r'from .*nova.conf\) lists CPUs 16-20'):
        mc.resolve(ONLINE, None, '', [path])


# Nova 34.0.0's nova.virt.hardware.parse_cpu_spec on these strings (None:
# exception.Invalid), recorded by running it; cpuset.parse_cpuset must
# agree, since the agent parses Nova's options with it.
NOVA_PARSE_CPU_SPEC = [
    ('', []), ('0', [0]), ('0-3', [0, 1, 2, 3]), ('0-3,8', [0, 1, 2, 3, 8]),
    (' 1 , 2 ', [1, 2]), ('1-4,^3,6', [1, 2, 4, 6]), ('^3,1-4', [1, 2, 4]),
    ('1-8,^2-4', [1, 5, 6, 7, 8]), ('^ 2-4,1-8', [1, 5, 6, 7, 8]),
    ('1 - 3', [1, 2, 3]), ('1-1', [1]), (',,1,,', [1]),
    ('4-12,^8,15', [4, 5, 6, 7, 9, 10, 11, 12, 15]), ('1,^1', []),
    ('^1', []), ('^', None), ('-1', None), ('1-', None), ('-', None),
    ('3-1', None), ('1--3', None), ('1-3-5', None), ('a', None),
    ('1-a', None), ('^a', None), ('0x1', None), ('1_0', [10]), ('+1', [1]),
    ('+1-+3', [1, 2, 3]), ('1.0', None), ('1 2', None), ('\u0663', [3]),
    ('^-1', None), ('^ 1', []), ('1-3,^2,^3', [1]), ('0-3,^0-3', []),
    (' ', []), ('\t1', [1]), ('1-3,^1-', None), ('1,,^', None),
    ('00-02', [0, 1, 2]), ('^2-1', None),
]


def _ours(spec):
    try:
        return sorted(cpuset.parse_cpuset(spec))
    except cpuset.CpusetError:
        return None


@pytest.mark.parametrize('spec,expected', NOVA_PARSE_CPU_SPEC)
def test_cpuset_syntax_is_novas(spec, expected):
    assert _ours(spec) == expected


def _rewrite(path, text):
    """Write and move the mtime on: a same-second rewrite must show."""
    with open(path, 'w') as handle:
        handle.write(text)
    stat = os.stat(path)
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10 ** 9))


def test_a_change_of_novas_sets_that_forbids_managed_cpus_is_told(
        tmp_path, caplog):
    caplog.set_level(logging.INFO)
    path = _nova(tmp_path, '4-11', '12-15')
    conf_d = tmp_path / 'nova.conf.d'
    conf_d.mkdir()
    managed = mc.resolve(ONLINE, None, '', [path], str(conf_d))
    watch = mc.NovaWatch(managed, [path], str(conf_d))
    assert watch.check() is None            # nothing changed
    # The shared set grows: still safe.
    _rewrite(path, '[compute]\ncpu_shared_set = 2-11\n'
             'cpu_dedicated_set = 12-15\n')
    assert watch.check() is None
    assert 'still within its sets' in caplog.text
    # Half written: said, not acted on; looked at again when it changes.
    _rewrite(path, '[compute\ncpu_shared_set = 4-\n')
    assert watch.check() is None
    assert 'cannot be checked' in caplog.text
    # A file of the directory gives Nova 10-11 as dedicated CPUs.
    _rewrite(path, '[compute]\ncpu_shared_set = 4-9\n')
    (conf_d / '50-pinned.conf').write_text(
        '[compute]\ncpu_dedicated_set = 10-15\n')
    problem = watch.check()
    assert problem.startswith('Nova\'s CPU sets changed: the managed set '
                              '4-11 overlaps')
    assert 'cpu_dedicated_set' in problem and 'on CPUs 10-11' in problem
    # The shared set shrinks below the managed CPUs.
    (conf_d / '50-pinned.conf').unlink()
    _rewrite(path, '[compute]\ncpu_shared_set = 4-7\n')
    assert 'reaches CPUs 8-11 outside' in watch.check()
