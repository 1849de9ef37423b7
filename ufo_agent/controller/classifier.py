"""What kind of VM is this: idle, best-effort, or MySQL-like LC?

Paper section 4.2 parks idle VMs (utilization below 1% for a while) in the
idle pool; section 3.5 and Fig. 6 show best-effort VMs have scheduling
frequency per unit of utilization orders of magnitude below LC ones;
Appendix A.3 shows MySQL-like VMs, whose SF does not fall at high load.
"""

from ufo_agent.controller import backoff
from ufo_agent.controller.plan import VmClass


class IdleDetector:
    """Says when a VM has been idle long enough to park.

    A VM is parked after ``idle_after`` seconds below the idle mark. A
    parked VM wakes after ``confirm_samples`` busy samples in a row, so
    that a guest's housekeeping blip does not buy it cores. One that
    wakes sooner after its park than it waited to be parked (a VM whose
    few requests cost more among the idle pool's threads than on a core
    of its own, over the mark there and under it here) waits twice as
    long before its next park, up to ``idle_after_max``: otherwise it
    would be parked and woken, its vCPUs taken offline and back, every
    few seconds. One that stays parked that long starts again from
    ``idle_after``.
    """

    def __init__(self, config):
        self.config = config
        self.idle_since = None
        self.busy_streak = 0
        self._quiet = False
        self._wait = backoff.DoublingWait()
        self._parked_at = None
        self._parked_for = None     # the wait its last park came after

    def wait(self):
        """Seconds below the idle mark before this VM is parked."""
        return self._wait.seconds(self.config)

    def update(self, util, now):
        """Feed one sample; return True while the VM counts as idle."""
        if util >= self.config.idle_util:
            self.idle_since = None
            self.busy_streak += 1
            if self.woke():
                self._quiet = False
            return False
        self.busy_streak = 0
        self._quiet = True
        if self.idle_since is None:
            self.idle_since = now
        return now - self.idle_since >= self.wait()

    def parks_at(self):
        """When the VM's quiet run reaches its wait, or None if it is busy."""
        if self.idle_since is None:
            return None
        return self.idle_since + self.wait()

    def parked(self, now):
        """The VM was parked at ``now``."""
        self._parked_at, self._parked_for = now, self.wait()

    def woken(self, now):
        """The VM was woken at ``now``: its next park waits accordingly."""
        if self._parked_at is None:
            return
        if now - self._parked_at < self._parked_for:
            self._wait.double(self.config)
        else:
            self._wait.reset()
        self._parked_at = None

    def woke(self):
        """True once the last samples fed were busy long enough to wake."""
        return self.busy_streak >= self.config.confirm_samples

    def quiet(self):
        """True while the VM looks idle, not yet parked.

        From a sample below the idle mark until enough busy samples follow
        to wake a parked VM; a VM never seen idle is not quiet.
        """
        return self._quiet


class ClassInference:
    """Infers LC or BE for a VM whose class hint is ``auto``.

    A class changes only after ``classify_samples`` consecutive busy
    samples agree, so one odd second cannot move a VM between pools.
    """

    def __init__(self, config, hint):
        self.config = config
        self.hint = VmClass(hint)
        self.current = VmClass.BE if self.hint == VmClass.BE else VmClass.LC
        self._streak = 0

    def update(self, util, sf):
        if self.hint != VmClass.AUTO:
            return self.current
        if util < self.config.classify_min_util:
            self._streak = 0
            return self.current
        looks = (VmClass.BE if sf / util < self.config.be_sf_per_util
                 else VmClass.LC)
        if looks == self.current:
            self._streak = 0
        else:
            self._streak += 1
            if self._streak >= self.config.classify_samples:
                self.current = looks
                self._streak = 0
        return self.current


def is_flat_sf(model, pcpus_per_core, config, min_r2=0.8):
    """True if a fitted curve shows SF still rising at high load.

    Needs a good fit (R^2 >= ``min_r2``) whose samples reach per-core
    utilization halfway between ``pcu_low`` and ``pcu_high``, past the knee
    where an LC service's SF turns down: only then does "SF has not turned
    down yet" say something about the workload rather than about missing
    samples.
    """
    for cores, curve in model.fitted().items():
        if curve.r2 < min_r2:
            continue
        utils = [s.util for s in model.samples.get(cores, {}).values()]
        if not utils:
            continue
        top = max(utils)
        knee = (config.pcu_low + config.pcu_high) / 2.0
        if top < knee * 100.0 * cores * pcpus_per_core:
            continue
        if curve.slope(top) >= 0.0:
            return True
    return False
