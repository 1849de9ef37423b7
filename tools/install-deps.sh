#!/bin/bash
# Installs what ufo-nova's tests and demo need on Debian 12: the system
# packages of bindep.txt (profile "test") and a bootstrap virtualenv with
# tox, tox-uv and bindep ($UFO_TOOLS_VENV, default .venv-tools). tox-uv
# makes tox build its envs with uv: the same packages as pip resolves,
# installed in seconds instead of minutes (about 3 minutes of every CI run).
#
# Usage: tools/install-deps.sh
set -euo pipefail

TOP=$(cd "$(dirname "$0")/.." && pwd)
cd "$TOP"
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
if [ ! -x "$TOOLS_VENV/bin/tox" ] || [ ! -x "$TOOLS_VENV/bin/bindep" ] ||
        [ ! -x "$TOOLS_VENV/bin/uv" ]; then
    python3 -m venv "$TOOLS_VENV"
    "$TOOLS_VENV/bin/pip" install -q --upgrade pip
    "$TOOLS_VENV/bin/pip" install -q 'tox>=4.0' tox-uv bindep
fi

# 2. System packages (bindep exits 1 when something is missing).
missing=$("$TOOLS_VENV/bin/bindep" -b test || true)
if [ -n "$missing" ]; then
    echo "Installing system packages: $missing"
    # shellcheck disable=SC2086
    apt_install $missing
fi
