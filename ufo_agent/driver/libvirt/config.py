"""libvirt device XML that ufo-agent generates: the channel's shmem."""

from xml.sax import saxutils

SHMEM_ROLES = (None, 'master', 'peer')


def _attr(value):
    return saxutils.escape(value, {"'": '&apos;', '"': '&quot;'})


def shmem_xml(name, size_mib=1, role=None):
    """The ``<shmem>`` device of an ivshmem-plain page (hot-pluggable).

    ``name`` is the device and its ``/dev/shm`` file; ``role='master'``
    lets the domain migrate with the device (the page moves with it).
    """
    if role not in SHMEM_ROLES:
        raise ValueError('shmem role must be one of %r' % (SHMEM_ROLES,))
    role_attr = " role='%s'" % role if role else ''
    return ("<shmem name='%s'%s><model type='ivshmem-plain'/>"
            "<size unit='M'>%d</size></shmem>"
            % (_attr(name), role_attr, size_mib))
