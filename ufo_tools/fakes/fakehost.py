"""Nova-like domain XML and fake /proc, /sys and pid-file trees."""

from xml.sax import saxutils

from ufo_agent.hypervisor.domain import NOVA_NS

# What Nova 34.0.0 writes (nova/virt/libvirt/config.py), trimmed to what a
# libvirt 9.0 persistent definition keeps; libvirt formats with '.
DOMAIN = """<domain type='kvm'>
  <name>%(name)s</name>
  <uuid>%(uuid)s</uuid>
  <metadata>
    <nova:instance xmlns:nova="%(ns)s">
      <nova:package version="34.0.0"/>
      <nova:name>%(server)s</nova:name>
      <nova:creationTime>2025-01-10 09:12:44</nova:creationTime>
      <nova:flavor name="%(flavor)s">
        <nova:memory>2048</nova:memory>
        <nova:disk>20</nova:disk>
        <nova:swap>0</nova:swap>
        <nova:ephemeral>0</nova:ephemeral>
        <nova:vcpus>%(flavor_vcpus)d</nova:vcpus>
        <nova:extraSpecs>%(specs)s</nova:extraSpecs>
      </nova:flavor>
      <nova:owner>
        <nova:user uuid="2f0a6e8c6f2a4f40a1f4c5b9d1c3e7aa">admin</nova:user>
        <nova:project uuid="5d8b8e5a1c9e4f1b9a7e3c2d1f0e9a8b">p</nova:project>
      </nova:owner>
      <nova:root type="image" uuid="0b6bb1a8-3c9e-4e7d-9f2a-6a1c2b3d4e5f"/>
      <nova:ports>
        <nova:port uuid="7c1f2e3d-4b5a-4c6d-8e9f-0a1b2c3d4e5f">
          <nova:ip type="fixed" address="10.0.0.12" ipVersion="4"/>
        </nova:port>
      </nova:ports>
    </nova:instance>
  </metadata>
  <memory unit='KiB'>2097152</memory>
  <currentMemory unit='KiB'>2097152</currentMemory>
  <vcpu placement='static'%(cpuset)s>%(vcpus)d</vcpu>
  <cputune>
    <shares>%(shares)d</shares>%(pins)s
  </cputune>
  <sysinfo type='smbios'>
    <system>
      <entry name='manufacturer'>OpenStack Foundation</entry>
      <entry name='product'>OpenStack Nova</entry>
      <entry name='uuid'>%(uuid)s</entry>
      <entry name='family'>Virtual Machine</entry>
    </system>
  </sysinfo>
  <os>
    <type arch='x86_64' machine='pc-q35-7.2'>hvm</type>
    <boot dev='hd'/>
    <smbios mode='sysinfo'/>
  </os>
  <features><acpi/><apic/></features>
  <cpu mode='host-model' check='partial'>
    <topology sockets='%(vcpus)d' dies='1' cores='1' threads='1'/>
  </cpu>
  <clock offset='utc'>
    <timer name='pit' tickpolicy='delay'/>
    <timer name='rtc' tickpolicy='catchup'/>
    <timer name='hpet' present='no'/>
  </clock>
  <on_poweroff>destroy</on_poweroff>
  <on_reboot>restart</on_reboot>
  <on_crash>destroy</on_crash>
  <devices>
    <emulator>/usr/bin/qemu-system-x86_64</emulator>
    <disk type='file' device='disk'>
      <driver name='qemu' type='qcow2' cache='none'/>
      <source file='/var/lib/nova/instances/%(uuid)s/disk'/>
      <target dev='vda' bus='virtio'/>
    </disk>
    <interface type='ethernet'>
      <mac address='fa:16:3e:12:34:56'/>
      <target dev='tap7c1f2e3d-4b'/>
      <model type='virtio'/>
      <mtu size='1442'/>
    </interface>
    <serial type='pty'>
      <log file='/var/lib/nova/instances/%(uuid)s/console.log' append='off'/>
      <target type='isa-serial' port='0'/>
    </serial>
    <video><model type='virtio' heads='1' primary='yes'/></video>
    <memballoon model='virtio'><stats period='10'/></memballoon>
  </devices>
</domain>"""


