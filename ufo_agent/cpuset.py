"""Parse and format Linux cpuset lists such as ``0-3,8,10-11``."""

# CPU numbers run below this: the largest NR_CPUS a Linux kernel can be
# built with (x86-64 MAXSMP, powerpc). A list naming more is not a host's,
# and parsing "0-999999999" would fill memory with CPU numbers.
MAX_CPUS = 8192


class CpusetError(ValueError):
    """A cpuset list that cannot be parsed."""


def parse_cpuset(text):
    """Return the frozenset of CPU numbers in a cpuset list.

    Accepts the kernel and Nova syntax: ranges, single CPUs and ``^N``
    exclusions, separated by commas. An empty string is the empty set.
    CPU numbers must be below :data:`MAX_CPUS`.
    """
    if text is None:
        raise CpusetError('cpuset list is missing')
    # Bit masks: each item costs at most MAX_CPUS bits, however large.
    include = exclude = 0
    for raw in text.split(','):
        item = raw.strip()
        if not item:
            continue
        excluded = item.startswith('^')
        if excluded:
            item = item[1:].strip()
        try:
            if '-' in item:
                first, last = (int(x) for x in item.split('-', 1))
            else:
                first = last = int(item)
        except ValueError:
            raise CpusetError('invalid cpuset item %r in %r' % (raw, text))
        if first < 0 or last < first:
            raise CpusetError('invalid cpuset range %r in %r' % (raw, text))
        if last >= MAX_CPUS:
            raise CpusetError('CPU %d in %r is beyond the %d CPUs a Linux '
                              'host can have' % (last, _short(text),
                                                 MAX_CPUS))
        bits = ((1 << (last + 1)) - 1) ^ ((1 << first) - 1)
        if excluded:
            exclude |= bits
        else:
            include |= bits
    mask = include & ~exclude
    return frozenset(cpu for cpu in range(mask.bit_length())
                     if mask >> cpu & 1)


def _short(text, most=80):
    """``text`` for an error message, cut short if it is long."""
    return text if len(text) <= most else text[:most] + '...'


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
