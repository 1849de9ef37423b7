#!/bin/bash
# devstack plugin of ufo-nova: UFO core management for Nova/libvirt.
#
#   enable_plugin ufo-nova <git URL of ufo-nova> [<branch>]
#
# stack install     install ufo-nova: the base install (scheduler plugins);
#                   with its agent extra (libvirt-python) where ufo-agent
#                   runs
# stack post-config nova.conf: UFOFilter, UFOIdlePoolWeigher, [ufo];
#                   /etc/ufo/ufo-agent.conf on compute nodes
# stack extra       start ufo-agent on compute nodes; RabbitMQ queue
#                   expiry; a flavor that forbids overloaded hosts
# unstack           stop ufo-agent
# clean             remove /etc/ufo

# Save trace setting
_XTRACE_UFO_NOVA=$(set +o | grep xtrace)
set -o xtrace

UFO_FILTER=UFOFilter
UFO_FILTER_CLASS=ufo_nova.filter.UFOFilter
UFO_WEIGHER_CLASS=ufo_nova.weigher.UFOIdlePoolWeigher

# The base install is what nova-scheduler needs; compute nodes that run
# ufo-agent add the agent extra (libvirt-python).
function install_ufo_nova {
    if is_service_enabled n-cpu && is_service_enabled ufo-agent; then
        setup_develop "$UFO_NOVA_DIR" agent
    else
        setup_develop "$UFO_NOVA_DIR"
    fi
}

# Add UFOFilter and UFOIdlePoolWeigher to nova.conf, keeping what devstack
# and other plugins configured.
function configure_nova_scheduler_for_ufo {
    local filters
    filters=$(iniget "$NOVA_CONF" filter_scheduler enabled_filters)
    if [[ -z "$filters" ]]; then
        filters=$FILTERS
    fi
    if [[ ",$filters," != *",$UFO_FILTER,"* ]]; then
        filters="${filters:+$filters,}$UFO_FILTER"
    fi
    iniset "$NOVA_CONF" filter_scheduler enabled_filters "$filters"
    iniset_multiline "$NOVA_CONF" filter_scheduler available_filters \
        nova.scheduler.filters.all_filters "$UFO_FILTER_CLASS"
    iniset_multiline "$NOVA_CONF" filter_scheduler weight_classes \
        nova.scheduler.weights.all_weighers "$UFO_WEIGHER_CLASS"

    iniset "$NOVA_CONF" ufo unknown_host_policy "$UFO_UNKNOWN_HOST_POLICY"
    iniset "$NOVA_CONF" ufo expected_demand_fraction \
        "$UFO_EXPECTED_DEMAND_FRACTION"
    iniset "$NOVA_CONF" ufo idle_pool_weight_multiplier \
        "$UFO_IDLE_POOL_WEIGHT_MULTIPLIER"
    iniset "$NOVA_CONF" ufo signal_max_age "$UFO_SIGNAL_MAX_AGE"
    iniset "$NOVA_CONF" ufo notification_topics "$UFO_NOTIFICATION_TOPIC"
}

# ufo-agent.conf of a compute node: who we are, where signals go.
function configure_ufo_agent {
    sudo install -d -o "$STACK_USER" "$UFO_CONF_DIR"
    rm -f "$UFO_AGENT_CONF"
    iniset "$UFO_AGENT_CONF" DEFAULT debug "$ENABLE_DEBUG_LOG_LEVEL"
    # nova-compute runs with --config-file $NOVA_CPU_CONF: the agent manages
    # its [compute] cpu_shared_set, unless UFO_MANAGED_CPUS says otherwise.
    iniset "$UFO_AGENT_CONF" host_cpus nova_config "$NOVA_CPU_CONF"
    if [[ -n "$UFO_MANAGED_CPUS" ]]; then
        iniset "$UFO_AGENT_CONF" host_cpus managed_cpus "$UFO_MANAGED_CPUS"
    fi
    iniset "$UFO_AGENT_CONF" publishers enabled "$UFO_PUBLISHERS"
    iniset "$UFO_AGENT_CONF" publishers host "$(hostname)"
    iniset "$UFO_AGENT_CONF" publishers nodename "$(hostname)"
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
# delete the queues of workers that are gone.
function configure_rabbitmq_for_ufo {
    sudo rabbitmqctl set_policy --apply-to queues ufo-scheduler-expiry \
        '^ufo-nova-scheduler\.' \
        "{\"expires\": $UFO_LISTENER_QUEUE_EXPIRES_MS}"
}

function create_ufo_flavor {
    if ! openstack flavor show "$UFO_FLAVOR_NAME" > /dev/null 2>&1; then
        openstack flavor create --vcpus 2 --ram 1024 --disk 10 \
            --property trait:CUSTOM_UFO_OVERLOADED=forbidden \
            "$UFO_FLAVOR_NAME"
    fi
}

function start_ufo_agent {
    local agent
    agent=$(get_python_exec_prefix)/ufo-agent
    if [[ ! -x "$agent" ]]; then
        die $LINENO "ufo-agent is not installed as $agent"
    fi
    run_process ufo-agent "$agent --config-file $UFO_AGENT_CONF" root root
}

function stop_ufo_agent {
    stop_process ufo-agent
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
        echo_summary "Configuring ufo-agent"
        configure_ufo_agent
    fi

elif [[ "$1" == "stack" && "$2" == "extra" ]]; then
    if is_service_enabled rabbit; then
        configure_rabbitmq_for_ufo
    fi
    if is_service_enabled n-api && [[ "$UFO_CREATE_FLAVOR" == "True" ]]; then
        create_ufo_flavor
    fi
    if is_service_enabled n-cpu && is_service_enabled ufo-agent; then
        echo_summary "Starting ufo-agent"
        start_ufo_agent
    fi
fi

if [[ "$1" == "unstack" ]]; then
    if is_service_enabled ufo-agent; then
        stop_ufo_agent
    fi
fi

if [[ "$1" == "clean" ]]; then
    sudo rm -rf "$UFO_CONF_DIR"
fi

# Restore xtrace
$_XTRACE_UFO_NOVA
