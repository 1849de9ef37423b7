"""Test-only: the real ufo-agent with faults injected at libvirt's pins.

Not part of ufo-agent. ``python -m ufo_agent.tests.functional.fault_runner
--config-file ...`` runs :func:`ufo_agent.cmd.agent.main` unchanged (the
real configuration, driver, loop and enforcer) with libvirt-python's
``virDomain.pinVcpuFlags``, ``pinEmulator`` and ``pinIOThread`` wrapped.
The pin calls made while the agent enforces a plan (not those that give
guests back when it stops) are numbered from 1.

``UFO_FAULT`` says what happens at call N:

``kill-before:N``
    SIGKILL instead of the call.
``kill-after:N``
    SIGKILL right after the call returned.
``error-before:N``
    A ``libvirtError`` instead of the call (libvirt refused).
``error-after:N``
    The call is made, then a ``libvirtError`` (its answer was lost).
``step``
    No fault: SIGSTOP after every call, so the test can look.

With ``error-*`` the process stops itself (SIGSTOP) at the fault and again
at the end of that enforcement pass; the test looks and sends SIGCONT.

``UFO_FAULT_JOURNAL`` names a file that gets one JSON line per plan (as
the controller made it, before it is enforced), per pin call (before it
is made, with the enforcer's ledger at that moment and the pinning the
enforcer is writing) and per stop. Lines are flushed before any signal,
so a SIGKILL loses none.
"""

import json
import os
import signal
import sys

import libvirt

from ufo_agent.cmd import agent as agent_cmd
from ufo_agent.controller import controller as controller_mod
from ufo_agent.service import enforcer as enforcer_mod
from ufo_agent.service import loop as loop_mod

PIN_CALLS = ('pinVcpuFlags', 'pinEmulator', 'pinIOThread')


class _State:
    fault = None          # 'kill-before', ..., 'step' or None
    at = 0                # the call number of the fault
    calls = 0
    passes = 0
    enforcing = False     # inside Enforcer.apply, not stopping
    enforcer = None
    writing = None        # (key, pool, cpus) the enforcer is pinning
    fired_in_pass = None
    journal = None


STATE = _State()


def _cpus(cpumap):
    return sorted(cpu for cpu, on in enumerate(cpumap) if on)


def _record(**entry):
    if STATE.journal is not None:
        STATE.journal.write(json.dumps(entry, sort_keys=True) + '\n')
        STATE.journal.flush()


def _ledger():
    enf = STATE.enforcer
    if enf is None:
        return {}
    out = {}
    for uuid, kind in enf.ledger.keys():
        entry = enf.ledger.get((uuid, kind))
        out['%s/%s' % (uuid, kind)] = {
            'parts': [[pool, sorted(cpus)] for pool, cpus in entry.parts],
            'exact': entry.exact}
    return out


def _writing():
    if STATE.writing is None:
        return None
    key, pool, cpus = STATE.writing
    return {'key': '%s/%s' % key, 'pool': pool, 'cpus': sorted(cpus)}


def _stop(why):
    _record(stopped=why, call=STATE.calls, ledger=_ledger(),
            writing=_writing(), **{'pass': STATE.passes})
    os.kill(os.getpid(), signal.SIGSTOP)


def _plan_json(plan):
    return {
        'vms': {uuid: {'cores': sorted(vm.cores), 'cpus': sorted(vm.cpus),
                       'mode': vm.mode.value}
                for uuid, vm in plan.vms.items()},
        'emulator_cores': sorted(plan.emulator_cores),
        'emulator_cpus': sorted(plan.emulator_cpus),
        'idle_cpus': sorted(plan.idle_cpus),
        'shared_cpus': sorted(plan.shared_cpus),
    }


def _wrap_pin(name):
    original = getattr(libvirt.virDomain, name)

    def pin(dom, *args):
        if not STATE.enforcing:
            return original(dom, *args)
        STATE.calls += 1
        number = STATE.calls
        cpumap = args[0] if name == 'pinEmulator' else args[1]
        kind = 'vcpu' if name == 'pinVcpuFlags' else 'emulator'
        fault = STATE.fault if number == STATE.at else None
        _record(call=number, what=name, uuid=dom.UUIDString(), kind=kind,
                index=None if name == 'pinEmulator' else args[0],
                cpus=_cpus(cpumap), fault=fault, ledger=_ledger(),
                writing=_writing(), **{'pass': STATE.passes})
        if fault == 'kill-before':
            os.kill(os.getpid(), signal.SIGKILL)
        if fault == 'error-before':
            STATE.fired_in_pass = STATE.passes
            _stop('fault')
            raise libvirt.libvirtError('injected error before %s' % name)
        result = original(dom, *args)
        if fault == 'kill-after':
            os.kill(os.getpid(), signal.SIGKILL)
        if fault == 'error-after':
            STATE.fired_in_pass = STATE.passes
            _stop('fault')
            raise libvirt.libvirtError('injected error after %s' % name)
        if STATE.fault == 'step':
            _stop('step')
        return result

    setattr(libvirt.virDomain, name, pin)


def install():
    spec = os.environ.get('UFO_FAULT', '')
    if spec:
        fault, _, at = spec.partition(':')
        if fault not in ('kill-before', 'kill-after', 'error-before',
                         'error-after', 'step'):
            raise SystemExit('fault_runner: bad UFO_FAULT=%r' % spec)
        STATE.fault, STATE.at = fault, int(at or 0)
    path = os.environ.get('UFO_FAULT_JOURNAL')
    if path:
        STATE.journal = open(path, 'a')
    for name in PIN_CALLS:
        _wrap_pin(name)

    tick = controller_mod.Controller.tick

    def controller_tick(self, *args, **kwargs):
        plan = tick(self, *args, **kwargs)
        _record(plan=_plan_json(plan), **{'pass': STATE.passes + 1})
        return plan

    controller_mod.Controller.tick = controller_tick

    apply = enforcer_mod.Enforcer.apply

    def enforcer_apply(self, plan, guest_online=None):
        STATE.enforcer = self
        STATE.passes += 1
        STATE.enforcing = True
        try:
            return apply(self, plan, guest_online)
        finally:
            STATE.enforcing = False
            if STATE.fired_in_pass == STATE.passes:
                _stop('pass-end')

    enforcer_mod.Enforcer.apply = enforcer_apply

    pin = enforcer_mod.Enforcer._pin

    def enforcer_pin(self, key, pool, cpus, failed):
        STATE.writing = (key, pool, frozenset(cpus))
        try:
            return pin(self, key, pool, cpus, failed)
        finally:
            STATE.writing = None

    enforcer_mod.Enforcer._pin = enforcer_pin

    stop = loop_mod.Agent.stop

    def agent_stop(self):
        STATE.enforcing = False
        _record(stopping=True)
        return stop(self)

    loop_mod.Agent.stop = agent_stop


if __name__ == '__main__':
    install()
    sys.exit(agent_cmd.main())
