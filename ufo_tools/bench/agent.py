"""Run the real agent loop over N real test guests; time its CPU per tick."""

import contextlib
import resource
import statistics
import time

from ufo_agent.hypervisor.domain import NOVA_NS


def add_arguments(parser):
    parser.add_argument('--guests', type=int, default=3,
                        help='test guests to boot (default 3)')
    parser.add_argument('--vcpus', type=int, default=2,
                        help='vCPUs per guest (default 2)')
    parser.add_argument('--ticks', type=int, default=30,
                        help='timed ticks per repeat (default 30)')
    parser.add_argument('--repeats', type=int, default=3,
                        help='repeats (default 3)')
    parser.add_argument('--rate', type=int, default=200,
                        help='requests/s of each guest\'s workload')


def _metadata(name, vcpus):
    return ('<instance><name>%s</name><flavor name="bench"><vcpus>%d'
            '</vcpus></flavor></instance>' % (name, vcpus))


def run(args):
    import libvirt

    from ufo_agent.controller import ControllerConfig
    from ufo_agent.driver.libvirt import driver as libvirt_driver
    from ufo_agent.hypervisor import sysfs
    from ufo_agent.service import loop
    from ufo_tools import testguest

    testguest.start_libvirtd()
    print('ufo-bench agent: booting %d test guests (%s)'
          % (args.guests, testguest.accel()))
    with contextlib.ExitStack() as stack:
        guests = []
        for i in range(args.guests):
            guest = testguest.TestGuest(
                vcpus=args.vcpus, channel=False,
                cmdline='ufo.rate=%d ufo.svc_us=500' % args.rate)
            stack.callback(guest.close)
            guest.start()
            guest.dom.setMetadata(libvirt.VIR_DOMAIN_METADATA_ELEMENT,
                                  _metadata('bench-%d' % i, args.vcpus),
                                  'nova', NOVA_NS,
                                  libvirt.VIR_DOMAIN_AFFECT_LIVE)
            guests.append(guest)
        host = sysfs.host_cpus()
        driver = libvirt_driver.LibvirtDriver(
            managed_cpus=host.online, qemu_user=testguest.QEMU_USER,
            qemu_group=testguest.QEMU_GROUP)
        stack.callback(driver.close)
        for guest in guests:
            stack.callback(driver.forget, guest.dom.UUIDString())
        agent = loop.Agent(driver, host.online, ControllerConfig())
        agent.start()
        stack.callback(agent.stop)
        medians = []
        for rep in range(args.repeats):
            cpu_ms, wall_ms = [], []
            for _ in range(args.ticks):
                cpu0, wall0 = time.process_time(), time.monotonic()
                agent.tick()
                cpu_ms.append(1000.0 * (time.process_time() - cpu0))
                wall_ms.append(1000.0 * (time.monotonic() - wall0))
                time.sleep(max(0.0, 1.0 - (time.monotonic() - wall0)))
            medians.append(statistics.median(cpu_ms))
            print('repeat %d: tick CPU median %.2f ms (max %.2f), wall '
                  'median %.2f ms; %d guests managed, %s'
                  % (rep + 1, medians[-1], max(cpu_ms),
                     statistics.median(wall_ms), len(agent.guests),
                     ', '.join('%s %s' % (s.name, s.signal)
                               for s in agent.status.values())))
        rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
        share = statistics.median(medians) / 10.0
        print('agent CPU: %.2f%% of one core at one tick per second '
              '(the paper\'s host module: < 5%%)' % share)
        print('RESULT tick_cpu_ms_median=%.3f rss_mb=%.1f guests=%d'
              % (statistics.median(medians), rss_mb, args.guests))
    return 0
