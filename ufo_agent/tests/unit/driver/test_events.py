"""The libvirt driver's connection and lifecycle events, over a fake libvirt.
"""

import sys

import pytest

from ufo_agent.driver import base
from ufo_agent.tests.unit.driver import conftest
from ufo_tools.fakes.fakehost import nova_xml
from ufo_tools.fakes import fakelibvirt as lv

U1 = '8f1d3c2e-1111-4a5b-9c0d-2e3f4a5b6c7d'
U2 = '3b7e0a52-6c1d-4f0e-a9b8-7d6c5b4a3f2e'
E = base.GuestEvent


@pytest.mark.parametrize('event,expected', [
    (lv.VIR_DOMAIN_EVENT_STARTED, E.STARTED),
    (lv.VIR_DOMAIN_EVENT_RESUMED, E.RESUMED),
    (lv.VIR_DOMAIN_EVENT_STOPPED, E.STOPPED),
    (lv.VIR_DOMAIN_EVENT_SUSPENDED, E.PAUSED),
    (lv.VIR_DOMAIN_EVENT_UNDEFINED, E.UNDEFINED),
    (lv.VIR_DOMAIN_EVENT_SHUTDOWN, None),       # STOPPED follows
    (lv.VIR_DOMAIN_EVENT_DEFINED, None),
    (lv.VIR_DOMAIN_EVENT_PMSUSPENDED, None),
    (lv.VIR_DOMAIN_EVENT_CRASHED, None),
])
def test_lifecycle_events_map_to_guest_events(host, hv, event, expected):
    dom = hv.add(U1, nova_xml(U1))
    driver = host.driver()
    hv.conn.fire_lifecycle(dom, event)
    assert driver.events() == ([(U1, expected)] if expected else [])
    assert driver.events() == []


def test_reboot_event_is_reported(host, hv):
    dom = hv.add(U1, nova_xml(U1))
    driver = host.driver()
    hv.conn.fire_reboot(dom)
    assert driver.events() == [(U1, E.REBOOTED)]


def test_connecting_registers_both_callbacks_and_keepalive(host, hv):
    host.driver()
    assert len(hv.connections) == 1
    assert hv.conn.uri == 'qemu:///system'
    assert set(hv.conn.callbacks) == {lv.VIR_DOMAIN_EVENT_ID_LIFECYCLE,
                                      lv.VIR_DOMAIN_EVENT_ID_REBOOT}
    assert hv.conn.keepalive == (5, 3)


def test_events_keep_their_order_across_guests(host, hv):
    one = hv.add(U1, nova_xml(U1))
    two = hv.add(U2, nova_xml(U2, name='instance-0000002b'))
    driver = host.driver()
    hv.conn.fire_lifecycle(two, lv.VIR_DOMAIN_EVENT_STARTED)
    hv.conn.fire_reboot(one)
    hv.conn.fire_lifecycle(one, lv.VIR_DOMAIN_EVENT_SUSPENDED)
    assert driver.events() == [(U2, E.STARTED), (U1, E.REBOOTED),
                               (U1, E.PAUSED)]


def test_stop_seen_by_callback_and_poll_is_one_event(host, hv):
    dom = host.boot(U1, nova_xml(U1), pid=500)
    driver = host.driver()
    assert [g.uuid for g in driver.guests()] == [U1]
    assert driver.events() == []        # adoption is not an event
    dom.running = False                 # shut off, still defined
    hv.conn.fire_lifecycle(dom, lv.VIR_DOMAIN_EVENT_STOPPED)
    assert driver.guests() == []        # the poll sees it too
    assert driver.events() == [(U1, E.STOPPED)]
    assert driver.events() == []


def test_stop_of_a_domain_that_no_longer_exists_is_undefined(host, hv):
    dom = host.boot(U1, nova_xml(U1), pid=500, persistent=False)
    driver = host.driver()
    driver.guests()
    del hv.domains[U1]                  # transient: destroyed is gone
    hv.conn.fire_lifecycle(dom, lv.VIR_DOMAIN_EVENT_STOPPED)
    assert driver.guests() == []
    assert driver.events() == [(U1, E.UNDEFINED)]


