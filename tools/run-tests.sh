#!/bin/bash
# Runs the whole ufo-nova test suite on a fresh Debian 12 machine.
#
# It installs what it needs: system packages listed in bindep.txt (profile
# "test"), tox and bindep into a bootstrap virtualenv, Python packages into
# tox envs. It ends with one summary line "N passed, N failed, N skipped".
#
# Usage: tools/run-tests.sh [tox env list]   (default: every env CI runs)
set -euo pipefail

TOP=$(cd "$(dirname "$0")/.." && pwd)
cd "$TOP"
ENVS=${1:-pep8,py3,functional,nova-functional,genconfig,docs,releasenotes}
TOOLS_VENV=${UFO_TOOLS_VENV:-$TOP/.venv-tools}

SUDO=""
if [ "$(id -u)" != 0 ]; then
    SUDO=sudo
fi

apt_install() {
    if [ -z "${_APT_UPDATED:-}" ]; then
        $SUDO apt-get -o DPkg::Lock::Timeout=600 update -q
        _APT_UPDATED=1
    fi
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get -o DPkg::Lock::Timeout=600 install -y -q \
        --no-install-recommends "$@"
}

# 1. A virtualenv for the tools that install everything else.
if ! python3 -c 'import ensurepip, venv' 2>/dev/null; then
    apt_install python3-venv
fi
if [ ! -x "$TOOLS_VENV/bin/tox" ] || [ ! -x "$TOOLS_VENV/bin/bindep" ]; then
    python3 -m venv "$TOOLS_VENV"
    "$TOOLS_VENV/bin/pip" install -q --upgrade pip
    "$TOOLS_VENV/bin/pip" install -q 'tox>=4.0' bindep
fi

# 2. System packages (bindep exits 1 when something is missing).
missing=$("$TOOLS_VENV/bin/bindep" -b test || true)
if [ -n "$missing" ]; then
    echo "Installing system packages: $missing"
    # shellcheck disable=SC2086
    apt_install $missing
fi

# 3. The tox envs. Each pytest run leaves a JUnit report for the summary.
rm -f .tox/*/junit.xml
rc=0
"$TOOLS_VENV/bin/tox" -e "$ENVS" || rc=$?

# 4. One closing line over every JUnit report that this run wrote.
python3 - "$TOP/.tox" <<'PY' || true
import glob
import sys
import xml.etree.ElementTree as ET

tests = failed = skipped = 0
for path in glob.glob(sys.argv[1] + '/*/junit.xml'):
    root = ET.parse(path).getroot()
    for suite in root.iter('testsuite'):
        tests += int(suite.get('tests', 0))
        failed += int(suite.get('failures', 0)) + int(suite.get('errors', 0))
        skipped += int(suite.get('skipped', 0))
print('%d passed, %d failed, %d skipped'
      % (tests - failed - skipped, failed, skipped))
PY
exit $rc
