"""Publish an application's tail latency to ufo-agent, from inside a guest.

The ufo_guest module (1.1.0 or later) takes the latency at the flavor's
percentile, in microseconds, from ``/sys/kernel/ufo/latency_us`` and
hands it to the host; see "Publishing the application's tail latency"
in doc/source/guest-image.rst. Standard library only: it runs in guests.

Usage::

    python3 -m ufo_tools.guest_latency publish 850
    python3 -m ufo_tools.guest_latency follow --url URL --metric NAME \\
        [--percentile 99] [--scale 1e6] [--interval 1]

``follow`` scrapes a Prometheus histogram (text exposition format) every
``interval`` seconds, takes ``percentile`` of the observations made
since the previous scrape from its ``NAME_bucket`` counters (summed over
every other label), and publishes it. ``scale`` turns the histogram's
unit into microseconds (1e6 for the usual seconds).
"""

import argparse
import math
import re
import sys
import time
import urllib.request

SYSFS_PATH = '/sys/kernel/ufo/latency_us'
# What the module and the host accept.
MIN_US = 1
MAX_US = 10 ** 7

# name{labels} value [timestamp]; label values may hold escaped quotes.
_SAMPLE = re.compile(
    r'^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)'
    r'(?:\{(?P<labels>(?:[^"}]|"(?:[^"\\]|\\.)*")*)\})?'
    r'\s+(?P<value>\S+)(?:\s+-?[0-9]+)?\s*$')
_LABEL = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"'
                    r'\s*,?')


def publish(latency_us, path=SYSFS_PATH):
    """Write one latency report (microseconds), clamped to what is taken.

    A latency above 10 s is reported as 10 s (the target is missed either
    way), one below 1 us as 1 us. Returns the value written.
    """
    if not math.isfinite(latency_us):
        raise ValueError('latency %r is not a number of microseconds'
                         % latency_us)
    value = min(MAX_US, max(MIN_US, int(round(latency_us))))
    with open(path, 'w') as f:
        f.write('%d\n' % value)
    return value


def _labels(text):
    out = {}
    pos = 0
    while pos < len(text):
        m = _LABEL.match(text, pos)
        if m is None:
            raise ValueError('bad labels {%s}' % text)
        out[m.group(1)] = re.sub(r'\\(.)', r'\1', m.group(2))
        pos = m.end()
    return out


def _le(value):
    if value in ('+Inf', 'Inf', '+inf', 'inf'):
        return math.inf
    return float(value)


def parse_buckets(text, metric):
    """The cumulative buckets of histogram ``metric`` in an exposition.

    Returns a list of (upper bound, count), sorted by bound, the counts
    of every series of the metric summed per bound. Lines that are not
    samples of ``metric``'s buckets are skipped.
    """
    wanted = metric + '_bucket'
    counts = {}
    for line in text.splitlines():
        line = line.strip()
        if not line.startswith(wanted) or line.startswith('#'):
            continue
        m = _SAMPLE.match(line)
        if m is None or m.group('name') != wanted:
            continue
        labels = _labels(m.group('labels') or '')
        if 'le' not in labels:
            continue
        try:
            le, count = _le(labels['le']), float(m.group('value'))
        except ValueError:
            continue
        if math.isnan(le) or not math.isfinite(count) or count < 0:
            continue
        counts[le] = counts.get(le, 0.0) + count
    return sorted(counts.items())


def delta(before, after):
    """The buckets of the observations between two scrapes.

    A counter that went down (the exporter restarted) makes ``after``
    itself the delta; so do bounds that changed.
    """
    if before is None or [b for b, _ in before] != [b for b, _ in after]:
        return list(after)
    out = []
    for (bound, old), (_, new) in zip(before, after):
        if new < old:
            return list(after)
        out.append((bound, new - old))
    return out


def quantile(buckets, q):
    """Quantile ``q`` (0..1) of cumulative ``buckets``, or None if empty.

    Linear within the bucket that holds it, from the bucket below's bound
    (0 below the first); a quantile in the +Inf bucket is the highest
    finite bound, the most the histogram can say.
    """
    if not 0 <= q <= 1:
        raise ValueError('quantile %r not in 0..1' % q)
    if not buckets or buckets[-1][0] != math.inf:
        return None
    total = buckets[-1][1]
    if total <= 0:
        return None
    rank = q * total
    lower, below = 0.0, 0.0
    for bound, count in buckets:
        if count >= rank and count > below:
            if bound == math.inf:
                return lower
            if lower > bound:           # a first bound below zero
                return bound
            return lower + (bound - lower) * (rank - below) / (count - below)
        lower, below = bound, count
    return lower


def scrape(url, timeout=5.0):
    with urllib.request.urlopen(url, timeout=timeout) as resp:
        return resp.read().decode('utf-8', 'replace')


def follow(url, metric, percentile, scale=1e6, interval=1.0,
           path=SYSFS_PATH, log=sys.stderr, clock=time.monotonic,
           sleep=time.sleep, fetch=scrape, rounds=None):
    """Publish the histogram's percentile every ``interval`` seconds.

    A scrape that fails or an interval without observations publishes
    nothing: ufo-agent then lets the last value go stale.
    """
    before = None
    next_at = clock()
    done = 0
    while rounds is None or done < rounds:
        done += 1
        try:
            after = parse_buckets(fetch(url), metric)
        except (OSError, ValueError) as exc:
            print('scrape of %s failed: %s' % (url, exc), file=log)
            after = None
        if after:
            value = quantile(delta(before, after), percentile / 100.0)
            before = after
            if value is not None:
                publish(value * scale, path)
        next_at += interval
        sleep(max(0.0, next_at - clock()))


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog='python3 -m ufo_tools.guest_latency',
        description='Publish a tail latency to ufo-agent through the '
                    'ufo_guest module.')
    parser.add_argument('--path', default=SYSFS_PATH,
                        help='the module\'s file (default %(default)s)')
    sub = parser.add_subparsers(dest='command', required=True)
    one = sub.add_parser('publish', help='publish one value')
    one.add_argument('latency_us', type=float,
                     help='the latency, microseconds')
    loop = sub.add_parser('follow', help='publish a Prometheus histogram\'s '
                          'percentile every interval')
    loop.add_argument('--url', required=True)
    loop.add_argument('--metric', required=True,
                      help='histogram name, without _bucket')
    loop.add_argument('--percentile', type=float, default=99.0)
    loop.add_argument('--scale', type=float, default=1e6,
                      help='microseconds per histogram unit (default 1e6: '
                           'seconds)')
    loop.add_argument('--interval', type=float, default=1.0)
    args = parser.parse_args(argv)
    if args.command == 'publish':
        print(publish(args.latency_us, args.path))
        return 0
    if not 0 < args.percentile <= 100:
        parser.error('--percentile must be in (0, 100]')
    follow(args.url, args.metric, args.percentile, args.scale,
           args.interval, args.path)
    return 0


if __name__ == '__main__':
    sys.exit(main())
