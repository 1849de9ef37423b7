"""An immutable picture of the agent after a tick, for the endpoint.

The loop builds one between ticks when the endpoint wants one
(:class:`~ufo_agent.service.metrics.MetricsServer`) and hands it over
with one reference assignment, so the HTTP thread never sees a
half-updated agent.
"""

import copy
import dataclasses

_IMMUTABLE = (str, int, float, bool, type(None))

# Why a plan keeps cores out of every pool (the snapshot's 'held').
HELD_HUNG = 'calls hang'        # a guest's libvirt calls have not returned
HELD_UNADOPTED = 'not adopted'  # a running domain the agent could not adopt
HELD_REASONS = (HELD_HUNG, HELD_UNADOPTED)
_FIELDS = {}                # dataclass -> its field names


def _record(status):
    """A flat dataclass as a dict, equal to ``dataclasses.asdict``'s.

    asdict copies every value deep, scalars included: for the status of
    every guest, every tick, that cost more than the controller's tick.
    Here only values that are not immutable scalars are copied.
    """
    names = _FIELDS.get(type(status))
    if names is None:
        names = _FIELDS[type(status)] = tuple(
            f.name for f in dataclasses.fields(status))
    values = vars(status)
    out = {}
    for name in names:
        value = values[name]
        out[name] = value if type(value) in _IMMUTABLE else \
            copy.deepcopy(value)
    return out


def build(agent, now):
    plan = agent.last_plan
    vms = []
    for uuid in sorted(agent.status):
        vms.append(_record(agent.status[uuid]))
    pools = {}
    if plan is not None:
        pools = {
            'managed_cores': plan.managed_cores,
            'vcpu_cores': sum(len(v.cores) for v in plan.vms.values()),
            'emulator_cores': len(plan.emulator_cores),
            'idle_cores': len(plan.idle_cores),
            'emulator_cpus': sorted(plan.emulator_cpus),
            'idle_cpus': sorted(plan.idle_cpus),
            'shared_cpus': sorted(plan.shared_cpus),
            # Empty on a host whose cores are all of one class.
            'little_cpus': sorted(agent.topology.cpus_of(
                agent.topology.little_core_ids)),
            'emulator_util': plan.emulator_util,
            'overloaded': plan.overloaded,
            'shortfall_cores': plan.shortfall_cores,
        }
    signal = getattr(agent, 'signal', None)
    return {
        'signal': dataclasses.asdict(signal) if signal is not None else None,
        'time': now,
        'ticks': agent.ticks,
        'invariant_violations': agent.invariant_violations,
        'tick_errors': agent.tick_errors,
        'host_only_fallbacks': agent.host_only_fallbacks,
        'rollbacks': agent.enforcer.rollbacks,
        'pin_repairs': agent.enforcer.pin_repairs,
        'enforcement_errors': dict(agent.enforcer.errors),
        'decisions': dict(agent.decisions),
        'decision_rules': [
            {'action': action, 'rule': rule, 'count': count}
            for (action, rule), count in sorted(agent.decision_rules.items())],
        # What the agent runs with (after a reload: SIGHUP).
        'config': {
            'agent': dataclasses.asdict(agent.settings),
            'controller': dataclasses.asdict(agent.controller.config),
        },
        'tick_seconds': agent.tick_seconds,
        'tick_seconds_sum': agent.tick_seconds_sum,
        'dry_run': agent.settings.dry_run,
        'cores_saved': agent.cores_saved(),
        'pools': pools,
        # Cores no pool may take: hung guests' threads ('emulator': the
        # emulator threads of all hung guests) and unadopted domains.
        'held': [{'owner': owner, 'reason': reason, 'cores': list(cores)}
                 for owner, reason, cores in getattr(agent, 'held', ())],
        'vms': vms,
    }