def test_stop_then_undefine_is_one_undefined_event(host, hv):
    dom = host.boot(U1, nova_xml(U1), pid=500)
    driver = host.driver()
    driver.guests()
    dom.running = False
    hv.conn.fire_lifecycle(dom, lv.VIR_DOMAIN_EVENT_STOPPED)
    del hv.domains[U1]
    hv.conn.fire_lifecycle(dom, lv.VIR_DOMAIN_EVENT_UNDEFINED)
    assert driver.events() == [(U1, E.UNDEFINED)]


def test_stop_stays_a_stop_when_existence_cannot_be_checked(host, hv):
    dom = host.boot(U1, nova_xml(U1), pid=500)
    driver = host.driver()
    driver.guests()
    del hv.domains[U1]
    hv.lookup_error = lv.libvirtError('internal error', 1)
    hv.conn.fire_lifecycle(dom, lv.VIR_DOMAIN_EVENT_STOPPED)
    assert driver.events() == [(U1, E.STOPPED)]
    # Nor when libvirtd is down: it may come back with the domain.
    hv.lookup_error = None
    hv.conn.fire_lifecycle(dom, lv.VIR_DOMAIN_EVENT_STOPPED)
    hv.conn.alive = False
    hv.open_error = lv.libvirtError('Failed to connect socket')
    assert driver.events() == [(U1, E.STOPPED)]


def test_a_paused_guest_stays_managed_with_its_channel(host, hv):
    dom = host.boot(U1, nova_xml(U1), pid=500)
    driver = host.driver()
    driver.guests()
    dom.paused = lv.VIR_DOMAIN_PAUSED_USER      # virsh suspend
    hv.conn.fire_lifecycle(dom, lv.VIR_DOMAIN_EVENT_SUSPENDED)
    assert driver.events() == [(U1, E.PAUSED)]
    # Its QEMU and threads live on: still managed, still pinnable.
    assert [g.uuid for g in driver.guests()] == [U1]
    assert driver.events() == []        # the poll agrees: no second event
    assert driver.observe(U1).vcpu_slices == 6
    driver.pin_vcpus(U1, frozenset([3]))
    dom.paused = None
    hv.conn.fire_lifecycle(dom, lv.VIR_DOMAIN_EVENT_RESUMED)
    assert [g.uuid for g in driver.guests()] == [U1]
    assert driver.events() == [(U1, E.RESUMED)]


def test_a_pause_and_resume_without_events_are_found_by_the_poll(host, hv):
    dom = host.boot(U1, nova_xml(U1), pid=500)
    driver = host.driver()
    driver.guests()
    dom.paused = lv.VIR_DOMAIN_PAUSED_IOERROR
    assert [g.uuid for g in driver.guests()] == [U1]
    # The callback comes late: still one event.
    hv.conn.fire_lifecycle(dom, lv.VIR_DOMAIN_EVENT_SUSPENDED)
    assert driver.events() == [(U1, E.PAUSED)]
    dom.paused = None
    driver.guests()
    assert driver.events() == [(U1, E.RESUMED)]


def test_pause_resume_pause_keeps_the_order(host, hv):
    dom = host.boot(U1, nova_xml(U1), pid=500)
    driver = host.driver()
    driver.guests()
    for event in (lv.VIR_DOMAIN_EVENT_SUSPENDED, lv.VIR_DOMAIN_EVENT_RESUMED,
                  lv.VIR_DOMAIN_EVENT_SUSPENDED):
        hv.conn.fire_lifecycle(dom, event)
    assert driver.events() == [(U1, E.PAUSED), (U1, E.RESUMED),
                               (U1, E.PAUSED)]


def test_a_guest_found_paused_is_adopted_and_said_paused(host, hv):
    dom = host.boot(U1, nova_xml(U1), pid=500)
    dom.paused = lv.VIR_DOMAIN_PAUSED_USER
    driver = host.driver()
    assert [g.uuid for g in driver.guests()] == [U1]
    assert driver.events() == [(U1, E.PAUSED)]


