"""A host with a written-down rule, for the cloud loop's bookkeeping tests.

Not a host model: it has :class:`~ufo_sim.cluster.host.ClusterHost`'s
calls and answers (its ``HostStep``) and a rule a test can work out by
hand, so that the tests of the loop (Nova's books against the hosts',
refused boots, the trait, the migrations, sharding) do not depend on
what a real host's QoS is.

The rule: the host's demand is the sum over its VMs of load x vCPUs, in
cores (SMT siblings add nothing). Under ``default`` each LC VM is in
violation for the whole step when demand exceeds half the host's cores;
under ``dyniso`` and ``ufo`` when it exceeds all of them. A ``ufo`` host
signals OVERLOADED (unmet = the excess, rounded up) above its cores,
else UNDERLOADED with its unused cores idle, and counts one vCPU change
per VM whose load crossed 0.5.
"""

import math

from ufo_agent import hostsignal
from ufo_sim.cluster import host as host_mod


class ScriptedHost:
    log = None      # when a list: (host, op, vm_id) of every call

    def __init__(self, name, cores, smt, policy, seed, fidelity='engine',
                 config=None, qos_target=False):
        self.name, self.policy = name, policy
        self.cores = cores
        self.vms = {}
        self.high = {}
        self.now = 0.0
        self._signal = None

    def boot(self, request):
        if request.vm_id in self.vms:
            raise ValueError('VM %s is already on %s' % (request.vm_id,
                                                         self.name))
        self.vms[request.vm_id] = request
        self.high[request.vm_id] = False
        if ScriptedHost.log is not None:
            ScriptedHost.log.append((self.name, 'boot', request.vm_id))

    def delete(self, vm_id):
        del self.vms[vm_id]
        del self.high[vm_id]
        if ScriptedHost.log is not None:
            ScriptedHost.log.append((self.name, 'delete', vm_id))

    def step(self, seconds, loads):
        demand = sum(loads.get(v, 0.0) * r.vcpus
                     for v, r in self.vms.items())
        limit = self.cores / 2.0 if self.policy == 'default' else self.cores
        bad = demand > limit
        out = {}
        for vm_id, r in self.vms.items():
            high = loads.get(vm_id, 0.0) > 0.5
            changes = int(self.policy == 'ufo' and high != self.high[vm_id])
            self.high[vm_id] = high
            out[vm_id] = host_mod.VmStep(
                vm_id, r.lc, 'scripted', seconds,
                seconds if (bad and r.lc) else 0, (), changes)
        self.now += seconds
        if self.policy == 'ufo':
            over = demand > self.cores
            idle = max(0, int(self.cores - math.ceil(demand)))
            self._signal = hostsignal.HostSignal(
                state=(hostsignal.OVERLOADED if over
                       else hostsignal.UNDERLOADED),
                idle_cores=0 if over else idle,
                reclaimable_cores=0 if over else idle,
                managed_cores=self.cores,
                unmet_cores=math.ceil(demand - self.cores) if over else 0,
                sequence=int(self.now), timestamp=self.now, source='agent')
        return host_mod.HostStep(self.name, self.now - seconds, seconds, out,
                                 (min(self.cores, demand),) * seconds)

    def signal(self):
        return self._signal
