"""Options of the guest/host shared-page channel (paper section 4.6)."""

from oslo_config import cfg

GROUP = cfg.OptGroup(
    'channel',
    title='Guest channel',
    help='The ivshmem-plain shared page through which ufo-agent and the '
         'ufo_guest kernel module of each guest talk.')

OPTS = [
    cfg.StrOpt(
        'shm_dir', default='/dev/shm',
        help='Directory of the page files. libvirt maps <shmem name="X"> '
             'to /dev/shm/X, so this only changes for tests.'),
    cfg.StrOpt(
        'name_prefix', default='ufo-',
        help='Prefix of the shmem device name; the domain UUID follows.'),
    cfg.IntOpt(
        'shm_size_mib', default=1, min=1, max=1024,
        help='Size in MiB of the ivshmem device (a power of two). Only the '
             'first 4 KiB page is used.'),
    cfg.IntOpt(
        'read_retries', default=100, min=1, max=100000,
        help='Seqlock retries when reading a guest area that keeps '
             'changing, before the read is reported as busy. However many, '
             'one read gives up after 200 microseconds: a guest that holds '
             'its sequence odd cannot slow the agent down.'),
]


def register_opts(conf):
    conf.register_group(GROUP)
    conf.register_opts(OPTS, group=GROUP)


def list_opts():
    return {GROUP: OPTS}
