#!/bin/bash
# devstack plugin of ufo-nova: UFO core management for Nova/libvirt.
#
#   enable_plugin ufo-nova <git URL of ufo-nova> [<branch>]
#
# stack install     install ufo-nova: the base install (scheduler plugins);
#                   with its agent extra (libvirt-python) where ufo-agent
#                   runs
# stack post-config nova.conf: UFOFilter and UFOIdlePoolWeigher added to
#                   Nova's lists, [ufo]; on compute nodes [compute]
#                   cpu_shared_set (nova-cpu.conf is copied from nova.conf
#                   later) and /etc/ufo/ufo-agent.conf
# stack extra       start ufo-agent on compute nodes, as its own user
#                   (UFO_AGENT_USER); RabbitMQ queue expiry; the trait
#                   CUSTOM_UFO_OVERLOADED and a flavor that forbids it
# unstack           stop ufo-agent, give every guest its pins back
# clean             remove /etc/ufo, the agent's state and its guest
#                   channel pages

# Save trace setting
_XTRACE_UFO_NOVA=$(set +o | grep xtrace)
set -o xtrace

UFO_FILTER=UFOFilter
UFO_FILTER_CLASS=ufo_nova.filter.UFOFilter
UFO_WEIGHER_CLASS=ufo_nova.weigher.UFOIdlePoolWeigher
# Nova's defaults of [filter_scheduler] available_filters and weight_classes.
NOVA_ALL_FILTERS=nova.scheduler.filters.all_filters
NOVA_ALL_WEIGHERS=nova.scheduler.weights.all_weighers
# Nodes with fewer CPUs give every CPU to guests (see
# ufo_default_cpu_shared_set).
UFO_SPARE_CORE_MIN_CPUS=8

# The base install is what nova-scheduler needs; compute nodes that run
# ufo-agent add the agent extra (libvirt-python).
function install_ufo_nova {
    if is_service_enabled n-cpu && is_service_enabled ufo-agent; then
        setup_develop "$UFO_NOVA_DIR" agent
    else
        setup_develop "$UFO_NOVA_DIR"
    fi
}

# "a,b , c" holds "b"?
function ufo_list_has {
    local list=",${1// /},"
    [[ "$list" == *",$2,"* ]]
}

# Add UFOFilter and UFOIdlePoolWeigher to nova.conf, keeping what Nova,
# devstack and other plugins configured.
function configure_nova_scheduler_for_ufo {
    local filters weighers
    # enabled_filters (a list): lib/nova writes NOVA_FILTERS.
    filters=$(iniget "$NOVA_CONF" filter_scheduler enabled_filters)
    filters=${filters:-$NOVA_FILTERS}
    if [[ -z "$filters" ]]; then
        die $LINENO "[filter_scheduler] enabled_filters is not set in" \
            "$NOVA_CONF and NOVA_FILTERS is empty: UFOFilter would be" \
            "the only filter"
    fi
    if ! ufo_list_has "$filters" "$UFO_FILTER"; then
        iniset "$NOVA_CONF" filter_scheduler enabled_filters \
            "$filters,$UFO_FILTER"
    fi
    # available_filters is multi-valued, one line a value. Nova's default
    # (all_filters) holds only while no line is set, so it is written
    # before ours; lines of other plugins stay.
    if [[ -z "$(iniget_multiline "$NOVA_CONF" filter_scheduler \
        available_filters)" ]]; then
        iniadd "$NOVA_CONF" filter_scheduler available_filters \
            "$NOVA_ALL_FILTERS"
    fi
    if ! ufo_list_has "$(iniget_multiline "$NOVA_CONF" filter_scheduler \
        available_filters | tr ' ' ',')" "$UFO_FILTER_CLASS"; then
        iniadd "$NOVA_CONF" filter_scheduler available_filters \
            "$UFO_FILTER_CLASS"
    fi
    # weight_classes is one list on one line: a second line would replace
    # the first, and Nova's weighers would be gone.
    weighers=$(iniget "$NOVA_CONF" filter_scheduler weight_classes)
    weighers=${weighers:-$NOVA_ALL_WEIGHERS}
    if ! ufo_list_has "$weighers" "$UFO_WEIGHER_CLASS"; then
        iniset "$NOVA_CONF" filter_scheduler weight_classes \
            "$weighers,$UFO_WEIGHER_CLASS"
    fi

    iniset "$NOVA_CONF" ufo unknown_host_policy "$UFO_UNKNOWN_HOST_POLICY"
    iniset "$NOVA_CONF" ufo expected_demand_fraction \
        "$UFO_EXPECTED_DEMAND_FRACTION"
    iniset "$NOVA_CONF" ufo idle_pool_weight_multiplier \
        "$UFO_IDLE_POOL_WEIGHT_MULTIPLIER"
    iniset "$NOVA_CONF" ufo signal_max_age "$UFO_SIGNAL_MAX_AGE"
    iniset "$NOVA_CONF" ufo notification_topics "$UFO_NOTIFICATION_TOPIC"
}

