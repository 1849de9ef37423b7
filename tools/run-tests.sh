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
ENVS=${1:-pep8,py3,sim,cluster,functional,nova-functional,ansible,genconfig,docs,releasenotes}
TOOLS_VENV=${UFO_TOOLS_VENV:-$TOP/.venv-tools}

"$TOP/tools/install-deps.sh"

# The tox envs. Each pytest run leaves a JUnit report for the summary.
rm -f .tox/*/junit.xml
rc=0
reports=("$TOP/.tox")

# The real-guest suite (functional) runs on its own at normal priority:
# its tests time their guests. It leaves about one CPU idle while it
# waits on them, so on a clean tree (CI's) the other envs run beside it,
# from a worktree of HEAD (two tox runs must not build the package in one
# source tree): first the in-process Nova suite, niced but with a share
# of its own, since Nova's functional helpers poll with time limits; then
# the envs that time nothing (static checks, the simulator's tests on
# simulated time) at idle CPU and I/O priority, where they never take a
# CPU a guest wants.
BESIDE=nova-functional
UNTIMED=sim,cluster,pep8,ansible,genconfig,docs,releasenotes
if [ $# -eq 0 ] && [ -z "$(git status --porcelain 2>/dev/null)" ] &&
        git rev-parse --verify -q HEAD > /dev/null; then
    side=$(mktemp -d /tmp/ufo-static.XXXXXX)
    trap 'git worktree remove --force "$side/tree" 2> /dev/null;
          rm -rf "$side"' EXIT
    git worktree add --quiet --detach "$side/tree" HEAD
    ( cd "$side/tree"
      side_rc=0
      nice -n 5 "$TOOLS_VENV/bin/tox" -e "$BESIDE" || side_rc=$?
      chrt --idle 0 ionice -c 3 "$TOOLS_VENV/bin/tox" -e "$UNTIMED" ||
          side_rc=$?
      exit $side_rc ) > "$side/log" 2>&1 &
    side_pid=$!
    reports+=("$side/tree/.tox")
    ENVS=py3,functional
fi
"$TOOLS_VENV/bin/tox" -e "$ENVS" || rc=$?
if [ -n "${side_pid:-}" ]; then
    side_rc=0
    wait "$side_pid" || side_rc=$?
    echo "=== $BESIDE, $UNTIMED (run beside functional)"
    cat "$side/log"
    [ "$side_rc" -eq 0 ] || rc=$side_rc
fi

# One closing line over every JUnit report that this run wrote.
python3 - "${reports[@]}" <<'PY' || true
import glob
import sys
import xml.etree.ElementTree as ET


def summary(bad):
    # The reports of stestr runs carry no message: take the exception
    # from the traceback, with what follows it on one line.
    message = (bad.get('message') or '').strip()
    if message:
        return message.splitlines()[0][:300]
    lines = (bad.text or '').splitlines()
    frames = [i for i, line in enumerate(lines) if line.startswith('  File ')]
    rest = lines[frames[-1] + 1:] if frames else lines
    # The exception's lines, not the frame's indented source lines.
    return ' | '.join(line for line in rest
                      if line and not line.startswith(' '))[:300]


tests = failed = skipped = 0
failures = []
for path in sorted(p for top in sys.argv[1:]
                   for p in glob.glob(top + '/*/junit.xml')):
    root = ET.parse(path).getroot()
    for suite in root.iter('testsuite'):
        tests += int(suite.get('tests', 0))
        failed += int(suite.get('failures', 0)) + int(suite.get('errors', 0))
        skipped += int(suite.get('skipped', 0))
    # Name each failure here too: CI logs are often read from the tail.
    for case in root.iter('testcase'):
        for bad in list(case.findall('failure')) + list(case.findall('error')):
            failures.append('FAILED %s::%s: %s' % (
                case.get('classname'), case.get('name'), summary(bad)))
for line in failures:
    print(line)
print('%d passed, %d failed, %d skipped'
      % (tests - failed - skipped, failed, skipped))
PY
exit $rc
