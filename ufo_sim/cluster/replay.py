"""Run one host of a simulated cloud again, on each host model.

A cloud's figures are the sum of its hosts' seconds, and a few VMs can
carry most of them. ``python -m ufo_sim.cluster.replay`` runs the cloud
of a ``ufo-sim cluster`` command line (one policy at one ratio, in this
process) up to ``--at`` seconds, takes the VMs that host runs then and
the loads the cloud offers them over the next ``--seconds``, and runs
that host again from its boots on each ``--fidelities`` host model with
the same policy, so that the surrogate's verdicts on a real cloud host
can be read against the engine's, VM by VM.

``--agent-modes`` replays a UFO host with its agent in each mode named
(``black-box``, ``qos-target``) on the very VMs and loads, where two
clouds run in different modes place different VMs on a host.

The VMs the cloud boots or deletes on the host within the window are
left out: the replayed host keeps the set it had at ``--at``. Its
agent starts afresh, as on a host that just booted them; ``--settle``
runs the window's first loads that long before the window, uncounted,
so that a fresh agent's first allocation is not read as the cloud
host's.

``--windows N`` takes N windows instead, each a host and a time drawn
at random (``--window-seed``) after the warm-up, all from one run of
the cloud, and ends with a ``RESULT replay_total`` line per model (and
agent mode): the surrogate's error against the engine over hosts nobody
chose.
"""

import argparse
import collections
import math
import random
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

    @property
    def full(self):
        return len(self.loads) >= self.steps

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


def _factory(windows):
    """A host factory for :func:`.cloud.run` that fills ``windows``."""
    by_host = collections.defaultdict(list)
    for window in windows:
        by_host[window.host].append(window)

    class _Capturing(host_mod.ClusterHost):
        def step(self, seconds, loads):
            taking = [w for w in by_host.get(self.name, ())
                      if self.now >= w.at_s and not w.full]
            for window in taking:
                window._record(self, loads)
            ran = super().step(seconds, loads)
            for window in taking:
                window.ran.append(ran)
            if taking and all(w.full for w in windows):
                raise Captured()
            return ran
    return _Capturing


def capture(config, policy, requests, host, at_s, seconds):
    """The :class:`Window` of ``host`` from ``at_s`` over ``seconds``."""
    return capture_all(config, policy, requests, [(host, at_s)],
                       seconds)[0]


def capture_all(config, policy, requests, picks, seconds):
    """The :class:`Window` of each (host, start) of ``picks``, in order.

    All from one run of the cloud, up to the last window's end.
    """
    specs = {s.name: s for s in config.hosts}
    windows = []
    for host, at_s in picks:
        if host not in specs:
            raise ValueError('no host %r in the cloud (%s)' % (
                host, ', '.join(s.name for s in config.hosts)))
        if not 0 <= at_s < config.duration_s:
            raise ValueError('--at %.0f is outside the cloud\'s %.0f s'
                             % (at_s, config.duration_s))
        windows.append(Window(specs[host], at_s,
                              max(1, math.ceil(seconds / config.step_s))))
    try:
        cloud.run(config, [policy], requests, workers=0,
                  factory=_factory(windows))
    except Captured:
        pass
    # The cloud may end first: what was taken is the window.
    for window in windows:
        if window.start_s is None:
            raise ValueError('host %s never ran after %.0f s'
                             % (window.host, window.at_s))
    return windows


def pick_windows(config, count, seconds, seed):
    """``count`` (host, start) drawn uniformly after the warm-up."""
    rng = random.Random(seed)
    last = max(config.warmup_s, config.duration_s - seconds)
    return [(rng.choice(config.hosts).name,
             float(int(rng.uniform(config.warmup_s, last))))
            for _ in range(count)]


# The agent's modes --agent-modes names: is it in QoS-target mode?
AGENT_MODES = {'black-box': False, 'qos-target': True}


def replay(window, config, policy, fidelity, settle_s=0.0, qos_target=None):
    """Run ``window`` again on ``fidelity``: (steps, CPU s, host).

    ``settle_s``: seconds of the window's first loads run first and
    left out of the steps. ``qos_target``: a UFO agent's mode, True or
    False; None runs it in the cloud's.
    """
    spec = window.spec
    if qos_target is None:
        qos_target = config.qos_target
    host = host_mod.ClusterHost(
        spec.name, spec.cores, spec.smt, policy.host_policy,
        cloud.host_seed(config.seed, spec.name), fidelity=fidelity,
        config=cloud.controller_config(config.ufo_config),
        qos_target=qos_target)
    for request in window.requests:
        host.boot(request)
    cpu = time.process_time()
    if settle_s > 0:
        host.step(settle_s, window.loads[0])
    steps = [host.step(config.step_s, loads) for loads in window.loads]
    return steps, time.process_time() - cpu, host