def test_an_incoming_migration_is_adopted_once_it_runs(host, hv):
    dom = host.boot(U1, nova_xml(U1), pid=500)
    dom.paused = lv.VIR_DOMAIN_PAUSED_MIGRATION     # destination, incoming
    driver = host.driver()
    hv.conn.fire_lifecycle(dom, lv.VIR_DOMAIN_EVENT_STARTED,
                           lv.VIR_DOMAIN_EVENT_STARTED_MIGRATED)
    assert driver.guests() == []
    assert driver.events() == [(U1, E.STARTED)]
    assert not [c for c in hv.calls if c[0] == U1]  # not touched
    dom.paused = None
    hv.conn.fire_lifecycle(dom, lv.VIR_DOMAIN_EVENT_RESUMED,
                           lv.VIR_DOMAIN_EVENT_RESUMED_MIGRATED)
    assert [g.uuid for g in driver.guests()] == [U1]
    assert driver.events() == [(U1, E.RESUMED)]


def test_the_source_of_a_migration_is_paused_then_gone(host, hv):
    dom = host.boot(U1, nova_xml(U1), pid=500)
    driver = host.driver()
    driver.guests()
    dom.paused = lv.VIR_DOMAIN_PAUSED_MIGRATION     # switchover
    hv.conn.fire_lifecycle(dom, lv.VIR_DOMAIN_EVENT_SUSPENDED,
                           lv.VIR_DOMAIN_EVENT_SUSPENDED_MIGRATED)
    assert [g.uuid for g in driver.guests()] == [U1]
    dom.running = False
    hv.conn.fire_lifecycle(dom, lv.VIR_DOMAIN_EVENT_STOPPED,
                           lv.VIR_DOMAIN_EVENT_STOPPED_MIGRATED)
    del hv.domains[U1]                  # Nova's VIR_MIGRATE_UNDEFINE_SOURCE
    hv.conn.fire_lifecycle(dom, lv.VIR_DOMAIN_EVENT_UNDEFINED)
    assert driver.guests() == []
    # Not parked for the switchover's pause: it leaves in a moment.
    assert driver.events() == [(U1, E.UNDEFINED)]


def test_new_qemu_process_of_a_known_uuid_is_a_start(host, hv):
    dom = host.boot(U1, nova_xml(U1), pid=500)
    driver = host.driver()
    driver.guests()
    # Hard reboot: same uuid, new domain id and QEMU process.
    dom.dom_id = 7
    (host.run / 'instance-0000002a.pid').write_text('700\n')
    conftest.fakehost.write_qemu(host.proc, 700, 2, stat=(5, 1, 1))
    assert [g.uuid for g in driver.guests()] == [U1]
    assert driver.events() == [(U1, E.STARTED)]
    assert driver.observe(U1).vcpu_cpu_ns == 10


def test_vcpu_threads_plugged_and_unplugged_are_found_at_once(host, hv):
    dom = host.boot(U1, nova_xml(U1), pid=500)
    driver = host.driver()
    driver.guests()
    assert driver.observe(U1).vcpu_slices == 6
    # A vCPU plugged: its thread counts on the next observation.
    task = host.proc / '500' / 'task' / '510'
    task.mkdir()
    (task / 'comm').write_text('CPU 2/KVM\n')
    (task / 'schedstat').write_text('1 1 10\n')
    assert driver.observe(U1).vcpu_slices == 16
    # One unplugged: gone from the count, no error.
    task = host.proc / '500' / 'task' / '502'
    for name in ('schedstat', 'comm'):
        (task / name).unlink()
    task.rmdir()
    assert driver.observe(U1).vcpu_slices == 13
    hv.conn.fire_reboot(dom)
    assert driver.events() == [(U1, E.REBOOTED)]
    assert driver.observe(U1).vcpu_slices == 13


def test_a_thread_named_after_it_was_listed_is_named_again(host, hv):
    """A new thread takes its name just after it starts."""
    host.boot(U1, nova_xml(U1), pid=500)
    driver = host.driver()
    driver.guests()
    task = host.proc / '500' / 'task' / '510'
    task.mkdir()
    (task / 'comm').write_text('qemu-system-x86\n')  # not yet named
    (task / 'schedstat').write_text('1 1 10\n')
    assert driver.observe(U1).vcpu_slices == 6
    (task / 'comm').write_text('CPU 2/KVM\n')
    assert driver.observe(U1).vcpu_slices == 16