def nova_xml(uuid, name='instance-0000002a', server='web-1', vcpus=2,
             flavor_vcpus=None, cpuset='2-7', specs=None, vcpupins=None,
             emulatorpin=None, flavor='m1.small'):
    """The domain XML of a Nova instance (persistent, or live with pins).

    ``vcpupins``: vCPU index -> cpuset string; ``specs``: extra specs.
    """
    pins = ''.join("\n    <vcpupin vcpu='%d' cpuset='%s'/>" % (i, cpus)
                   for i, cpus in sorted((vcpupins or {}).items()))
    if emulatorpin:
        pins += "\n    <emulatorpin cpuset='%s'/>" % emulatorpin
    specs = ''.join(
        '\n          <nova:extraSpec name=%s>%s</nova:extraSpec>'
        % (saxutils.quoteattr(k), saxutils.escape(v))
        for k, v in sorted((specs or {}).items()))
    return DOMAIN % {
        'name': name, 'uuid': uuid, 'ns': NOVA_NS, 'server': server,
        'flavor': flavor, 'vcpus': vcpus,
        'flavor_vcpus': vcpus if flavor_vcpus is None else flavor_vcpus,
        'specs': specs, 'cpuset': " cpuset='%s'" % cpuset if cpuset else '',
        'shares': 1024 * vcpus, 'pins': pins}


def plain_xml(uuid, name='scratch', vcpus=1):
    """A domain someone defined by hand: no Nova metadata."""
    return ("<domain type='kvm'><name>%s</name><uuid>%s</uuid>"
            "<memory unit='KiB'>262144</memory>"
            "<vcpu placement='static'>%d</vcpu>"
            "<os><type arch='x86_64' machine='pc'>hvm</type></os>"
            "<devices></devices></domain>" % (name, uuid, vcpus))


def write_sysfs(root, online='0-7', siblings=None, numa=None):
    """A /sys/devices/system/cpu tree.

    ``siblings``: CPU -> thread_siblings_list text (default: itself);
    ``numa``: CPU -> node (default: none, as without NUMA support).
    """
    from ufo_agent import cpuset
    root.mkdir(parents=True, exist_ok=True)
    (root / 'online').write_text(online + '\n')
    for cpu in sorted(cpuset.parse_cpuset(online)):
        topo = root / ('cpu%d' % cpu) / 'topology'
        topo.mkdir(parents=True)
        text = (siblings or {}).get(cpu, str(cpu))
        if text is not None:
            (topo / 'thread_siblings_list').write_text(text + '\n')
        if numa and cpu in numa:
            (root / ('cpu%d' % cpu) / ('node%d' % numa[cpu])).mkdir()
    return root


def stat_line(pid, comm, flags=0x400000, start_time=1000, ppid=1):
    """A ``/proc/<pid>/stat`` line (fields 1-22 matter here)."""
    # pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt
    # majflt cmajflt utime stime cutime cstime priority nice threads
    # itrealvalue starttime vsize
    return ('%d (%s) S %d %d %d 0 -1 %d 0 0 0 0 0 0 0 0 20 0 1 0 %d 0\n'
            % (pid, comm, ppid, pid, pid, flags, start_time))


# PF_KTHREAD | PF_NOFREEZE ..., as kthreadd's children have.
KTHREAD_FLAGS = 0x208040


def write_vhost_kthread(proc, vpid, owner, stat=(100, 20, 3)):
    """A vhost kernel thread (before Linux 6.4) serving thread ``owner``."""
    comm = 'vhost-%d' % owner
    task = proc / str(vpid) / 'task' / str(vpid)
    task.mkdir(parents=True, exist_ok=True)
    for path in (proc / str(vpid), task):
        (path / 'comm').write_text(comm + '\n')
        (path / 'schedstat').write_text('%d %d %d\n' % stat)
        (path / 'stat').write_text(stat_line(vpid, comm, KTHREAD_FLAGS,
                                             ppid=2))


def write_qemu(proc, pid, vcpus, others=(), vhost=(), stat=(100, 20, 3),
               start_time=None):
    """A QEMU process in a fake /proc: vCPU threads pid+1.., then others.

    ``others`` are names of further threads (``vhost-<pid>``: a vhost
    worker of Linux 6.4 on); ``vhost`` are pids of vhost kernel threads
    (before 6.4). ``start_time`` writes the process's stat line.
    Returns {vCPU index: tid}.
    """
    def task(tid, comm, value=stat):
        path = proc / str(pid) / 'task' / str(tid)
        path.mkdir(parents=True, exist_ok=True)
        (path / 'comm').write_text(comm + '\n')
        (path / 'schedstat').write_text('%d %d %d\n' % value)

    task(pid, 'qemu-system-x86')
    (proc / str(pid) / 'schedstat').write_text('%d %d %d\n' % stat)
    if start_time is not None:
        (proc / str(pid) / 'stat').write_text(
            stat_line(pid, 'qemu-system-x86', start_time=start_time))
    tids = {}
    for index in range(vcpus):
        tids[index] = pid + 1 + index
        task(pid + 1 + index, 'CPU %d/KVM' % index)
    for n, comm in enumerate(others):
        task(pid + 1 + vcpus + n, comm)
    for vpid in vhost:
        write_vhost_kthread(proc, vpid, pid, stat)
    return tids
