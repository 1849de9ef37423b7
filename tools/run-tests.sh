#!/bin/bash
# Runs the whole ufo-nova test suite on a fresh Debian 12 machine.
#
# It installs what it needs (tools/install-deps.sh: system packages listed
# in bindep.txt, profile "test", tox and bindep into a bootstrap
# virtualenv), Python packages into tox envs. It ends with one summary
# line "N passed, N failed, N skipped".
#
# Usage: tools/run-tests.sh [tox env list]   (default: every env CI runs)
set -euo pipefail

TOP=$(cd "$(dirname "$0")/.." && pwd)
cd "$TOP"
ENVS=${1:-pep8,py3,functional,nova-functional,ansible,genconfig,docs,releasenotes}
TOOLS_VENV=${UFO_TOOLS_VENV:-$TOP/.venv-tools}

"$TOP/tools/install-deps.sh"

# The tox envs. Each pytest run leaves a JUnit report for the summary.
rm -f .tox/*/junit.xml
rc=0
"$TOOLS_VENV/bin/tox" -e "$ENVS" || rc=$?

# One closing line over every JUnit report that this run wrote.
python3 - "$TOP/.tox" <<'PY' || true
import glob
import sys
import xml.etree.ElementTree as ET

tests = failed = skipped = 0
failures = []
for path in sorted(glob.glob(sys.argv[1] + '/*/junit.xml')):
    root = ET.parse(path).getroot()
    for suite in root.iter('testsuite'):
        tests += int(suite.get('tests', 0))
        failed += int(suite.get('failures', 0)) + int(suite.get('errors', 0))
        skipped += int(suite.get('skipped', 0))
    # Name each failure here too: CI logs are often read from the tail.
    for case in root.iter('testcase'):
        for bad in list(case.findall('failure')) + list(case.findall('error')):
            message = (bad.get('message') or '').strip().splitlines()
            failures.append('FAILED %s::%s: %s' % (
                case.get('classname'), case.get('name'),
                message[0][:300] if message else ''))
for line in failures:
    print(line)
print('%d passed, %d failed, %d skipped'
      % (tests - failed - skipped, failed, skipped))
PY
exit $rc
