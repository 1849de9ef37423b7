"""What a policy did to the simulated cloud: per-step books and figures.

:class:`Series` collects one row per simulated step of one policy's
run; :func:`summarize` turns it into the figures operators judge a
policy by, all measured after the warm-up:

``vms_per_host``
    VMs hosted per host, time-averaged.
``lc_violation_share``
    LC VM-seconds in violation over LC VM-seconds hosted (the QoS
    budget is on this: at most :data:`QOS_BUDGET`).
``lc_violation_s_per_vm_hour``
    LC VM-seconds in violation per LC VM-hour hosted.
``boots_refused``
    Boot requests Nova answered with NoValidHost.
``migrations_per_host_day``
    Live migrations per host and simulated day.
``changes_per_vm_hour``
    vCPU online/offline changes per VM-hour hosted.
``held_cpus_per_host``
    Logical CPUs the hosts' policies held for the VMs, per host,
    time-averaged (Nova's default holds every CPU; UFO and DynIso what
    their pools hold).
``be_work_share``
    Best-effort work done over the work the BE VMs' busy threads asked
    for, each at a lone thread's pace on a CPU of its own (None without
    BE work): what the policy's LC protection and packing cost the
    batch tenants.
``violating_vms``
    LC VMs with any second in violation.
``worst_vm``, ``worst_vm_share``
    The LC VM with the most seconds in violation, and its share of them
    all (None without any): whether a policy's seconds are spread over
    its VMs or carried by one tenant.
``hosts_needed``
    Hosts of this size that carry the workload's demand (the VMs that
    asked to be alive, refused or not) at this policy's density, when it
    meets the budget, else None. When every VM that asked was hosted
    the cloud was not full and the density is a floor of what the
    policy can carry, so the figure is an upper bound
    (``hosts_needed_bound``).
"""

import dataclasses
import math

QOS_BUDGET = 0.01       # of LC VM-seconds in violation


@dataclasses.dataclass
class Series:
    """One policy's run, one entry per step (lists of equal length)."""

    policy: str
    hosts: int
    step_s: float
    warmup_s: float
    t: list = dataclasses.field(default_factory=list)
    hosted: list = dataclasses.field(default_factory=list)
    lc_hosted: list = dataclasses.field(default_factory=list)
    demand: list = dataclasses.field(default_factory=list)
    lc_violation_s: list = dataclasses.field(default_factory=list)
    changes: list = dataclasses.field(default_factory=list)
    refused: list = dataclasses.field(default_factory=list)
    migrations: list = dataclasses.field(default_factory=list)
    held_cpus: list = dataclasses.field(default_factory=list)
    be_work_s: list = dataclasses.field(default_factory=list)
    be_asked_s: list = dataclasses.field(default_factory=list)
    # vm_id -> LC violation seconds after the warm-up (VMs with any),
    # and the host and start of its first step with any.
    by_vm: dict = dataclasses.field(default_factory=dict)
    first_violation: dict = dataclasses.field(default_factory=dict)

    def add(self, t, hosted, lc_hosted, demand, lc_violation_s, changes,
            refused, migrations, held_cpus=0.0, be_work_s=0.0,
            be_asked_s=0.0, violations=()):
        self.t.append(float(t))
        self.hosted.append(int(hosted))
        self.lc_hosted.append(int(lc_hosted))
        self.demand.append(int(demand))
        self.lc_violation_s.append(float(lc_violation_s))
        self.changes.append(int(changes))
        self.refused.append(int(refused))
        self.migrations.append(int(migrations))
        self.held_cpus.append(float(held_cpus))
        self.be_work_s.append(float(be_work_s))
        self.be_asked_s.append(float(be_asked_s))
        if t >= self.warmup_s:
            for host, vm_id, seconds in violations:
                self.by_vm[vm_id] = self.by_vm.get(vm_id, 0.0) + seconds
                self.first_violation.setdefault(vm_id, (host, float(t)))

    def measured(self):
        """Indices of the steps after the warm-up."""
        return [i for i, t in enumerate(self.t) if t >= self.warmup_s]

    def to_dict(self):
        return dataclasses.asdict(self)


def summarize(series, budget=QOS_BUDGET):
    """The figures of a run (see the module's docstring), as a dict."""
    idx = series.measured()
    steps = len(idx)
    out = {'policy': series.policy, 'hosts': series.hosts,
           'measured_s': steps * series.step_s}
    if not steps:
        raise ValueError('no step after the %.0f s warm-up: simulate '
                         'longer' % series.warmup_s)

    def total(name):
        return sum(getattr(series, name)[i] for i in idx)

    step = series.step_s
    vm_s = total('hosted') * step
    lc_vm_s = total('lc_hosted') * step
    violation_s = total('lc_violation_s')
    days = steps * step / 86400.0
    density = total('hosted') / steps / series.hosts
    demand = total('demand') / steps
    share = violation_s / lc_vm_s if lc_vm_s else 0.0
    refused = total('refused')
    meets = share <= budget
    be_asked = total('be_asked_s')
    worst = worst_vms(series, 1)
    out.update(
        vms_per_host=density,
        demand_vms=demand,
        lc_vm_hours=lc_vm_s / 3600.0,
        lc_violation_share=share,
        lc_violation_s_per_vm_hour=(violation_s / (lc_vm_s / 3600.0)
                                    if lc_vm_s else 0.0),
        boots_refused=refused,
        migrations_per_host_day=total('migrations') / series.hosts / days,
        changes_per_vm_hour=(total('changes') / (vm_s / 3600.0)
                             if vm_s else 0.0),
        held_cpus_per_host=total('held_cpus') / steps / series.hosts,
        be_work_share=(total('be_work_s') / be_asked if be_asked
                       else None),
        violating_vms=len(series.by_vm),
        worst_vm=worst[0][0] if worst else None,
        worst_vm_share=(worst[0][1] / violation_s if worst and violation_s
                        else None),
        meets_budget=meets,
        hosts_needed=(math.ceil(demand / density - 1e-9)
                      if meets and density > 0 else None),
        boots_refused_total=sum(series.refused),
        hosts_needed_bound=total('hosted') >= total('demand'))
    return out


