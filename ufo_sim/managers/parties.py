"""DynIso's feedback loop: PARTIES-style core resizing on tail latency.

Pure decision logic; :mod:`ufo_sim.managers.dyniso` feeds it one p99
measurement per VM and interval and applies what it returns. The rules
follow PARTIES (ASPLOS'19), reduced to one resource (cores):

* a VM whose p99 exceeds its QoS target gets one more core, taken from
  the free cores, else from the VM with the most latency slack;
* when every VM meets QoS, the VM with the most slack (p99 under
  ``(1 - slack) x target``) gives one core back, one VM per interval;
* a downsize that breaks QoS is reverted, and that VM is not shrunk below
  the reverted count again for ``backoff`` seconds (120 by default:
  longer than a grid run, so under constant load the ideal DynIso never
  repeats a probe that failed, and under changing load it tries again);
* a VM is left alone for ``settle`` seconds after a change, because the
  latency measured across a change describes neither allocation.
"""

import dataclasses
import math


@dataclasses.dataclass
class _VmState:
    cores: int
    max_cores: int
    qos: float
    changed_at: float = -math.inf
    last_move: int = 0
    floor: int = 1
    floor_until: float = -math.inf


class PartiesLoop:
    """Core counts for a set of isolated VMs sharing ``budget`` cores."""

    def __init__(self, budget, vms, slack=0.2, settle=2.0, backoff=120.0):
        """Set up the loop.

        ``vms`` maps a name to (initial cores, max cores, QoS target).
        """
        if sum(v[0] for v in vms.values()) > budget:
            raise ValueError('initial allocation exceeds the budget')
        self.budget = budget
        self.slack = slack
        self.settle = settle
        self.backoff = backoff
        self.vms = {name: _VmState(c, m, q)
                    for name, (c, m, q) in sorted(vms.items())}

    def cores(self):
        return {name: vm.cores for name, vm in self.vms.items()}

    def add(self, name, cores, max_cores, qos, now):
        """A VM joins with ``cores``; settles like one just resized."""
        if name in self.vms:
            raise ValueError('VM %r is already in the loop' % (name,))
        self.vms[name] = _VmState(cores, max_cores, qos, changed_at=now)

    def remove(self, name):
        """A VM leaves; its cores are free."""
        self.vms.pop(name, None)

    def free(self):
        return self.budget - sum(vm.cores for vm in self.vms.values())

    def step(self, now, p99):
        """One interval: ``p99`` maps name to its p99 (inf: no answers).

        Returns the new core counts (name -> cores).
        """
        settled = {n for n, vm in self.vms.items()
                   if now - vm.changed_at >= self.settle - 1e-9 and
                   n in p99}
        ratio = {n: p99[n] / self.vms[n].qos for n in settled}
        violators = sorted((n for n in settled if ratio[n] > 1.0),
                           key=lambda n: (-ratio[n], n))
        for name in violators:
            vm = self.vms[name]
            if vm.last_move < 0 and \
                    now - vm.changed_at <= self.settle + 1.0 + 1e-9:
                # The last downsize broke QoS: go back, stop trying.
                vm.floor = vm.cores + 1
                vm.floor_until = now + self.backoff
            if vm.cores >= vm.max_cores:
                continue
            if self.free() <= 0 and not self._reclaim(now, ratio, name):
                continue
            self._move(name, +1, now)
        if violators or any(n not in settled for n in self.vms):
            return self.cores()
        donors = [n for n in settled if self._may_shrink(n, now, ratio)]
        if donors:
            name = min(donors, key=lambda n: (ratio[n], n))
            self._move(name, -1, now)
        return self.cores()

    def _may_shrink(self, name, now, ratio):
        vm = self.vms[name]
        floor = vm.floor if now < vm.floor_until else 1
        return vm.cores > floor and ratio[name] < 1.0 - self.slack

    def _reclaim(self, now, ratio, taker):
        donors = [n for n in ratio
                  if n != taker and self._may_shrink(n, now, ratio)]
        if not donors:
            return False
        self._move(min(donors, key=lambda n: (ratio[n], n)), -1, now)
        return True

    def _move(self, name, delta, now):
        vm = self.vms[name]
        vm.cores += delta
        vm.last_move = delta
        vm.changed_at = now
