"""Parse and format Linux cpuset lists such as ``0-3,8,10-11``."""


class CpusetError(ValueError):
    """A cpuset list that cannot be parsed."""


def parse_cpuset(text):
    """Return the frozenset of CPU numbers in a cpuset list.

    Accepts the kernel and Nova syntax: ranges, single CPUs and ``^N``
    exclusions, separated by commas. An empty string is the empty set.
    """
    if text is None:
        raise CpusetError('cpuset list is missing')
    include, exclude = set(), set()
    for raw in text.split(','):
        item = raw.strip()
        if not item:
            continue
        target = include
        if item.startswith('^'):
            target, item = exclude, item[1:].strip()
        try:
            if '-' in item:
                first, last = (int(x) for x in item.split('-', 1))
            else:
                first = last = int(item)
        except ValueError:
            raise CpusetError('invalid cpuset item %r in %r' % (raw, text))
        if first < 0 or last < first:
            raise CpusetError('invalid cpuset range %r in %r' % (raw, text))
        target.update(range(first, last + 1))
    return frozenset(include - exclude)


def format_cpuset(cpus):
    """Format CPU numbers as a compact cpuset list (``0-3,8``)."""
    ordered = sorted(set(cpus))
    parts = []
    start = prev = None
    for cpu in ordered:
        if start is None:
            start = prev = cpu
        elif cpu == prev + 1:
            prev = cpu
        else:
            parts.append(_range(start, prev))
            start = prev = cpu
    if start is not None:
        parts.append(_range(start, prev))
    return ','.join(parts)


def _range(first, last):
    return str(first) if first == last else '%d-%d' % (first, last)
