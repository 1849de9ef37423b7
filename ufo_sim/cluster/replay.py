"""Run one host of a simulated cloud again, on each host model.

A cloud's figures are the sum of its hosts' seconds, and a few VMs can
carry most of them. ``python -m ufo_sim.cluster.replay`` runs the cloud
of a ``ufo-sim cluster`` command line (one policy at one ratio, in this
process) up to ``--at`` seconds, takes the VMs that host runs then and
the loads the cloud offers them over the next ``--seconds``, and runs
that host again from its boots on each ``--fidelities`` host model with
the same policy, so that the surrogate's verdicts on a real cloud host
can be read against the engine's, VM by VM.

The VMs the cloud boots or deletes on the host within the window are
left out: the replayed host keeps the set it had at ``--at``. Its
agent starts afresh, as on a host that just booted them.
"""

import argparse
import collections
import math
import sys
import time

from ufo_sim.cluster import cloud
from ufo_sim.cluster import host as host_mod


class Captured(Exception):
    """Raised by the capturing host once it has what it needs."""


class Window:
    """What one cloud host ran over a window: its VMs, then its loads."""

    def __init__(self, spec, at_s, steps):
        self.spec = spec            # the cloud's HostSpec of the host
        self.host, self.at_s, self.steps = spec.name, float(at_s), int(steps)
        self.start_s = None
        self.requests = []      # the host's VMs at the start, boot order
        self.loads = []         # {vm_id: load} of each step
        self.ran = []           # the cloud host's own HostStep of each

    def factory(self):
        """A host factory for :func:`.cloud.run` that fills the window."""
        window = self

        class _Capturing(host_mod.ClusterHost):
            def step(self, seconds, loads):
                if self.name != window.host or self.now < window.at_s:
                    return super().step(seconds, loads)
                window._record(self, loads)
                ran = super().step(seconds, loads)
                window.ran.append(ran)
                if len(window.loads) >= window.steps:
                    raise Captured()
                return ran
        return _Capturing

    def _record(self, host, loads):
        if self.start_s is None:
            self.start_s = host.now
            self.requests = [vm.request for vm in host.vms.values()]
        kept = self.vm_ids()
        self.loads.append({v: x for v, x in loads.items() if v in kept})

    def vm_ids(self):
        return {r.vm_id for r in self.requests}


def violations(steps, vm_ids):
    """LC violation seconds of each VM of ``vm_ids`` over ``steps``."""
    bad = collections.Counter()
    for step in steps:
        for vm_id, vm in step.vms.items():
            if vm_id in vm_ids and vm.violation_s:
                bad[vm_id] += vm.violation_s
    return bad


def lc_seconds(steps, vm_ids):
    """Seconds the LC VMs of ``vm_ids`` ran over ``steps``."""
    return sum(vm.seconds for step in steps
               for vm_id, vm in step.vms.items()
               if vm_id in vm_ids and vm.lc)


def capture(config, policy, requests, host, at_s, seconds):
    """The :class:`Window` of ``host`` from ``at_s`` over ``seconds``."""
    spec = {s.name: s for s in config.hosts}.get(host)
    if spec is None:
        raise ValueError('no host %r in the cloud (%s)' % (
            host, ', '.join(s.name for s in config.hosts)))
    if not 0 <= at_s < config.duration_s:
        raise ValueError('--at %.0f is outside the cloud\'s %.0f s'
                         % (at_s, config.duration_s))
    window = Window(spec, at_s, max(1, math.ceil(seconds / config.step_s)))
    try:
        cloud.run(config, [policy], requests, workers=0,
                  factory=window.factory())
    except Captured:
        return window
    # The cloud ended first: what was taken is the window.
    if window.start_s is None:
        raise ValueError('host %s never ran after %.0f s' % (host, at_s))
    return window


def replay(window, config, policy, fidelity):
    """Run ``window`` again on ``fidelity``: (steps, CPU s, host)."""
    spec = window.spec
    host = host_mod.ClusterHost(
        spec.name, spec.cores, spec.smt, policy.host_policy,
        cloud.host_seed(config.seed, spec.name), fidelity=fidelity,
        config=cloud.controller_config(config.ufo_config),
        qos_target=config.qos_target)
    for request in window.requests:
        host.boot(request)
    cpu = time.process_time()
    steps = [host.step(config.step_s, loads) for loads in window.loads]
    return steps, time.process_time() - cpu, host


def main(argv=None):
    from ufo_sim import cmd as cmd_mod
    from ufo_sim.commands import cluster as cluster_cmd
    parser = argparse.ArgumentParser(
        description=__doc__.split('\n')[0],
        usage='%(prog)s --host NAME --at SECONDS [options] -- '
              '<ufo-sim cluster options>')
    parser.add_argument('--host', required=True,
                        help='the cloud host to take (host000, ...)')
    parser.add_argument('--at', type=float, required=True,
                        help='cloud seconds at which the window starts')
    parser.add_argument('--seconds', type=float, default=300.0,
                        help='length of the window (default 300)')
    parser.add_argument('--fidelities', default='surrogate,engine',
                        help='host models to replay on, in turn')
    parser.add_argument('--top', type=int, default=5,
                        help='VMs named on each model\'s line (default 5)')
    parser.add_argument('cluster', nargs=argparse.REMAINDER,
                        help='the ufo-sim cluster options, after --')
    args = parser.parse_args(argv)
    rest = [a for a in args.cluster if a != '--']
    fidelities = args.fidelities.split(',')
    for fidelity in fidelities:
        if fidelity not in host_mod.FIDELITIES:
            parser.error('--fidelities: %r is not one of %s' % (
                fidelity, ', '.join(host_mod.FIDELITIES)))
    cargs = cmd_mod.parser().parse_args(['cluster'] + rest)
    _, config, requests = cluster_cmd.cloud_of(cargs)
    chosen = cloud.policies(cargs.policies, cargs.ratios)
    if len(chosen) != 1:
        parser.error('the cluster options must name one policy at one '
                     'ratio (--policies and --ratios), not %d'
                     % len(chosen))
    policy = chosen[0]
    try:
        window = capture(config, policy, requests, args.host, args.at,
                         args.seconds)
    except ValueError as exc:
        parser.error(str(exc))
    print('replay: %s under %s from %.0f s, %d VMs, %d steps of %.0f s'
          % (args.host, policy.name, window.start_s, len(window.requests),
             len(window.loads), config.step_s), flush=True)
    ids = window.vm_ids()
    print(_line(args.host, policy, 'cloud:%s' % config.fidelity,
                len(ids), lc_seconds(window.ran, ids),
                violations(window.ran, ids), None, args.top), flush=True)
    for fidelity in fidelities:
        steps, spent, _ = replay(window, config, policy, fidelity)
        print(_line(args.host, policy, fidelity, len(ids),
                    lc_seconds(steps, ids), violations(steps, ids), spent,
                    args.top), flush=True)
    return 0


def _line(host, policy, fidelity, vms, lc, bad, spent, top):
    total = sum(bad.values())
    return ('RESULT replay host=%s policy=%s fidelity=%s vms=%d lc_s=%d '
            'violation_s=%d violation_pct=%.3f cpu_s=%s top=%s'
            % (host, policy.name, fidelity, vms, lc, total,
               100.0 * total / max(1, lc),
               'na' if spent is None else '%.1f' % spent,
               ','.join('%s:%d' % (v, s) for v, s in bad.most_common(top))
               or '-'))


if __name__ == '__main__':
    sys.exit(main())
