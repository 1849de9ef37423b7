#!/bin/bash
# What devstack provides to a plugin's phases, for running devstack/plugin.sh
# against a scratch directory (ufo_nova/tests/nova_unit/test_devstack.py).
#
# Source it with, in the environment: UFO_NOVA_DIR (the checkout), SCRATCH
# (stands in for /etc, $DEST and $DATA_DIR), ENABLED_SERVICES, PYTHON (to
# run ini.py) and CALLS (a file that records the commands that would start,
# stop or change things outside the scratch directory). FAKE_OS=fedora
# makes it a RHEL-family host (default: Ubuntu).
set -o errexit
set -o nounset

_FAKE_DEVSTACK_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

# devstack's inc/ini-config, as ini.py re-implements it.
for _fn in iniset iniget iniget_multiline iniset_multiline iniadd \
    inidelete ini_has_option; do
    eval "function $_fn { \"\$PYTHON\" \"\$_FAKE_DEVSTACK_DIR/ini.py\" \
        $_fn \"\$@\"; }"
done

# functions-common, as far as the plugin uses it.
function is_service_enabled {
    local service
    for service in "$@"; do
        [[ ",$ENABLED_SERVICES," == *",$service,"* ]] && return 0
    done
    return 1
}
function enable_service {
    is_service_enabled "$1" || ENABLED_SERVICES="$ENABLED_SERVICES,$1"
}
function trueorfalse {
    local default=$1 value=${!2:-$1}
    case "${value,,}" in
        1|yes|true|on) echo True ;;
        0|no|false|off) echo False ;;
        *) echo "$default" ;;
    esac
}
function die {
    shift
    echo "die: $*" >&2
    exit 1
}
function echo_summary {
    echo "summary: $*"
}
function is_fedora {
    [[ "${FAKE_OS:-ubuntu}" == fedora ]]
}
function add_user_to_group {
    _record add_user_to_group "$@"
}
function get_python_exec_prefix {
    echo "$SCRATCH/bin"
}
function get_notification_url {
    echo "rabbit://stackrabbit:secret@192.0.2.10:5672/"
}
function _record {
    echo "$*" >> "$CALLS"
}
function run_process {
    _record run_process "$@"
}
function stop_process {
    _record stop_process "$@"
}
function setup_develop {
    _record setup_develop "$@"
}
function pip_install_gr {
    _record pip_install_gr "$@"
}
# sudo runs the command as the caller: everything it touches is scratch.
# "sudo -u USER" is recorded, then runs as the caller too.
function sudo {
    if [[ "$1" == -u ]]; then
        _record sudo "$@"
        shift 2
    fi
    "$@"
}
# Users: useradd writes $SCRATCH/passwd, getent passwd reads it. Changing
# a file's owner is recorded, not done.
function useradd {
    _record useradd "$@"
    echo "${!#}:x:999:999::/nonexistent:/usr/sbin/nologin" \
        >> "$SCRATCH/passwd"
}
function getent {
    [[ "$1" == passwd ]] && grep "^$2:" "$SCRATCH/passwd" 2> /dev/null
}
function chown {
    _record chown "$@"
}
function chgrp {
    _record chgrp "$@"
}
function rabbitmqctl {
    _record rabbitmqctl "$@"
}
function openstack {
    _record openstack "$@"
    # "flavor show" finds no flavor.
    [[ "$1 $2" != "flavor show" ]]
}

# stackrc and lib/nova's variables.
DEST=$SCRATCH/opt/stack
DATA_DIR=$DEST/data
STACK_USER=$(id -un)
ENABLE_DEBUG_LOG_LEVEL=True
KEYSTONE_SERVICE_URI=http://192.0.2.10/identity
SERVICE_PASSWORD=secret
SERVICE_DOMAIN_NAME=Default
SERVICE_PROJECT_NAME=service
REGION_NAME=RegionOne
if is_fedora; then LIBVIRT_GROUP=libvirtd; else LIBVIRT_GROUP=libvirt; fi
NOVA_CONF_DIR=$SCRATCH/etc/nova
NOVA_CONF=$NOVA_CONF_DIR/nova.conf
NOVA_CPU_CONF=$NOVA_CONF_DIR/nova-cpu.conf
NOVA_FILTERS="ComputeFilter,ComputeCapabilitiesFilter,ImagePropertiesFilter"
NOVA_FILTERS+=",ServerGroupAntiAffinityFilter,ServerGroupAffinityFilter"
NOVA_FILTERS+=",SameHostFilter,DifferentHostFilter"
UFO_CONF_DIR=$SCRATCH/etc/ufo
UFO_LOCK_DIR=$SCRATCH/run/ufo-agent
UFO_POLKIT_RULES_DIR=$SCRATCH/etc/polkit-1/rules.d
mkdir -p "$NOVA_CONF_DIR" "$DATA_DIR" "$SCRATCH/bin"

# lib/nova's create_nova_conf, as far as the scheduler options go: run
# before the plugins' post-config phase.
function create_nova_conf {
    rm -f "$NOVA_CONF"
    iniset "$NOVA_CONF" DEFAULT debug "$ENABLE_DEBUG_LOG_LEVEL"
    iniset "$NOVA_CONF" filter_scheduler enabled_filters "$NOVA_FILTERS"
    iniset "$NOVA_CONF" scheduler workers 2
}

# lib/nova's start_nova_compute: nova-cpu.conf is a copy of nova.conf made
# after the post-config phase.
function start_nova_compute {
    cp "$NOVA_CONF" "$NOVA_CPU_CONF"
    run_process n-cpu "nova-compute --config-file $NOVA_CPU_CONF"
}

# What stack.sh, unstack.sh and clean.sh do for each phase of a plugin.
function run_plugin_phase {
    source "$UFO_NOVA_DIR/devstack/plugin.sh" "$@"
}

source "$UFO_NOVA_DIR/devstack/settings"
