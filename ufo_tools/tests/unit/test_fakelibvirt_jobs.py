"""The fake libvirt runs a domain's jobs one at a time, as libvirt does.

libvirt's QEMU driver runs the calls that change a domain as its job: a
pin call that finds another call's job waits for it (so it lands after
it), and gives up after the job wait time with "cannot acquire state
change lock". Queries answered from libvirt's own state answer at once.
"""

import threading
import time

import pytest

from ufo_tools.fakes import fakelibvirt as lv

UUID = '6a1e3b2c-0d4f-4e5a-8b9c-0d1e2f3a4b5c'


def _domain():
    hv = lv.FakeLibvirt()
    xml = ("<domain type='kvm'><uuid>%s</uuid><vcpu>2</vcpu>"
           "<devices></devices></domain>" % UUID)
    return hv, hv.add(UUID, xml)


def _bits(*cpus):
    return tuple(cpu in cpus for cpu in range(8))


def _in_thread(func, *args):
    out = {}

    def run():
        try:
            out['value'] = func(*args)
        except lv.libvirtError as exc:
            out['error'] = exc
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, out


def _wait_until(condition, timeout=5.0):
    give_up = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < give_up, 'condition not reached'
        time.sleep(0.005)


def test_a_pin_waits_for_the_job_of_an_earlier_pin_and_lands_after_it():
    hv, dom = _domain()
    gate = dom.block['pinVcpuFlags'] = threading.Event()
    first, _ = _in_thread(dom.pinVcpuFlags, 0, _bits(2), 1)
    _wait_until(lambda: hv.blocked)
    del dom.block['pinVcpuFlags']
    # The domain's QEMU is stuck in the first call: the second call waits
    # for its job although nothing blocks the second call itself.
    second, out = _in_thread(dom.pinVcpuFlags, 0, _bits(5), 1)
    second.join(0.2)
    assert second.is_alive() and dom.job_holder == 'pinVcpuFlags'
    # The pins are read meanwhile, without a job: the old ones.
    assert dom.vcpuPinInfo(1) == [dom.default_pin, dom.default_pin]
    gate.set()
    first.join(5.0)
    second.join(5.0)
    assert not first.is_alive() and not second.is_alive()
    assert 'error' not in out
    # Serialized: the later call's pin is the one that stays.
    assert dom.vcpu_pins[0] == _bits(5)
    assert [c[3] for c in hv.calls if c[1] == 'pinVcpuFlags'] == [
        _bits(2), _bits(5)]


def test_a_call_gives_up_on_a_job_held_past_the_job_wait_time():
    hv, dom = _domain()
    hv.job_wait = 0.1
    gate = dom.block['pinEmulator'] = threading.Event()
    try:
        first, _ = _in_thread(dom.pinEmulator, _bits(1), 1)
        _wait_until(lambda: hv.blocked)
        for call, args in ((dom.pinVcpuFlags, (1, _bits(3), 1)),
                           (dom.pinIOThread, (1, _bits(3), 1)),
                           (dom.ioThreadInfo, (1,)),
                           (dom.attachDeviceFlags, ('<shmem/>', 1))):
            start = time.monotonic()
            with pytest.raises(lv.libvirtError) as caught:
                call(*args)
            assert 0.1 <= time.monotonic() - start < 2.0
            assert caught.value.get_error_code() == \
                lv.VIR_ERR_OPERATION_TIMEOUT
            assert str(caught.value) == (
                'Timed out during operation: cannot acquire state change '
                'lock (held by monitor=remoteDispatchDomainPinEmulator)')
        # Nothing of theirs was done.
        assert dom.vcpu_pins == {} and '<shmem/>' not in dom.live_xml
        # Queries that take no job answer while the job is held.
        assert dom.emulatorPinInfo(1) == dom.default_pin
        assert dom.state() == [lv.VIR_DOMAIN_RUNNING, 1]
    finally:
        gate.set()
    first.join(5.0)
    assert dom.emulator_pin == _bits(1) and dom.job_holder is None
    # The job is free again.
    dom.pinVcpuFlags(1, _bits(3), 1)
    assert dom.vcpu_pins[1] == _bits(3)


def test_jobs_of_different_domains_do_not_wait_for_each_other():
    hv, dom = _domain()
    other = hv.add('other', dom.config_xml.replace(UUID, 'other'))
    gate = dom.block['pinVcpuFlags'] = threading.Event()
    try:
        _in_thread(dom.pinVcpuFlags, 0, _bits(2), 1)
        _wait_until(lambda: hv.blocked)
        start = time.monotonic()
        other.pinVcpuFlags(0, _bits(4), 1)
        # Waiting for the other domain's job would take JOB_WAIT, 30 s.
        assert time.monotonic() - start < 4.0
        assert other.vcpu_pins[0] == _bits(4)
    finally:
        gate.set()
