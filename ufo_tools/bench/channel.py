"""Guest channel latency: host target write to guest acknowledgement.

Boots one test guest (real libvirt and QEMU; KVM where it works, else TCG)
with the ufo_guest module, then changes the vCPU target through the shared
page and times each acknowledgement: single-vCPU steps (4-3-2-1-2-3-4) and
the 3-vCPU steps of 4-1-4. ack_ms is over the single-vCPU steps, step_ms
over the 4-1 and 1-4 steps.
"""

import statistics
import sys
import time

from ufo_tools import testguest


def add_arguments(parser):
    parser.add_argument('--repeats', type=int, default=5,
                        help='rounds of each step sequence (default 5)')
    parser.add_argument('--vcpus', type=int, default=4,
                        help='vCPUs of the guest (default 4)')
    parser.add_argument('--poll-ms', type=int, default=10,
                        help='guest module poll interval (default 10)')
    parser.add_argument('--rate', type=float, default=0.0,
                        help='requests/s of the guest workload during the '
                             'measurement (default 0: idle guest)')
    parser.add_argument('--timeout', type=float, default=60.0,
                        help='seconds to wait for one acknowledgement')


def _pct(values, p):
    values = sorted(values)
    return values[min(len(values) - 1, int(round(p * (len(values) - 1))))]


def _measure(guest, target, timeout):
    ch = guest.channel
    t0 = time.monotonic()
    seq = ch.set_target(target)
    report, _ = ch.wait_ack(seq, timeout)
    dt = (time.monotonic() - t0) * 1000.0
    if report.sample.online_vcpus != target:
        raise RuntimeError('guest has %d vCPUs online, target %d'
                           % (report.sample.online_vcpus, target))
    return dt


def run(args):
    n = args.vcpus
    if n < 2:
        print('need at least 2 vCPUs', file=sys.stderr)
        return 2
    cmdline = ''
    if args.rate > 0:
        cmdline = 'ufo.rate=%g ufo.svc_us=500 ufo.workers=%d' % (
            args.rate, n)
    testguest.start_libvirtd()
    art = testguest.build_artifacts()
    print('guest kernel %s, accelerator %s'
          % (art['KRELEASE'], testguest.accel()))
    single, multi = [], []
    with testguest.TestGuest(vcpus=n, poll_ms=args.poll_ms,
                             cmdline=cmdline) as guest:
        _measure(guest, n, args.timeout)
        down = list(range(n - 1, 0, -1))
        up = list(range(2, n + 1))
        for r in range(args.repeats):
            row = []
            for target in down + up:
                dt = _measure(guest, target, args.timeout)
                single.append(dt)
                row.append('%d:%.1f' % (target, dt))
            print('repeat %d single steps (target:ms) %s' % (r, ' '.join(
                row)))
        for r in range(args.repeats):
            d1 = _measure(guest, 1, args.timeout)
            d2 = _measure(guest, n, args.timeout)
            multi += [d1, d2]
            print('repeat %d %d->1 %.1f ms, 1->%d %.1f ms' % (r, n, d1, n, d2))
    print('single-vCPU steps: n=%d median %.1f ms p95 %.1f ms max %.1f ms'
          % (len(single), statistics.median(single), _pct(single, 0.95),
             max(single)))
    print('%d-vCPU steps: n=%d median %.1f ms (%.1f ms per vCPU)'
          % (n - 1, len(multi), statistics.median(multi),
             statistics.median(multi) / (n - 1)))
    print('RESULT ack_ms_median=%.1f ack_ms_p95=%.1f step_ms_median=%.1f'
          % (statistics.median(single), _pct(single, 0.95),
             statistics.median(multi)))
    return 0


if __name__ == '__main__':
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_arguments(parser)
    sys.exit(run(parser.parse_args()))