def main(argv=None):
    from ufo_sim import cmd as cmd_mod
    from ufo_sim.commands import cluster as cluster_cmd
    parser = argparse.ArgumentParser(
        description=__doc__.split('\n')[0],
        usage='%(prog)s (--host NAME --at SECONDS | --windows N) '
              '[options] -- <ufo-sim cluster options>')
    parser.add_argument('--host',
                        help='the cloud host to take (host000, ...)')
    parser.add_argument('--at', type=float,
                        help='cloud seconds at which the window starts')
    parser.add_argument('--windows', type=int,
                        help='take this many windows at random instead')
    parser.add_argument('--window-seed', type=int, default=1,
                        help='the draw of --windows (default 1)')
    parser.add_argument('--seconds', type=float, default=300.0,
                        help='length of the window (default 300)')
    parser.add_argument('--settle', type=float, default=0.0,
                        help='seconds of the window\'s first loads each '
                             'model runs before it, not counted (default '
                             '0: the fresh agent\'s start is counted)')
    parser.add_argument('--fidelities', default='surrogate,engine',
                        help='host models to replay on, in turn')
    parser.add_argument('--agent-modes',
                        help='replay a UFO host with its agent in each of '
                             'these modes, comma-separated: %s (default: '
                             'the cloud\'s mode only)'
                             % ', '.join(AGENT_MODES))
    parser.add_argument('--top', type=int, default=5,
                        help='VMs named on each model\'s line (default 5)')
    parser.add_argument('cluster', nargs=argparse.REMAINDER,
                        help='the ufo-sim cluster options, after --')
    args = parser.parse_args(argv)
    if (args.windows is None) == (args.host is None or args.at is None):
        parser.error('give --host and --at, or --windows')
    if args.windows is not None and args.windows < 1:
        parser.error('--windows must be 1 or more')
    if not 0 <= args.settle < math.inf:
        parser.error('--settle must be 0 or more seconds')
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
    modes = [config.qos_target]
    if args.agent_modes is not None:
        names = args.agent_modes.split(',')
        for name in names:
            if name not in AGENT_MODES:
                parser.error('--agent-modes: %r is not one of %s' % (
                    name, ', '.join(AGENT_MODES)))
        if len(set(names)) != len(names):
            parser.error('--agent-modes: a mode is named twice')
        if policy.host_policy != 'ufo':
            parser.error('--agent-modes: %s runs no UFO agent'
                         % policy.name)
        modes = [AGENT_MODES[name] for name in names]
    picks = [(args.host, args.at)] if args.windows is None else \
        pick_windows(config, args.windows, args.seconds, args.window_seed)
    try:
        windows = capture_all(config, policy, requests, picks,
                              args.seconds)
    except ValueError as exc:
        parser.error(str(exc))
    cloud_model = 'cloud:%s' % config.fidelity
    # A model's line for each agent mode it runs.
    runs_of = [(cloud_model, config.qos_target)] + [
        (fidelity, mode) for fidelity in fidelities for mode in modes]
    totals = collections.OrderedDict((run, [0, 0]) for run in runs_of)
    for window in windows:
        print('replay: %s under %s from %.0f s, %d VMs, %d steps of %.0f s'
              % (window.host, policy.name, window.start_s,
                 len(window.requests), len(window.loads), config.step_s),
              flush=True)
        ids = window.vm_ids()
        for model, mode in runs_of:
            if model == cloud_model:
                steps, spent = window.ran, None
            else:
                steps, spent, _ = replay(window, config, policy, model,
                                         args.settle, qos_target=mode)
            lc, bad = lc_seconds(steps, ids), violations(steps, ids)
            totals[model, mode][0] += lc
            totals[model, mode][1] += sum(bad.values())
            print(_line(window.host, policy, model, _agent(policy, mode),
                        len(ids), lc, bad, spent, args.top), flush=True)
    if args.windows is not None:
        for (model, mode), (lc, bad) in totals.items():
            print('RESULT replay_total policy=%s fidelity=%s agent=%s '
                  'windows=%d seed=%d settle_s=%.0f lc_s=%d '
                  'violation_s=%d violation_pct=%.3f'
                  % (policy.name, model, _agent(policy, mode),
                     len(windows), args.window_seed, args.settle, lc, bad,
                     100.0 * bad / max(1, lc)), flush=True)
    return 0


def _agent(policy, qos_target):
    """The agent field of a line: a UFO agent's mode, or none."""
    if policy.host_policy != 'ufo':
        return 'none'
    return 'qos-target' if qos_target else 'black-box'


def _line(host, policy, fidelity, agent, vms, lc, bad, spent, top):
    total = sum(bad.values())
    return ('RESULT replay host=%s policy=%s fidelity=%s agent=%s vms=%d '
            'lc_s=%d violation_s=%d violation_pct=%.3f cpu_s=%s top=%s'
            % (host, policy.name, fidelity, agent, vms, lc, total,
               100.0 * total / max(1, lc),
               'na' if spent is None else '%.1f' % spent,
               ','.join('%s:%d' % (v, s) for v, s in bad.most_common(top))
               or '-'))


if __name__ == '__main__':
    sys.exit(main())
