"""Options of the guest/host shared-page channel (paper section 4.6)."""

from oslo_config import cfg

from ufo_agent.channel import host_channel

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
    cfg.StrOpt(
        'qemu_user', default=host_channel.DEFAULT_QEMU_USER,
        help='The user QEMU runs as: it must match "user" in libvirt\'s '
             'qemu.conf (libvirt-qemu on Debian and Ubuntu, qemu on RHEL, '
             'CentOS Stream, Rocky and AlmaLinux). A name or a numeric '
             'uid: under Kolla-Ansible QEMU runs as the nova user of its '
             'container, uid 42436, which has no name on the host. '
             'ufo-agent running as root gives each guest\'s page file to '
             'this user, and trusts page files it owns. A name that does '
             'not exist on the host stops the agent at start.'),
    cfg.StrOpt(
        'qemu_group', default=host_channel.DEFAULT_QEMU_GROUP,
        help='The group QEMU runs as: it must match "group" in libvirt\'s '
             'qemu.conf (kvm on Debian and Ubuntu, qemu on RHEL, CentOS '
             'Stream, Rocky and AlmaLinux). A name or a numeric gid '
             '(Kolla-Ansible: 42436, the nova group of its containers). '
             'Each guest\'s page file gets this group and mode 0660, so '
             'that QEMU can map it. ufo-agent not running as root must be '
             'a member of this group, or it does not start; a name that '
             'does not exist on the host stops the agent at start.'),
]


def register_opts(conf):
    conf.register_group(GROUP)
    conf.register_opts(OPTS, group=GROUP)


def list_opts():
    return {GROUP: OPTS}
