"""The guest module's source and packaging, checked with real tools."""

import os
import shutil
import subprocess

# The checkout these tests run from (tools/checkpatch-guest.sh is not
# installed).
TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))
MODSRC = os.path.join(TOP, 'guest_image', 'ufo-guest')


def _dkms_conf():
    conf = {}
    with open(os.path.join(MODSRC, 'dkms.conf')) as f:
        for line in f:
            if '=' in line and not line.startswith('#'):
                k, v = line.strip().split('=', 1)
                conf[k] = v.strip('"')
    return conf


def test_checkpatch_clean():
    out = subprocess.run([os.path.join(TOP, 'tools', 'checkpatch-guest.sh')],
                         text=True, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT)
    print(out.stdout)
    totals = [line for line in out.stdout.splitlines()
              if line.startswith('total:')]
    assert len(totals) == 2, out.stdout
    for line in totals:
        assert line.startswith('total: 0 errors, 0 warnings, 0 checks'), line
    assert out.returncode == 0


def test_module_builds_without_warnings(guest_artifacts, tmp_path):
    for name in ('ufo_guest.c', 'ufo_channel.h', 'Makefile'):
        shutil.copy(os.path.join(MODSRC, name), str(tmp_path))
    out = subprocess.run(['make', '-C', str(tmp_path),
                          'KDIR=' + guest_artifacts['KDIR']], text=True,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    assert out.returncode == 0, out.stdout
    assert 'warning:' not in out.stdout, out.stdout
    info = subprocess.run(['modinfo', str(tmp_path / 'ufo_guest.ko')],
                          text=True, stdout=subprocess.PIPE,
                          check=True).stdout
    assert 'license:        GPL' in info
    assert 'vermagic:       %s ' % guest_artifacts['KRELEASE'] in info
    assert 'alias:          pci:v00001AF4d00001110' in info


def test_dkms_builds_for_guest_kernel(guest_artifacts, tmp_path):
    conf = _dkms_conf()
    name, version = conf['PACKAGE_NAME'], conf['PACKAGE_VERSION']
    src = tmp_path / 'src'
    tree = tmp_path / 'tree'
    shutil.copytree(MODSRC, str(src / ('%s-%s' % (name, version))))
    tree.mkdir()
    krel = guest_artifacts['KRELEASE']
    common = ['-m', name, '-v', version, '-k', krel,
              '--sourcetree', str(src), '--dkmstree', str(tree)]
    env = dict(os.environ)
    env.pop('ARCH', None)
    out = subprocess.run(['dkms', 'build', '--kernelsourcedir',
                          guest_artifacts['KDIR']] + common, text=True,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         env=env)
    assert out.returncode == 0, out.stdout
    ko = tree / name / version / krel / 'x86_64' / 'module' / (
        conf['BUILT_MODULE_NAME[0]'] + '.ko')
    assert ko.exists(), out.stdout
    assert conf['AUTOINSTALL'] == 'yes'


def test_workload_phases_and_report(guest_artifacts):
    # The static workload runs on the host as well as in the guest.
    out = subprocess.run(
        [guest_artifacts['WORKLOAD'], 'rate=200:2,800:2', 'svc_us=100',
         'workers=2', 'report_ms=500', 'duration=4'],
        text=True, stdout=subprocess.PIPE, timeout=60, check=True).stdout
    reports = [dict(kv.split('=') for kv in line.split()[1:])
               for line in out.splitlines()
               if line.startswith('UFO-WL t=')]
    assert len(reports) == 8, out
    rates = [float(r['rate']) for r in reports]
    assert rates[0] == 200 and rates[-1] == 800, rates
    first = sum(int(r['arrivals']) for r in reports[:3])
    last = sum(int(r['arrivals']) for r in reports[-3:])
    # 1.5 s at 200/s, then 1.5 s at 800/s (Poisson: generous bounds).
    assert 150 < first < 500 and 800 < last < 1600, (first, last)
    for r in reports:
        assert int(r['p50_us']) <= int(r['p95_us']) <= int(r['p99_us'])
        assert int(r['p99_us']) <= int(r['max_us'])
