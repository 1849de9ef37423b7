"""Live migration as the libvirt driver sees it, over a fake libvirt.

On the destination, Nova persists the source's live XML (``<vcpu cpuset>``
rewritten for the destination): ufo-agent's live pins from the source and
its channel device come along, and QEMU maps the channel's page, whose
content migrated with the guest's memory.
"""

from ufo_agent.channel import host_channel
from ufo_agent.channel import layout
from ufo_agent.driver import base
from ufo_tools.fakes.fakehost import nova_xml
from ufo_tools.fakes import fakelibvirt as lv

U1 = '8f1d3c2e-1111-4a5b-9c0d-2e3f4a5b6c7d'
E = base.GuestEvent
CHANNEL = ("<shmem name='ufo-%s' role='master'><model type='ivshmem-plain'/>"
           "<size unit='M'>1</size></shmem>" % U1)


def _arriving(host, hv):
    """The destination's view while the migration's memory copy runs."""
    xml = nova_xml(U1, cpuset='4-7', vcpupins={0: '1', 1: '1'},
                   emulatorpin='2').replace('</devices>',
                                            CHANNEL + '</devices>')
    dom = host.boot(U1, xml, pid=500)
    dom.vcpu_pins = {0: (False, True) + (False,) * 6,
                     1: (False, True) + (False,) * 6}
    dom.emulator_pin = (False, False, True) + (False,) * 5
    dom.paused = lv.VIR_DOMAIN_PAUSED_MIGRATION
    # QEMU created the page; the source's host area came with the memory.
    page = host_channel.HostChannel(str(host.shm / ('ufo-' + U1)), 2)
    page.initialize()
    for target in (1, 2, 1):
        page.set_target(target)
    page.close()
    return dom


def test_an_arriving_guest_is_adopted_when_it_runs_with_its_channel(
        host, hv):
    dom = _arriving(host, hv)
    driver = host.driver(attach_channels=True)
    assert driver.guests() == []            # not while it migrates in
    dom.paused = None
    hv.conn.fire_lifecycle(dom, lv.VIR_DOMAIN_EVENT_RESUMED,
                           lv.VIR_DOMAIN_EVENT_RESUMED_MIGRATED)
    [guest] = driver.guests()
    # Managed: the source's pins in the definition are ufo-agent's; what
    # to restore is what Nova wrote for this host.
    assert guest.restore_vcpu_cpus == frozenset(range(4, 8))
    assert guest.restore_emulator_cpus == frozenset(range(4, 8))
    assert guest.restore_vcpus == {0: frozenset(range(4, 8)),
                                   1: frozenset(range(4, 8))}
    # The page it brought is used as it is, not attached a second time,
    # and its target sequence goes on: the source's last target (1) is
    # not this agent's, every vCPU is asked for until it decides.
    assert guest.has_channel
    assert not [c for c in hv.calls if c[1] == 'attachDeviceFlags']
    page = host_channel.HostChannel(str(host.shm / ('ufo-' + U1)), 2)
    assert (page.target, page.target_seq) == (0, 0)    # not initialized
    host_area = layout.unpack(layout.HOST_FIELDS, layout.HOST_STRUCT,
                              page.read_raw()[layout.HOST_OFFSET:
                                              layout.HOST_OFFSET +
                                              layout.HOST_SIZE])
    page.close()
    assert (host_area['target_vcpus'], host_area['target_seq']) == (2, 4)
    assert driver.set_vcpu_target(U1, 2) == 5
    # The live pins are the source's: the agent reads them as they are.
    assert driver.read_pins(U1) == (frozenset([frozenset([1])]),
                                    frozenset([2]))
    # Releasing it restores the destination's pins.
    driver.release(U1)
    assert dom.vcpu_pins[0][4:8] == (True,) * 4 and not dom.vcpu_pins[0][1]


def test_the_source_forgets_the_guest_and_its_page(host, hv):
    dom = host.boot(U1, nova_xml(U1), pid=500)
    driver = host.driver(attach_channels=True)
    driver.guests()
    page = host.shm / ('ufo-' + U1)
    assert page.exists()
    dom.paused = lv.VIR_DOMAIN_PAUSED_MIGRATION
    hv.conn.fire_lifecycle(dom, lv.VIR_DOMAIN_EVENT_SUSPENDED,
                           lv.VIR_DOMAIN_EVENT_SUSPENDED_MIGRATED)
    dom.running = False
    hv.conn.fire_lifecycle(dom, lv.VIR_DOMAIN_EVENT_STOPPED,
                           lv.VIR_DOMAIN_EVENT_STOPPED_MIGRATED)
    del hv.domains[U1]
    hv.conn.fire_lifecycle(dom, lv.VIR_DOMAIN_EVENT_UNDEFINED)
    assert driver.events() == [(U1, E.UNDEFINED)]
    driver.forget(U1)                   # what the loop does on UNDEFINED
    assert not page.exists()


def test_the_destination_moves_the_sources_pins_off_its_other_cpus_at_once(
        host, hv, monkeypatch):
    """The source's CPU numbers may be the destination's dedicated ones.

    Here the destination manages 4-7 (0-3 are Nova's dedicated or the
    host's); the guest arrives pinned to the source's 1 and 2. The tick
    after it runs, every thread is on the destination's managed CPUs.
    """
    from ufo_agent.controller import ControllerConfig
    from ufo_agent.service import loop
    monkeypatch.setattr('os.cpu_count', lambda: 8)
    dom = _arriving(host, hv)
    managed = frozenset(range(4, 8))
    agent = loop.Agent(host.driver(attach_channels=True,
                                   managed_cpus=managed),
                       managed, ControllerConfig())
    agent.start()
    agent.tick()
    assert agent.guests == {}
    assert dom.vcpu_pins[0][1] and dom.emulator_pin[2]
    dom.paused = None
    hv.conn.fire_lifecycle(dom, lv.VIR_DOMAIN_EVENT_RESUMED,
                           lv.VIR_DOMAIN_EVENT_RESUMED_MIGRATED)
    plan = agent.tick()
    assert U1 in agent.guests

    def cpus(bits):
        return {i for i, on in enumerate(bits) if on}
    assert all(cpus(bits) == plan.vms[U1].cpus
               for bits in dom.vcpu_pins.values())
    assert cpus(dom.emulator_pin) == plan.emulator_cpus <= managed
