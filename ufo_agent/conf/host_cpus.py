"""Options that describe which host CPUs ufo-agent manages.

The rules are in :mod:`ufo_agent.hypervisor.managed_cpus`, which also
holds the default Nova paths.
"""

from oslo_config import cfg

from ufo_agent.hypervisor import managed_cpus

GROUP = cfg.OptGroup(
    'host_cpus',
    title='Managed host CPUs',
    help='The host CPUs that ufo-agent splits into vCPU, emulator and idle '
         'pools. They are managed_cpus if set, else Nova\'s [compute] '
         'cpu_shared_set, read from nova-compute\'s configuration '
         '(nova_config, nova_config_dir); Nova\'s [compute] '
         'cpu_dedicated_set and reserved_cpus are never managed. When '
         'neither gives a set, or the set overlaps cpu_dedicated_set, '
         'ufo-agent refuses to start: it never manages every online CPU '
         'by default.')

OPTS = [
    cfg.StrOpt(
        'managed_cpus',
        help='Host CPUs ufo-agent manages, as a cpuset list such as '
             '"4-31,36-63" (Nova\'s syntax, "^N" excludes). Unset means '
             'Nova\'s [compute] cpu_shared_set, read from nova_config and '
             'nova_config_dir; ufo-agent refuses to start when that is not '
             'set either. Refused if it overlaps Nova\'s [compute] '
             'cpu_dedicated_set (or, on hosts still using it, the '
             'deprecated [DEFAULT] vcpu_pin_set).'),
    cfg.StrOpt(
        'reserved_cpus', default='',
        help='Host CPUs never given to guests by ufo-agent (cpuset list), '
             'removed from the managed set. They must be online.'),
    cfg.ListOpt(
        'nova_config', default=list(managed_cpus.NOVA_CONFIG_FILES),
        help='nova-compute\'s configuration files, in the order '
             'nova-compute reads them (its --config-file options); a later '
             'file overrides an earlier one. ufo-agent reads their '
             '[compute] cpu_shared_set, [compute] cpu_dedicated_set, '
             '[DEFAULT] vcpu_pin_set and [DEFAULT] host (the name its host '
             'signals carry) with oslo.config, as Nova does. The '
             'default files are skipped when they do not exist; any other '
             'file must exist. Empty: do not read Nova\'s configuration '
             '(managed_cpus must then be set).'),
    cfg.StrOpt(
        'nova_config_dir', default=managed_cpus.NOVA_CONFIG_DIR,
        help='nova-compute\'s --config-dir: the files of this directory '
             'whose names end in .conf are read in name order after '
             'nova_config and override it. The default directory is '
             'skipped when it does not exist; any other must exist. Empty: '
             'none.'),
]


def register_opts(conf):
    conf.register_group(GROUP)
    conf.register_opts(OPTS, group=GROUP)


def list_opts():
    return {GROUP: OPTS}
