"""Keep one guest's unexpected error from reaching the other guests.

The loop and the enforcer handle :class:`~ufo_agent.driver.base.DriverError`
guest by guest: a guest whose call fails is skipped, its pins stay on
record as possibly wider (the ledger's union), and the tick goes on. Any
other exception (a bug, a page or a /proc file nobody expected) would end
the tick for every guest, and again on every later tick. So the agent
talks to its driver through :class:`GuardedDriver`, which turns such an
exception of a per-guest call into a DriverError, after reporting it.
"""

from ufo_agent.driver import base


class UnexpectedDriverError(base.DriverError):
    """A per-guest driver call raised something other than DriverError."""


class GuardedDriver(base.HypervisorDriver):
    """Wraps a driver; ``on_error(uuid, method, exc)`` hears of bugs.

    Calls that concern no single guest pass through untouched: their
    errors end the tick, which the loop survives.
    """

    def __init__(self, driver, on_error):
        self.driver = driver
        self.on_error = on_error

    def __getattr__(self, name):
        # Anything beyond the interface (remove_stale_pages, ...).
        return getattr(self.driver, name)

    def _guest_call(self, method, uuid, *args):
        try:
            return getattr(self.driver, method)(uuid, *args)
        except base.DriverError:
            raise
        except Exception as exc:
            raise self._expected(uuid, method, exc) from exc

    # -- whole host ----------------------------------------------------------
    def host_cpus(self):
        return self.driver.host_cpus()

    def guests(self):
        return self.driver.guests()

    def events(self):
        return self.driver.events()

    def heartbeat(self):
        return self.driver.heartbeat()

    def busy_guests(self):
        return self.driver.busy_guests()

    def unadopted_pins(self):
        return self.driver.unadopted_pins()

    def close(self):
        return self.driver.close()

    # -- one guest -----------------------------------------------------------
    def observe(self, uuid):
        return self._guest_call('observe', uuid)

    def pin_vcpus(self, uuid, cpus):
        return self._guest_call('pin_vcpus', uuid, cpus)

    def pin_emulator(self, uuid, cpus):
        return self._guest_call('pin_emulator', uuid, cpus)

    def set_vcpu_target(self, uuid, vcpus):
        return self._guest_call('set_vcpu_target', uuid, vcpus)

    def set_vcpus_idle(self, uuid, idle):
        return self._guest_call('set_vcpus_idle', uuid, idle)

    def acknowledged(self, uuid, seq):
        return self._guest_call('acknowledged', uuid, seq)

    def read_pins(self, uuid):
        return self._guest_call('read_pins', uuid)

    def pin_many(self, pins):
        if type(self.driver).pin_many is base.HypervisorDriver.pin_many:
            # One by one, each through its guarded method.
            return super().pin_many(pins)
        outcomes = self.driver.pin_many(pins)
        for i, ((uuid, kind, _), found) in enumerate(zip(pins, outcomes)):
            if found is not None:
                outcomes[i] = self._expected(uuid, base.PIN_METHODS[kind],
                                             found)
        return outcomes

    def read_pins_many(self, uuids):
        out = self.driver.read_pins_many(uuids)
        for uuid, found in out.items():
            if isinstance(found, Exception):
                out[uuid] = self._expected(uuid, 'read_pins', found)
        return out

    def _expected(self, uuid, method, exc):
        """``exc`` of a per-guest call as a DriverError, bugs reported."""
        if isinstance(exc, base.DriverError):
            return exc
        self.on_error(uuid, method, exc)
        error = UnexpectedDriverError('%s: unexpected %s: %s'
                                      % (method, type(exc).__name__, exc))
        error.__cause__ = exc
        return error

    def release(self, uuid):
        return self._guest_call('release', uuid)

    def forget(self, uuid):
        return self._guest_call('forget', uuid)

    def guest_exists(self, uuid):
        return self._guest_call('guest_exists', uuid)