def test_a_vanished_qemu_is_an_error(host, hv):
    host.boot(U1, nova_xml(U1), pid=500)
    driver = host.driver()
    driver.guests()
    for task in sorted((host.proc / '500' / 'task').iterdir()):
        for name in ('schedstat', 'comm'):
            (task / name).unlink()
        task.rmdir()
    (host.proc / '500' / 'task').rmdir()
    (host.proc / '500' / 'schedstat').unlink()
    (host.proc / '500').rmdir()
    with pytest.raises(base.DriverError, match='No such file'):
        driver.observe(U1)


def test_dead_connection_is_replaced_and_events_flow_again(host, hv):
    dom = host.boot(U1, nova_xml(U1), pid=500)
    driver = host.driver()
    first = hv.conn
    first.alive = False                 # keepalive gave up: libvirtd gone
    assert [g.uuid for g in driver.guests()] == [U1]
    assert len(hv.connections) == 2 and hv.conn is not first
    assert set(hv.conn.callbacks) == {lv.VIR_DOMAIN_EVENT_ID_LIFECYCLE,
                                      lv.VIR_DOMAIN_EVENT_ID_REBOOT}
    hv.conn.fire_reboot(dom)
    assert driver.events() == [(U1, E.REBOOTED)]


def test_broken_is_alive_also_means_reconnect(host, hv):
    driver = host.driver()
    hv.is_alive_error = True
    driver.guests()
    assert len(hv.connections) == 2


def test_error_on_a_dead_connection_reconnects_on_the_next_call(host, hv):
    host.boot(U1, nova_xml(U1), pid=500)
    driver = host.driver()
    hv.list_error = lv.libvirtError('End of file while reading data')
    with pytest.raises(base.DriverError, match='list domains: End of file'):
        driver.guests()
    assert len(hv.connections) == 1    # still alive: kept
    hv.error_kills_connection = True
    with pytest.raises(base.DriverError, match='list domains'):
        driver.guests()
    hv.list_error = None
    hv.conn.alive = True               # would be reused if not dropped
    assert [g.uuid for g in driver.guests()] == [U1]
    assert len(hv.connections) == 2


def test_unreachable_libvirtd_is_a_driver_error(host, hv):
    hv.open_error = lv.libvirtError('Failed to connect socket')
    with pytest.raises(base.DriverError,
                       match='cannot connect to qemu:///system'):
        host.driver()
    hv.open_error = None
    driver = host.driver()
    hv.conn.alive = False
    hv.open_error = lv.libvirtError('Failed to connect socket')
    with pytest.raises(base.DriverError, match='cannot connect'):
        driver.guests()


def test_event_loop_starts_once_per_process(host, hv, monkeypatch):
    monkeypatch.setattr(conftest.EVENT_LOOP_MODULE, '_event_loop_started',
                        False)
    host.driver()
    host.driver()
    assert hv.event_impl_registered == 1
    # Its thread runs libvirt's loop (the fake parks it for good).
    assert hv.event_loop_ran.wait(5)
    assert sys.modules['libvirt'] is hv


def test_the_source_of_a_failed_migration_stays_managed(host, hv):
    dom = host.boot(U1, nova_xml(U1), pid=500)
    driver = host.driver()
    driver.guests()
    dom.paused = lv.VIR_DOMAIN_PAUSED_MIGRATION     # switchover
    hv.conn.fire_lifecycle(dom, lv.VIR_DOMAIN_EVENT_SUSPENDED,
                           lv.VIR_DOMAIN_EVENT_SUSPENDED_MIGRATED)
    assert [g.uuid for g in driver.guests()] == [U1]
    assert driver.events() == []
    dom.paused = None                               # the migration failed
    hv.conn.fire_lifecycle(dom, lv.VIR_DOMAIN_EVENT_RESUMED,
                           lv.VIR_DOMAIN_EVENT_RESUMED_MIGRATED)
    assert [g.uuid for g in driver.guests()] == [U1]
    assert driver.events() == [(U1, E.RESUMED)]
    assert driver.observe(U1).vcpu_slices == 6