# Number of CPUs in a cpuset list such as "0-3,8".
function ufo_count_cpus {
    local part count=0
    for part in ${1//,/ }; do
        if [[ "$part" == *-* ]]; then
            count=$((count + ${part#*-} - ${part%-*} + 1))
        else
            count=$((count + 1))
        fi
    done
    echo $count
}

# The default [compute] cpu_shared_set of a devstack compute node: every
# online CPU, but the physical core of CPU 0 on nodes with at least
# UFO_SPARE_CORE_MIN_CPUS CPUs, which then stays with devstack's own
# services (ufo-agent needs at least two whole cores to manage).
function ufo_default_cpu_shared_set {
    # Tests point UFO_SYSFS_CPU_DIR at a made-up sysfs.
    local sysfs=${UFO_SYSFS_CPU_DIR:-/sys/devices/system/cpu}
    local online siblings
    online=$(cat "$sysfs/online")
    if (( $(ufo_count_cpus "$online") < UFO_SPARE_CORE_MIN_CPUS )); then
        echo "$online"
        return
    fi
    siblings=$(cat "$sysfs/cpu0/topology/thread_siblings_list")
    # Nova's syntax: "^N" and "^N-M" exclude.
    echo "$online,^${siblings//,/,^}"
}

# ufo-agent manages Nova's [compute] cpu_shared_set, which devstack leaves
# unset. nova-compute reads nova-cpu.conf, a copy of nova.conf that
# lib/nova makes after this phase (then merging local.conf's
# [[post-config|$NOVA_CPU_CONF]]), so the value goes into nova.conf.
function configure_nova_compute_for_ufo {
    local shared
    if [[ -n "$(iniget "$NOVA_CONF" compute cpu_shared_set)" ]]; then
        return
    fi
    case "$UFO_CPU_SHARED_SET" in
        none) return ;;
        auto) shared=$(ufo_default_cpu_shared_set) ;;
        *) shared=$UFO_CPU_SHARED_SET ;;
    esac
    iniset "$NOVA_CONF" compute cpu_shared_set "$shared"
}

# ufo-agent.conf of a compute node: whose CPUs, where signals go.
function configure_ufo_agent {
    sudo install -d -o "$STACK_USER" "$UFO_CONF_DIR"
    rm -f "$UFO_AGENT_CONF"
    iniset "$UFO_AGENT_CONF" DEFAULT debug "$ENABLE_DEBUG_LOG_LEVEL"
    iniset "$UFO_AGENT_CONF" agent state_path "$UFO_STATE_PATH"
    # devstack's nova-compute runs with --config-file $NOVA_CPU_CONF and
    # nothing else: the agent manages its [compute] cpu_shared_set, unless
    # UFO_MANAGED_CPUS says otherwise.
    iniset "$UFO_AGENT_CONF" host_cpus nova_config "$NOVA_CPU_CONF"
    iniset "$UFO_AGENT_CONF" host_cpus nova_config_dir ""
    iniset "$UFO_AGENT_CONF" channel qemu_user "$UFO_QEMU_USER"
    iniset "$UFO_AGENT_CONF" channel qemu_group "$UFO_QEMU_GROUP"
    if [[ -n "$UFO_MANAGED_CPUS" ]]; then
        iniset "$UFO_AGENT_CONF" host_cpus managed_cpus "$UFO_MANAGED_CPUS"
    fi
    iniset "$UFO_AGENT_CONF" publishers enabled "$UFO_PUBLISHERS"
    # [publishers] host and nodename are left to the agent: it reads
    # nova-compute's [DEFAULT] host from nova-cpu.conf as it is when the
    # agent starts (local.conf's post-config sections are merged after
    # this phase), and asks libvirt for the node name as Nova's libvirt
    # driver does.
    iniset "$UFO_AGENT_CONF" publishers notification_topics \
        "$UFO_NOTIFICATION_TOPIC"
    iniset "$UFO_AGENT_CONF" oslo_messaging_notifications transport_url \
        "$(get_notification_url)"
    # The placement publisher uses nova's service credentials.
    iniset "$UFO_AGENT_CONF" placement auth_type password
    iniset "$UFO_AGENT_CONF" placement auth_url "$KEYSTONE_SERVICE_URI"
    iniset "$UFO_AGENT_CONF" placement username nova
    iniset "$UFO_AGENT_CONF" placement password "$SERVICE_PASSWORD"
    iniset "$UFO_AGENT_CONF" placement user_domain_name \
        "$SERVICE_DOMAIN_NAME"
    iniset "$UFO_AGENT_CONF" placement project_name "$SERVICE_PROJECT_NAME"
    iniset "$UFO_AGENT_CONF" placement project_domain_name \
        "$SERVICE_DOMAIN_NAME"
    iniset "$UFO_AGENT_CONF" placement region_name "$REGION_NAME"
}

# Every nova-scheduler worker listens in a queue of its own; let RabbitMQ
# delete the queues of workers that are gone. Publishing also declares the
# topic's own queue, which nothing reads: bound it.
function configure_rabbitmq_for_ufo {
    sudo rabbitmqctl set_policy --apply-to queues ufo-scheduler-expiry \
        '^ufo-nova-scheduler\.' \
        "{\"expires\": $UFO_LISTENER_QUEUE_EXPIRES_MS}"
    sudo rabbitmqctl set_policy --apply-to queues ufo-notifications-bound \
        '^ufo_notifications\.' '{"max-length": 1000}'
}

# Placement refuses every request that names an unknown trait, forbidden
# ones included ("400 No such trait(s)"): without the trait, a flavor that
# forbids it boots nowhere until a host has once been overloaded. Creating
# an existing trait changes nothing. osc-placement (the trait command) is
# installed where placement-api is.
function create_ufo_trait {
    if ! is_service_enabled placement-api; then
        pip_install_gr osc-placement
    fi
    openstack --os-placement-api-version 1.6 trait create \
        CUSTOM_UFO_OVERLOADED
}

function create_ufo_flavor {
    if ! openstack flavor show "$UFO_FLAVOR_NAME" > /dev/null 2>&1; then
        openstack flavor create --vcpus 2 --ram 1024 --disk 10 \
            --property trait:CUSTOM_UFO_OVERLOADED=forbidden \
            "$UFO_FLAVOR_NAME"
    fi
}

# The agent's own system user, as ufo-agent-sysusers.conf makes it: in
# libvirt's group (qemu:///system) and QEMU's (the channel pages it creates
# in /dev/shm get that group, so that QEMU can map them).
function create_ufo_agent_user {
    local group
    if ! getent passwd "$UFO_AGENT_USER" > /dev/null; then
        sudo useradd --system --user-group --no-create-home \
            --home-dir "$UFO_STATE_PATH" --shell /usr/sbin/nologin \
            --comment "UFO core management agent" "$UFO_AGENT_USER"
    fi
    for group in "${LIBVIRT_GROUP:-libvirt}" "$UFO_QEMU_GROUP"; do
        add_user_to_group "$UFO_AGENT_USER" "$group"
    done
}

# On Fedora-family hosts libvirt asks polkit, and devstack's rule admits
# $STACK_USER by name only, not libvirt's group: admit the agent's user
# by name too.
function allow_ufo_agent_in_polkit {
    if ! is_fedora; then
        return
    fi
    sudo install -d -m 0755 "$UFO_POLKIT_RULES_DIR"
    sudo tee "$UFO_POLKIT_RULES_DIR/50-libvirt-$UFO_AGENT_USER.rules" \
        > /dev/null <<EOF
polkit.addRule(function(action, subject) {
    if (action.id == 'org.libvirt.unix.manage' &&
        subject.user == '$UFO_AGENT_USER') {
        return polkit.Result.YES;
    }
});
EOF
}

# What the agent's user needs: its state directory (learned state) and the
# directory of the host-wide single-instance lock, its own alone and
# writable also after a root agent; ufo-agent.conf, which holds the
# Placement password, readable by it but not by everybody.
function prepare_ufo_agent_files {
    sudo install -d -m 0700 "$UFO_STATE_PATH"
    sudo chown -R "$UFO_AGENT_USER:$UFO_AGENT_USER" "$UFO_STATE_PATH"
    sudo install -d -m 0700 "$UFO_LOCK_DIR"
    sudo chown "$UFO_AGENT_USER:$UFO_AGENT_USER" "$UFO_LOCK_DIR"
    sudo chgrp "$UFO_AGENT_USER" "$UFO_AGENT_CONF"
    sudo chmod 0640 "$UFO_AGENT_CONF"
}

function start_ufo_agent {
    local agent
    agent=$(get_python_exec_prefix)/ufo-agent
    if [[ ! -x "$agent" ]]; then
        die $LINENO "ufo-agent is not installed as $agent"
    fi
    create_ufo_agent_user
    allow_ufo_agent_in_polkit
    prepare_ufo_agent_files
    # Not root: the unit's User= and Group=; systemd adds the user's other
    # groups (libvirt's, QEMU's).
    run_process ufo-agent "$agent --config-file $UFO_AGENT_CONF" \
        "$UFO_AGENT_USER" "$UFO_AGENT_USER"
}

# Stopping the agent gives every guest its pins back and clears the trait;
# --restore does it again in case the agent had died.
function stop_ufo_agent {
    local agent as_user
    stop_process ufo-agent
    agent=$(get_python_exec_prefix)/ufo-agent
    if [[ -x "$agent" && -r "$UFO_AGENT_CONF" ]]; then
        # As the agent's user, as the packaged unit's ExecStopPost; root
        # where there is none yet (an agent of an older plugin, as root).
        if getent passwd "$UFO_AGENT_USER" > /dev/null; then
            as_user=(-u "$UFO_AGENT_USER")
        else
            as_user=()
        fi
        sudo "${as_user[@]}" "$agent" --config-file "$UFO_AGENT_CONF" \
            --restore || \
            echo "WARNING: ufo-agent --restore failed; see its log above"
    fi
}

# The agent's state and the guest channel pages (/dev/shm/ufo-<uuid>,
# [channel] shm_dir and name_prefix): libvirt never removes them, and
# unstack has destroyed the guests.
function cleanup_ufo {
    local shm_dir prefix
    if [[ -r "$UFO_AGENT_CONF" ]]; then
        shm_dir=$(iniget "$UFO_AGENT_CONF" channel shm_dir)
        prefix=$(iniget "$UFO_AGENT_CONF" channel name_prefix)
    fi
    shm_dir=${shm_dir:-/dev/shm}
    prefix=${prefix:-ufo-}
    sudo rm -f "$shm_dir/$prefix"????????-????-????-????-????????????
    sudo rm -rf "$UFO_STATE_PATH" "$UFO_CONF_DIR"
    sudo rm -f "$UFO_POLKIT_RULES_DIR/50-libvirt-$UFO_AGENT_USER.rules"
}

if [[ "$1" == "stack" && "$2" == "install" ]]; then
    echo_summary "Installing ufo-nova"
    install_ufo_nova

elif [[ "$1" == "stack" && "$2" == "post-config" ]]; then
    if is_service_enabled n-sch; then
        echo_summary "Configuring nova-scheduler for UFO"
        configure_nova_scheduler_for_ufo
    fi
    if is_service_enabled n-cpu && is_service_enabled ufo-agent; then
        echo_summary "Configuring nova-compute and ufo-agent"
        configure_nova_compute_for_ufo
        configure_ufo_agent
    fi

elif [[ "$1" == "stack" && "$2" == "extra" ]]; then
    if is_service_enabled rabbit; then
        configure_rabbitmq_for_ufo
    fi
    if is_service_enabled n-api; then
        # The trait before any flavor that names it.
        create_ufo_trait
        if [[ "$UFO_CREATE_FLAVOR" == "True" ]]; then
            create_ufo_flavor
        fi
    fi
    if is_service_enabled n-cpu && is_service_enabled ufo-agent; then
        echo_summary "Starting ufo-agent"
        start_ufo_agent
    fi
fi

if [[ "$1" == "unstack" ]]; then
    if is_service_enabled n-cpu && is_service_enabled ufo-agent; then
        stop_ufo_agent
    fi
fi

if [[ "$1" == "clean" ]]; then
    cleanup_ufo
fi

# Restore xtrace
$_XTRACE_UFO_NOVA
