"""Options of the publishers that carry the host signal out of ufo-agent.

Publishers are stevedore plugins of the ``ufo_agent.publishers`` namespace:

``notification``
    oslo.messaging notifications (event type ``ufo.host.signal``), read by
    ufo_nova's signal cache inside nova-scheduler.
``placement``
    The CUSTOM_UFO_OVERLOADED trait on the host's compute-node resource
    provider. Its keystoneauth1 options live in the ``[placement]`` group.
"""

from keystoneauth1 import loading as ks_loading
from oslo_config import cfg

GROUP = cfg.OptGroup(
    'publishers',
    title='Host signal publishers',
    help='Where ufo-agent publishes the host signal.')

OPTS = [
    cfg.ListOpt(
        'enabled', default=['notification'],
        help='Publishers to load, by entry-point name in the '
             'ufo_agent.publishers namespace: notification, placement.'),
    cfg.StrOpt(
        'host',
        help='Compute service host name the signal describes, the name '
             'nova-scheduler knows this compute node by. Unset (the '
             'recommended setting): nova-compute\'s own [DEFAULT] host, '
             'read from [host_cpus] nova_config and nova_config_dir as '
             'nova-compute reads them, else Nova\'s default, the '
             'hostname. Set, it wins, and ufo-agent warns at start when '
             'it differs from the host name found in Nova\'s '
             'configuration.'),
    cfg.StrOpt(
        'nodename',
        help='Name of this host\'s compute node (its hypervisor hostname, '
             'the name of its Placement resource provider). Defaults to '
             'the host name that libvirt ([agent] libvirt_uri) reports, '
             'which is the name Nova\'s libvirt driver gives the compute '
             'node; it can differ from the hostname (libvirt may report '
             'the fully qualified name).'),
    cfg.FloatOpt(
        'keepalive_interval', default=30.0, min=1.0,
        help='Seconds after which the notification publisher sends the '
             'signal again even if nothing changed. Keep nova-scheduler\'s '
             '[ufo] signal_max_age a few times larger.'),
    cfg.FloatOpt(
        'min_interval', default=5.0, min=0.0,
        help='Least seconds between two notifications whose state is the '
             'same (only core counts changed). A change of state is always '
             'sent at once.'),
    cfg.ListOpt(
        'notification_topics', default=['ufo_notifications'],
        help='oslo.messaging topics of the host signal notifications; '
             'nova-scheduler\'s [ufo] notification_topics must match. The '
             'transport is [oslo_messaging_notifications] transport_url, '
             'else [DEFAULT] transport_url.'),
    cfg.StrOpt(
        'notification_driver', default='messagingv2',
        help='oslo.messaging notification driver of the host signal.'),
    cfg.IntOpt(
        'notification_retry', default=3, min=-1,
        help='Connection retries of one notification before it is dropped '
             '(-1: forever). Dropped signals are sent again at the next '
             'change or keep-alive; a bounded value keeps a broker outage '
             'from stalling the agent.'),
    cfg.FloatOpt(
        'placement_retry_interval', default=10.0, min=0.0,
        help='Seconds the placement publisher waits after a failed update '
             '(Placement unreachable, provider not registered yet) before '
             'it tries again.'),
    cfg.IntOpt(
        'placement_max_attempts', default=5, min=1,
        help='Attempts to update the provider\'s traits when Placement '
             'answers 409 Conflict (another client changed the provider).'),
]

PLACEMENT_GROUP = cfg.OptGroup(
    'placement',
    title='Placement API client',
    help='keystoneauth1 options of the placement publisher.')


def _placement_opts():
    opts = (ks_loading.get_session_conf_options()
            + ks_loading.get_auth_common_conf_options()
            + ks_loading.get_adapter_conf_options(include_deprecated=False))
    cfg.set_defaults(opts, valid_interfaces=['internal', 'public'],
                     service_type='placement')
    return opts


PLACEMENT_OPTS = _placement_opts()


def register_opts(conf):
    conf.register_group(GROUP)
    conf.register_opts(OPTS, group=GROUP)
    conf.register_group(PLACEMENT_GROUP)
    for opt in PLACEMENT_OPTS:
        try:
            conf.register_opt(opt, group=PLACEMENT_GROUP)
        except cfg.DuplicateOptError:
            # Loaded in a process where Nova registered its own keystoneauth
            # options of [placement] (the same names and meaning): use them.
            pass


def list_opts():
    return {GROUP: OPTS,
            PLACEMENT_GROUP: (
                PLACEMENT_OPTS
                + ks_loading.get_auth_plugin_conf_options('password'))}
