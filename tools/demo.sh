#!/bin/bash
# The README's main job on a fresh Debian 12 machine: installs what it
# needs (tools/install-deps.sh, then ufo-nova with its agent, plot and sim
# extras into .venv-demo), then runs ufo-demo: a latency-critical guest
# beside a best-effort and an idle one, the same load phases without
# ufo-agent (Nova's pins) and with it, with a live view; both runs'
# summaries side by side and a plot at the end (and the simulator's answer
# for the same scenario when this machine shows no difference).
#
# Usage: tools/demo.sh [ufo-demo options]   (ufo-demo --help)
set -euo pipefail

TOP=$(cd "$(dirname "$0")/.." && pwd)
cd "$TOP"
VENV=${UFO_DEMO_VENV:-$TOP/.venv-demo}

SUDO=""
if [ "$(id -u)" != 0 ]; then
    SUDO=sudo
fi

"$TOP/tools/install-deps.sh"
if [ ! -x "$VENV/bin/ufo-demo" ]; then
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install -q --upgrade pip
fi
# Cheap when nothing changed; picks up a new checkout otherwise.
"$VENV/bin/pip" install -q -e "$TOP[agent,plot,sim]"
exec $SUDO "$VENV/bin/ufo-demo" "$@"
