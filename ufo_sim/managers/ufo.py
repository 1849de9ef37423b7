"""UFO: the real ufo-agent, unmodified, driving the simulated host.

The agent loop (and in it the controller, sampler and enforcer) runs
against :class:`~ufo_sim.driver.SimDriver` on simulated time: its clock
is the host's in real-world seconds (:class:`~ufo_sim.driver.SimDriver`
undoes the engine's time dilation), and it ticks once per such second,
as it does on a real host. It manages every CPU of the
budget host and starts, like a freshly started agent, with nothing
learned.
"""

from ufo_agent.controller import config as controller_config
from ufo_agent.service import loop
from ufo_agent.service import settings as settings_mod
from ufo_sim import driver as sim_driver
from ufo_sim.managers import cell as cell_mod
from ufo_sim.managers import scenario

NAME = 'ufo'
# The same agent for guests without the guest module: nothing is read
# from the guest, every sample is host-only (issue 15 item 1).
HOST_ONLY_NAME = 'ufo-host-only'


class UfoAgent:
    """An :class:`~ufo_agent.service.loop.Agent` bound to one scene."""

    def __init__(self, scene, config=None, vm_class='lc', channel=True,
                 qos_target=False):
        """``vm_class``: one class for every VM, or one per VM.

        ``qos_target``: every guest's flavor has its profile's QoS target
        as its p99 target, and software in the guest publishes the p99 of
        each second's requests (:meth:`tick`). Both are in real
        microseconds (the simulated ones over the time scale), as the
        agent's clock.
        """
        self.scene = scene
        self.driver = sim_driver.SimDriver(scene.host)
        self.qos_target = qos_target
        classes = ([vm_class] * len(scene.vms)
                   if isinstance(vm_class, str) else list(vm_class))
        for i, vm in enumerate(scene.vms):
            target = None
            if qos_target:
                target = self.driver.real_us(scene.profiles[i].qos_p99_us)
            self.driver.add(vm, scene.vcpus[i], vm_class=classes[i],
                            channel=channel, latency_target_us=target)
        managed = self.driver.all_cpus
        self.agent = loop.Agent(
            self.driver, managed,
            config or controller_config.ControllerConfig(),
            settings_mod.AgentSettings(), clock=self.driver.now,
            sleep=self.driver.sleep)
        self.agent.start()

    def held_cpus(self):
        """Logical CPUs in the VM pools and the emulator pool now."""
        plan = self.agent.last_plan
        if plan is None:
            return len(self.driver.all_cpus)
        cpus = set(plan.emulator_cpus)
        for vm in plan.vms.values():
            cpus |= vm.cpus if vm.cores else set()
        return len(cpus)

    def tick(self, latencies=None):
        """One agent tick; ``latencies``: per VM, those of the last second.

        In QoS-target mode each guest first publishes their p99; one that
        completed no request publishes nothing.
        """
        if self.qos_target:
            for vm, values in zip(self.scene.vms, latencies or ()):
                if len(values):
                    self.driver.publish_latency(
                        vm, self.driver.real_us(scenario.p99(values)))
        return self.agent.tick()


# The paper's controller where the agent's defaults depart from it
# (doc/source/controller.rst): a move on every settled sample, and the
# emulator pool's 70 / 50 % band. For reproducing the paper's runs.
PAPER_RULES = (('confirm_samples', 1), ('emulator_util_high', 0.70),
               ('emulator_util_low', 0.50), ('idle_after_max', 0.0))


def config_of(settings):
    """The controller's configuration: defaults plus what-if overrides."""
    return controller_config.ControllerConfig(**dict(settings.ufo_config))


def evaluate(cell, settings):
    return _evaluate(NAME, cell, settings, channel=True)


def evaluate_host_only(cell, settings):
    return _evaluate(HOST_ONLY_NAME, cell, settings, channel=False)


def _evaluate(name, cell, settings, channel):
    # Both run the same scene (the cell's host seed), so they differ only in
    # what the agent can read.
    scene = scenario.build(cell, settings, cell.host_seed(settings.seed))
    # A guest without the guest module publishes no latency.
    ufo = UfoAgent(scene, config_of(settings), channel=channel,
                   qos_target=settings.qos_target and channel)
    window, held = scenario.run_feedback(
        scene, settings, ufo.held_cpus, lambda now, lat: ufo.tick(lat))
    plan = ufo.agent.last_plan
    stats = scenario.held_stats(held, window.ticks)
    return cell_mod.CellResult(
        name, cell.key, stats['cpus_max'], window.all_ok, window.p99_us,
        {'vm_cores': [len(plan.vms[vm].cores) for vm in scene.vms],
         'emulator_cores': len(plan.emulator_cores),
         'online': [plan.vms[vm].online_vcpus for vm in scene.vms],
         'overloaded': plan.overloaded,
         'sim_seconds': (settings.converge + settings.judge) *
         settings.tick}, **stats)
