"""The ``[ufo]`` options of ufo_nova, read inside nova-scheduler.

oslo-config-generator namespace: ``ufo_nova``.
"""

from oslo_config import cfg

GROUP = cfg.OptGroup(
    'ufo',
    title='UFO scheduler plugins',
    help='UFOFilter and UFOIdlePoolWeigher: how nova-scheduler uses the '
         'host signals that ufo-agent publishes.')

FAIL_OPEN = 'fail-open'
FAIL_CLOSED = 'fail-closed'

OPTS = [
    cfg.FloatOpt(
        'signal_max_age', default=120.0, min=1.0,
        help='Seconds after the last signal of a host was received after '
             'which it is stale and the host counts as unknown. Keep it a '
             'few times the agents\' [publishers] keepalive_interval.'),
    cfg.StrOpt(
        'unknown_host_policy', default=FAIL_OPEN,
        choices=[(FAIL_OPEN, 'UFOFilter passes hosts whose signal is '
                             'missing or stale (hosts without ufo-agent '
                             'keep receiving VMs).'),
                 (FAIL_CLOSED, 'UFOFilter rejects hosts whose signal is '
                               'missing or stale.')],
        help='How UFOFilter treats a host whose signal is missing or stale. '
             'UFOIdlePoolWeigher always counts such a host as having no '
             'reclaimable cores.'),
    cfg.FloatOpt(
        'expected_demand_fraction', default=0.5, min=0.0, max=4.0,
        help='Expected physical cores a new VM needs, per flavor vCPU. A '
             'saturated host passes UFOFilter only when '
             'ceil(flavor vCPUs x expected_demand_fraction) fits its '
             'reported idle cores. Use 1.0 to assume every vCPU is busy; '
             'with SMT hosts, divide by the threads per core.'),
    cfg.FloatOpt(
        'idle_pool_weight_multiplier', default=1.0,
        help='Multiplier of UFOIdlePoolWeigher. Positive values prefer '
             'hosts with more reclaimable cores (spread onto the idle '
             'pools), negative values prefer fewer (stack). Host '
             'aggregates override it with the metadata key '
             'ufo_idle_pool_weight_multiplier.'),
    cfg.ListOpt(
        'notification_topics', default=['ufo_notifications'],
        help='oslo.messaging topics on which ufo-agent publishes host '
             'signals (ufo-agent\'s [publishers] notification_topics). '
             'The notification transport is nova\'s: '
             '[oslo_messaging_notifications] transport_url, else '
             '[DEFAULT] transport_url.'),
    cfg.StrOpt(
        'notification_exchange', default='openstack',
        help='The oslo.messaging exchange on which ufo-agent publishes: '
             'ufo-agent\'s [DEFAULT] control_exchange (oslo.messaging\'s '
             'default, openstack, unless set there). The listener binds '
             'to it by name: nova-scheduler\'s own control_exchange is '
             'nova, where no signal arrives.'),
    cfg.StrOpt(
        'listener_pool_prefix', default='ufo-nova-scheduler',
        help='Prefix of the listener pool, hence of the RabbitMQ queue, of '
             'each scheduler worker process. Every worker listens in its own '
             'pool "<prefix>.<hostname>.<pid>" so that each one sees every '
             'host. Give these queues an expiry policy in RabbitMQ.'),
    cfg.FloatOpt(
        'signal_report_interval', default=600.0, min=0.0,
        help='Seconds between two INFO lines of each scheduler worker that '
             'count the hosts of a request with a fresh signal, a stale '
             'one and none, and name the hosts without one and the hosts '
             'signals come from that were not considered. The first '
             'request after a start logs at once. 0 turns the line off.'),
    cfg.BoolOpt(
        'start_listener', default=True,
        help='Start the notification listener in each scheduler worker on '
             'its first request. Turn off only for tests that feed the '
             'signal cache themselves.'),
]


def register_opts(conf):
    conf.register_group(GROUP)
    conf.register_opts(OPTS, group=GROUP)


def list_opts():
    """Entry point of oslo-config-generator (namespace ``ufo_nova``)."""
    return [(GROUP, OPTS)]


CONF = cfg.CONF
register_opts(CONF)
