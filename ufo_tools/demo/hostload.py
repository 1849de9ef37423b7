"""How busy the host was outside the demo's guests during a run.

Under TCG a guest is only as fast as the host CPU time its QEMU threads
get, so anything else running on the demo's two cores (the agent,
libvirtd, the demo itself, and on a shared machine whatever else runs)
slows it. The demo reports that share of the host beside its results:
from /proc/stat's busy time of every CPU, less the CPU time of the
guests' QEMU processes.
"""

import os

# /proc/stat cpu line fields that are not idle: user nice system (idle
# iowait) irq softirq steal. Guest time is already in user.
_BUSY = (0, 1, 2, 5, 6, 7)


def host_busy_ticks(stat_text):
    """Busy clock ticks of all CPUs together, from /proc/stat's text."""
    for line in stat_text.splitlines():
        fields = line.split()
        if fields and fields[0] == 'cpu':
            values = [int(v) for v in fields[1:]]
            return sum(values[i] for i in _BUSY if i < len(values))
    raise ValueError('no cpu line in /proc/stat')


def process_ticks(stat_text):
    """utime + stime of a process, from its /proc/PID/stat text."""
    # The command may hold spaces and parentheses: split after the last.
    fields = stat_text[stat_text.rindex(')') + 2:].split()
    return int(fields[11]) + int(fields[12])


def outside_pct(host_before, host_after, guests_before, guests_after,
                seconds, cpus):
    """Percent of the host's CPUs busy outside the guests over ``seconds``.

    Ticks are /proc's clock ticks; a guest missing from either reading
    (it went away) counts as none.
    """
    hz = os.sysconf('SC_CLK_TCK')
    guests = sum(max(0, guests_after[pid] - guests_before[pid])
                 for pid in guests_after if pid in guests_before)
    busy = max(0, host_after - host_before - guests)
    return 100.0 * busy / hz / max(seconds, 1e-9) / max(1, cpus)


class Meter:
    """Reads the host and the guests' QEMU processes at start and stop."""

    def __init__(self, pids, cpus, proc='/proc'):
        self.pids = list(pids)
        self.cpus = cpus
        self.proc = proc
        self._start = None

    def _read(self):
        with open(os.path.join(self.proc, 'stat')) as f:
            host = host_busy_ticks(f.read())
        guests = {}
        for pid in self.pids:
            try:
                with open(os.path.join(self.proc, str(pid), 'stat')) as f:
                    guests[pid] = process_ticks(f.read())
            except OSError:
                continue
        return host, guests

    def start(self, now):
        self._start = (now,) + self._read()

    def stop(self, now):
        """Percent of the host's CPUs busy outside the guests since start."""
        then, host, guests = self._start
        host_now, guests_now = self._read()
        return outside_pct(host, host_now, guests, guests_now, now - then,
                           self.cpus)