def worst_vms(series, count):
    """The ``count`` LC VMs with most violation seconds: (vm_id, s)."""
    ranked = sorted(series.by_vm.items(), key=lambda kv: (-kv[1], kv[0]))
    return [kv for kv in ranked[:count] if kv[1] > 0]


def percent_or_none(share):
    """A share as a percent with one decimal, or ``none`` if unknown."""
    return 'none' if share is None else '%.1f' % (100.0 * share)


def result_line(summary, workload):
    """The ``RESULT`` line of one policy's run."""
    needed = summary['hosts_needed']
    if needed is None:
        needed_text = 'none_within_budget'
    else:
        needed_text = '%s%d' % ('<=' if summary['hosts_needed_bound']
                                else '', needed)
    return ('RESULT cluster workload=%s policy=%s hosts=%d '
            'vms_per_host=%.2f lc_violation_pct=%.3f '
            'lc_violation_s_per_vm_hour=%.2f boots_refused=%d '
            'migrations_per_host_day=%.2f changes_per_vm_hour=%.2f '
            'held_cpus_per_host=%.1f be_work_pct=%s meets_budget=%s '
            'hosts_needed=%s violating_vms=%d worst_vm_pct=%s'
            % (workload, summary['policy'], summary['hosts'],
               summary['vms_per_host'], 100.0 * summary['lc_violation_share'],
               summary['lc_violation_s_per_vm_hour'],
               summary['boots_refused'], summary['migrations_per_host_day'],
               summary['changes_per_vm_hour'], summary['held_cpus_per_host'],
               percent_or_none(summary.get('be_work_share')),
               'yes' if summary['meets_budget'] else 'no', needed_text,
               summary['violating_vms'],
               percent_or_none(summary['worst_vm_share'])))


def compare(summaries, baseline_kind='default', ufo_kind='ufo-sched'):
    """The issue's claim, judged: UFO's density over Nova's default.

    The baseline is the ``baseline_kind`` run of highest ratio that meets
    the budget. UFO's is its ``ufo_kind`` run of highest density with no
    more LC violation VM-seconds per VM-hour than the baseline, the
    ratio an operator would choose; without one, its densest run within
    the budget. ``{...}`` with both, the gain in VMs per host (%) and
    whether UFO's violation seconds are no more than the baseline's;
    None for a side with no run within the budget.
    """
    def runs(kind):
        return [s for s in summaries if s['policy'].split('@')[0] == kind
                and s['meets_budget']]

    def per_hour(summary):
        return summary['lc_violation_s_per_vm_hour']

    base = max(runs(baseline_kind), default=None,
               key=lambda s: float(s['policy'].split('@')[1]))
    ufos = runs(ufo_kind)
    if base:
        ufos = [s for s in ufos if per_hour(s) <= per_hour(base)] or ufos
    ufo = max(ufos, default=None, key=lambda s: s['vms_per_host'])
    out = {'baseline': base and base['policy'], 'ufo': ufo and ufo['policy'],
           'gain_pct': None, 'violations_no_more': None}
    if base and ufo and base['vms_per_host'] > 0:
        out['gain_pct'] = 100.0 * (ufo['vms_per_host'] /
                                   base['vms_per_host'] - 1.0)
        out['violations_no_more'] = per_hour(ufo) <= per_hour(base)
        out['baseline_vms_per_host'] = base['vms_per_host']
        out['ufo_vms_per_host'] = ufo['vms_per_host']
        # The same arrivals for every policy: no gain beyond it shows.
        out['demand_vms_per_host'] = base['demand_vms'] / base['hosts']
    return out


def compare_line(comparison, workload):
    c = comparison
    if c['gain_pct'] is None:
        return ('RESULT cluster_gain workload=%s baseline=%s ufo=%s '
                'gain_pct=none' % (workload, c['baseline'] or 'none',
                                   c['ufo'] or 'none'))
    return ('RESULT cluster_gain workload=%s baseline=%s '
            'baseline_vms_per_host=%.2f ufo=%s ufo_vms_per_host=%.2f '
            'gain_pct=%.1f lc_violations_no_more=%s '
            'demand_vms_per_host=%.2f'
            % (workload, c['baseline'], c['baseline_vms_per_host'],
               c['ufo'], c['ufo_vms_per_host'], c['gain_pct'],
               'yes' if c['violations_no_more'] else 'no',
               c['demand_vms_per_host']))
