"""Options of the UFO controller (paper section 4 and Appendix B).

The defaults are :class:`~ufo_agent.controller.config.ControllerConfig`'s,
the values the NSDI'24 paper uses; they are written only there.
"""

from oslo_config import cfg

from ufo_agent.controller import config as controller_config

_DEFAULTS = controller_config.ControllerConfig()

GROUP = cfg.OptGroup(
    'controller',
    title='UFO controller',
    help='Thresholds and timings of the per-host UFO core controller.')

OPTS = [
    cfg.FloatOpt(
        'tick_interval', default=_DEFAULTS.tick_interval, min=0.1, max=60.0,
        help='Seconds between two controller ticks (monitor, decide, '
             'enforce). The paper monitors every second.'),
    cfg.FloatOpt(
        'settle_time', default=_DEFAULTS.settle_time, min=0.0, max=60.0,
        mutable=True,
        help='Seconds to wait after changing the cores of a VM before its '
             'samples are used again. vCPU hotplug disturbs guest '
             'utilization for 1-3 s (paper section 6.4).'),
    cfg.IntOpt(
        'confirm_samples', default=_DEFAULTS.confirm_samples, min=1,
        max=10, mutable=True,
        help='Consecutive settled samples that must call for the same '
             'move (more or fewer cores) before a VM\'s cores change, '
             'busy samples before a parked VM wakes, and samples calling '
             'for an emulator pool grow that would take VMs\' committed '
             'cores. 1 reacts to every sample as the paper does; 2 '
             'ignores one-second bursts and lulls at the cost of one '
             'second of reaction.'),
    cfg.FloatOpt(
        'sf_threshold', default=_DEFAULTS.sf_threshold, min=0.01, max=0.99,
        mutable=True,
        help='Relative scheduling-frequency change that makes two more '
             'cores worth having: c cores suffice when SF(c)/SF(c+step) >= '
             '1 - sf_threshold (paper section 4.5).'),
    cfg.BoolOpt(
        'detect_flat_sf', default=_DEFAULTS.detect_flat_sf,
        mutable=True,
        help='Detect MySQL-like VMs, whose scheduling frequency does not '
             'fall at high load, and judge them with flat_sf_threshold '
             'instead of sf_threshold (paper Appendix A.3).'),
    cfg.FloatOpt(
        'flat_sf_threshold', default=_DEFAULTS.flat_sf_threshold,
        min=0.01, max=0.99,
        mutable=True,
        help='Scheduling-frequency threshold used for VMs detected as '
             'MySQL-like when detect_flat_sf is enabled.'),
    cfg.FloatOpt(
        'pcu_low', default=_DEFAULTS.pcu_low, min=0.0, max=1.0,
        mutable=True,
        help='Lower bound of per-core utilization: the controller does not '
             'grow a VM whose per-core utilization after growing would fall '
             'below it.'),
    cfg.FloatOpt(
        'pcu_high', default=_DEFAULTS.pcu_high, min=0.0, max=1.0,
        mutable=True,
        help='Upper bound of per-core utilization: the controller does not '
             'shrink a VM whose per-core utilization after shrinking would '
             'exceed it, and grows a VM that is above it.'),
    cfg.FloatOpt(
        'emulator_util_high', default=_DEFAULTS.emulator_util_high,
        min=0.0, max=1.0,
        mutable=True,
        help='Utilization of the emulator pool above which it grows, to '
             'bring it back under emulator_util_low (paper Algorithm 1, '
             'where it is 0.70; a pool at the paper\'s marks held a core '
             'more than QoS needed on the simulator).'),
    cfg.FloatOpt(
        'emulator_util_low', default=_DEFAULTS.emulator_util_low,
        min=0.0, max=1.0,
        mutable=True,
        help='Utilization of the emulator pool below which it shrinks, as '
             'long as it stays under emulator_util_high (0.50 in the '
             'paper).'),
    cfg.FloatOpt(
        'emulator_saturation', default=_DEFAULTS.emulator_saturation,
        min=0.0, max=1.0,
        mutable=True,
        help='Occupancy of one guest\'s emulator, I/O and vhost threads '
             '(CPU time plus run delay, per thread) at or above which, '
             'while those threads wait for a CPU, they count as saturated: '
             'the emulator pool grows by a core once some guest was '
             'saturated on settle_time of the last twice settle_time '
             'seconds, and does not shrink while one is, whatever the '
             'pool\'s utilization: near saturation every wait lengthens '
             'their queue. 0 turns this off.'),
    cfg.FloatOpt(
        'emulator_util_overload', default=_DEFAULTS.emulator_util_overload,
        min=0.0, max=1.0,
        mutable=True,
        help='Utilization of the emulator pool that counts '
             'as full while guests hold fewer cores than they committed. '
             'Then the pool grows into their cores only from this mark up '
             '(or for saturated emulator threads), one core at a time, and '
             'gives a core back to a guest one core short that runs at '
             'this mark of every CPU it has, or to the probe of a guest '
             'denied one for want of an idle core (taken back if the '
             'probe does not keep it), while the pool one core smaller '
             'projects under it (or, at a size it has not measured, '
             'under one full core: it grows back if that size reads at or '
             'over this mark, and does not try it again under the same '
             'load). 0 turns this off and leaves the '
             'utilization band alone to size the pool.'),
    cfg.BoolOpt(
        'emulator_charge_excess', default=_DEFAULTS.emulator_charge_excess,
        mutable=True,
        help='Under overload, charge the emulator pool\'s demand beyond '
             'the guests\' fair shares (by flavor size) to the guests whose '
             'I/O exceeds their share: their committed vCPU demand is '
             'lowered by it, so that their own I/O comes out of their own '
             'claim. Off: that demand waits behind every guest\'s committed '
             'vCPU demand.'),
    cfg.IntOpt(
        'emulator_min_cores', default=_DEFAULTS.emulator_min_cores, min=0,
        help='Smallest size of the shared emulator pool, in allocation '
             'units (physical cores). 0 is for small hosts (under about 8 '
             'cores): while the pool has no core of its own, emulator, I/O '
             'and vhost threads share the idle pool\'s CPUs, or every '
             'managed CPU when the idle pool is empty too, and the pool '
             'gets a core once they would keep one emulator_util_high '
             'busy.'),
    cfg.IntOpt(
        'idle_pool_min_cores', default=_DEFAULTS.idle_pool_min_cores, min=0,
        help='Cores kept in the idle pool while any VM has no core of its '
             'own (parked, best-effort, or squeezed out under overload). 0 '
             'is for small hosts: such VMs then share every managed CPU '
             'when no core is free, so that one busy VM can hold them all.'),
    cfg.FloatOpt(
        'idle_pool_steal_max', default=_DEFAULTS.idle_pool_steal_max,
        min=0.0, max=0.999, mutable=True,
        help='The largest share of the parked VMs\' runnable time that '
             'their vCPU threads may spend waiting for a CPU of the idle '
             'pool (steal, measured by the host). Above it on '
             'confirm_samples ticks in a row the idle pool takes one more '
             'core, as committed demand: served after the active VMs\' '
             'committed cores, and counted as a shortfall when the host '
             'has none; under half of it for idle_after seconds (longer '
             'after a core given back was asked for again) it gives one '
             'back, never going below idle_pool_min_cores. For hosts '
             'whose idle_util parks VMs that still do work (0.05 is the '
             'value evaluated on the simulator); 0, the default, keeps '
             'the idle pool at idle_pool_min_cores while VMs share it.'),
    cfg.IntOpt(
        'samples_per_model', default=_DEFAULTS.samples_per_model,
        min=3, max=64,
        help='Number of most recent (util, sf) samples kept per VM and core '
             'count (paper Algorithm 2).'),
    cfg.IntOpt(
        'min_samples_to_fit', default=_DEFAULTS.min_samples_to_fit,
        min=3, max=64,
        help='Number of samples after which the quadratic model of a VM and '
             'core count is fitted.'),
    cfg.FloatOpt(
        'refit_error', default=_DEFAULTS.refit_error, min=0.0, max=1.0,
        mutable=True,
        help='Relative error between a new sample and the recorded or fitted '
             'value above which the model is refitted.'),
    cfg.FloatOpt(
        'util_resolution', default=_DEFAULTS.util_resolution,
        min=0.1, max=100.0,
        help='Width in utilization percent of the buckets that make two '
             'samples "the same utilization" (the paper\'s "u in SF[c]").'),
    cfg.FloatOpt(
        'sf_match_tolerance', default=_DEFAULTS.sf_match_tolerance,
        min=0.0, max=0.5, mutable=True,
        help='Relative utilization distance within which a recorded '
             'scheduling-frequency sample stands for another utilization '
             '(at least one and a half util_resolution buckets). The same '
             'load shows 7-15 % more utilization on one core fewer, so a '
             'fixed width makes the controller probe the same core count '
             'again. On an overloaded host, the fraction by which another '
             'VM\'s utilization per core must exceed a holder\'s before a '
             'core it holds changes hands.'),
    cfg.FloatOpt(
        'sample_max_age', default=_DEFAULTS.sample_max_age, min=1.0,
        mutable=True,
        help='Seconds after which a recorded sample is forgotten, so that a '
             'VM whose workload changes is learned again.'),
    cfg.FloatOpt(
        'idle_util', default=_DEFAULTS.idle_util, min=0.0, max=100.0,
        mutable=True,
        help='Utilization in percent below which a VM counts as idle.'),
    cfg.FloatOpt(
        'idle_after', default=_DEFAULTS.idle_after, min=0.0,
        mutable=True,
        help='Seconds a VM must stay below idle_util before it is parked in '
             'the idle pool.'),
    cfg.FloatOpt(
        'idle_after_max', default=_DEFAULTS.idle_after_max, min=0.0,
        mutable=True,
        help='Longest wait before a VM is parked again after it woke too '
             'soon. A VM woken sooner after its park than it waited to be '
             'parked (its few requests cost more among the idle pool\'s '
             'threads than on a core of its own) waits twice as long '
             'before its next park, up to this many seconds, instead of '
             'having its vCPUs taken offline and back every few seconds; '
             'one that stays parked that long waits idle_after again. '
             'Set it to idle_after (or lower) to park after idle_after '
             'always, as the paper does.'),
    cfg.FloatOpt(
        'be_sf_per_util', default=_DEFAULTS.be_sf_per_util, min=0.0,
        mutable=True,
        help='Scheduling frequency per utilization percent below which a '
             'busy VM is classified best-effort when its class is auto. LC '
             'services show hundreds to thousands (paper Fig. 6).'),
    cfg.FloatOpt(
        'classify_min_util', default=_DEFAULTS.classify_min_util, min=0.0,
        mutable=True,
        help='Utilization in percent a VM must reach before its class is '
             'inferred from scheduling frequency per utilization.'),
    cfg.IntOpt(
        'classify_samples', default=_DEFAULTS.classify_samples, min=1,
        mutable=True,
        help='Consecutive consistent ticks needed to change the inferred '
             'class of a VM.'),
    cfg.FloatOpt(
        'host_only_steal_max', default=_DEFAULTS.host_only_steal_max,
        min=0.001, max=0.999, mutable=True,
        help='For a guest managed host-only (no guest module, or one not '
             'trusted): the largest share of its vCPU threads\' runnable '
             'time spent waiting for a host CPU (steal), above what it '
             'steals with a CPU per vCPU, that it is left with; also the '
             'margin by which its runnable demand (utilization / (1 - '
             'steal)) may exceed the CPUs it has. Beyond either the guest '
             'grows; it is tried on one core fewer only while the excess '
             'steal is under half of this, and goes back if the smaller '
             'count is short. This is the margin over isolation that is '
             'accepted.'),
    cfg.FloatOpt(
        'drain_hold_max', default=_DEFAULTS.drain_hold_max, min=0.0,
        mutable=True,
        help='Longest time, in seconds, a grow waits while a VM works off a '
             'backlog: while it sends more bytes per byte received than it '
             'usually does (by more than sf_match_tolerance), its busy '
             'CPUs measure load that has already gone, such as a one-second '
             'burst\'s queue. Traffic is counted on the guest\'s NICs by '
             'libvirt; a guest without them is not affected. 0 turns the '
             'rule off.'),
    cfg.BoolOpt(
        'grow_to_traffic_demand', default=_DEFAULTS.grow_to_traffic_demand,
        mutable=True,
        help='Size the grow of a VM above pcu_high by the traffic it does '
             'not answer: while it sends fewer bytes per byte received than '
             'it usually does (by more than sf_match_tolerance), it serves '
             'only that share of its load, and its utilization divided by '
             'the share is taken as its demand. It then grows to the cores '
             'that demand needs in one move (at most its flavor size) '
             'instead of a core at a time. Traffic is counted on the '
             'guest\'s NICs by libvirt; a guest without them, or one '
             'managed host-only, is not affected.'),
    cfg.FloatOpt(
        'latency_slack', default=_DEFAULTS.latency_slack, min=0.05,
        max=0.95, mutable=True,
        help='QoS-target mode (guests whose flavor sets a latency target '
             'and that publish their tail latency): a guest is tried on '
             'one core fewer only while its latency is below this '
             'fraction of its target. Lower keeps more headroom and '
             'more cores; a trial that violates the target is reverted '
             'at once. Guests without a target, or without a fresh '
             'latency, are not affected.'),
    cfg.StrOpt(
        'be_policy', default=_DEFAULTS.be_policy,
        choices=[('idle-pool', 'Best-effort guests share the idle pool '
                  'at normal priority (the paper\'s design).'),
                 ('soak', 'Best-effort guests\' vCPU threads may run on '
                  'every managed CPU at idle scheduling priority (cgroup '
                  'cpu.idle = 1): they soak up cycles the latency-critical '
                  'pools leave idle and are preempted at once when a '
                  'latency-critical vCPU wakes. Needs a kernel with '
                  'cpu.idle (5.15 or later) and write access to the '
                  'guests\' cgroups, which the packaged systemd unit '
                  'does not give (see "BE soak mode" in the agent '
                  'documentation); the agent refuses to start without '
                  'them.')],
        help='Where the vCPU threads of best-effort guests run.'),
]


def register_opts(conf):
    conf.register_group(GROUP)
    conf.register_opts(OPTS, group=GROUP)


def list_opts():
    return {GROUP: OPTS}
