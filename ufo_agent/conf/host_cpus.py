"""Options that describe which host CPUs ufo-agent manages."""

from oslo_config import cfg

GROUP = cfg.OptGroup(
    'host_cpus',
    title='Managed host CPUs',
    help='The host CPUs that ufo-agent splits into vCPU, emulator and idle '
         'pools.')

OPTS = [
    cfg.StrOpt(
        'managed_cpus',
        help='Host CPUs ufo-agent manages, as a cpuset list such as '
             '"4-31,36-63". Unset means Nova\'s [compute] cpu_shared_set '
             'when nova_config is given, else every online CPU.'),
    cfg.StrOpt(
        'reserved_cpus', default='',
        help='Host CPUs never given to guests by ufo-agent (cpuset list), '
             'removed from managed_cpus.'),
    cfg.StrOpt(
        'nova_config',
        help='Path of nova.conf. When set and managed_cpus is unset, '
             '[compute] cpu_shared_set of that file is the managed set.'),
]


def register_opts(conf):
    conf.register_group(GROUP)
    conf.register_opts(OPTS, group=GROUP)


def list_opts():
    return {GROUP: OPTS}
