"""The signal listener's lifetime follows nova-scheduler's service.

Nova gives scheduler filters and weighers no stop or reset hook: they are
built with the scheduler's HostManager and never told that the service
stops, or that SIGHUP resets it. Yet the listener (:mod:`ufo_nova.listener`)
holds a poller thread and a broker connection, which must not outlive the
service that started it (nova's oslo.service restarts a single-worker
scheduler in the same process on SIGHUP, and Nova's functional tests stop
and start services within one process).

So, when Nova builds UFO's filter or weigher, :func:`follow_scheduler_service`
wraps ``nova.service.Service.stop`` and ``reset`` once per process. After
Nova's own steps, for the ``nova-scheduler`` service only,
:func:`ufo_nova.listener.stop_listening` stops this process's listener and
waits for its poller; the signals received so far stay until they are
stale, and the next scheduling request starts a new listener with the
configuration as it is then (reloaded on SIGHUP). Other services of the
process are untouched.
"""

import functools
import threading

from ufo_nova import listener

SCHEDULER_BINARY = 'nova-scheduler'
_MARK = '_ufo_stops_listener'
_lock = threading.Lock()


def _then_stop_listener(method):
    @functools.wraps(method)
    def wrapper(service, *args, **kwargs):
        try:
            return method(service, *args, **kwargs)
        finally:
            if getattr(service, 'binary', None) == SCHEDULER_BINARY:
                listener.stop_listening()

    setattr(wrapper, _MARK, True)
    return wrapper


def follow_scheduler_service():
    """Stop the listener whenever nova-scheduler's service stops or resets.

    Idempotent; called by the plugins' constructors, inside nova-scheduler.
    """
    # Imported here: only nova-scheduler (which has Nova) calls this.
    from nova import service

    with _lock:
        for name in ('stop', 'reset'):
            method = getattr(service.Service, name)
            if not getattr(method, _MARK, False):
                setattr(service.Service, name, _then_stop_listener(method))
