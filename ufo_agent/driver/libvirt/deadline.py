"""Deadlines for libvirt calls.

libvirt calls have no timeout of their own: a call on a domain whose QEMU
monitor does not answer (a stopped or wedged QEMU) waits for it, and every
later call on that domain waits about 30 s for libvirt's job lock before
it fails. One such domain would stall the whole agent.

So each call runs on a worker thread, and the caller waits at most
``timeout`` seconds. Workers are kept for the next calls (starting a
thread per call cost more than the calls themselves at a few hundred
guests); a worker whose call is abandoned is not reused until it
returns. A call that misses its deadline is abandoned
(its thread is left to finish whenever libvirt lets it) and its *key* is
marked busy: the domain's uuid, or :data:`CONNECTION` for calls on the
connection itself. Until the abandoned call returns, every call on a busy
key fails at once, without reaching libvirt, and a busy connection makes
every call fail at once. So a hung domain costs the agent one deadline,
not one per call, and the other domains carry on.

A caller that makes calls on many domains one after the other (the
enforcer's pins) may wait less than the deadline for each: after
``wait`` seconds its call is left *in flight*, handled as one that missed
its deadline (its key busy until it returns, :class:`CallInFlight`), so
that a hung domain delays the calls on the others by ``wait``, not by a
whole deadline.
"""

import logging
import queue
import threading
import time

from ufo_agent.driver import base

LOG = logging.getLogger(__name__)

CONNECTION = 'the libvirt connection'
# Idle workers kept for later calls; more are started when calls overlap.
IDLE_WORKERS = 4


class CallTimedOut(base.DriverError):
    """A call missed its deadline and was abandoned."""


class CallInFlight(CallTimedOut):
    """The caller stopped waiting before the deadline: as if it passed."""


class CallSkipped(base.DriverError):
    """A call was not made: an earlier one on its key has not returned."""


class OperationSkipped(CallSkipped, base.GuestBusy):
    """An operation of several calls was skipped before its first."""


class _Abandoned(Exception):
    """The caller gave up on a batch: its worker makes no more calls."""


class ItemFailed(Exception):
    """A call of :meth:`Deadlines.run_each` raised ``error``."""

    def __init__(self, what, error):
        super().__init__('%s: %s' % (what, error))
        self.what = what
        self.error = error


class _Call:
    __slots__ = ('key', 'what', 'started', 'value', 'error', 'finished',
                 'abandoned', 'done')

    def __init__(self, key, what, started):
        self.key = key
        self.what = what
        self.started = started
        self.value = self.error = None
        self.finished = self.abandoned = False
        # Released by the worker once the call returned: a lock, not an
        # Event, whose wait costs a Condition and a lock of its own (a
        # few hundred calls a tick). Only the caller waits for it.
        self.done = threading.Lock()
        self.done.acquire()


class Deadlines:
    """Runs calls with a deadline; ``timeout`` <= 0 runs them inline."""

    def __init__(self, timeout, clock=time.monotonic):
        self.timeout = timeout
        self.clock = clock
        self.timeouts = 0           # calls abandoned since start
        self._lock = threading.Lock()
        self._outstanding = {}      # key -> abandoned _Call
        self._idle = []             # workers waiting for a call

    def busy(self, key):
        """The description of the call that keeps ``key`` busy, or None."""
        with self._lock:
            call = self._outstanding.get(key)
            if call is None and key != CONNECTION:
                call = self._outstanding.get(CONNECTION)
            return call.what if call is not None else None

    def outstanding(self):
        """{key: (what, seconds since it started)} of abandoned calls."""
        now = self.clock()
        with self._lock:
            return {key: (call.what, now - call.started)
                    for key, call in self._outstanding.items()}

    def run(self, key, what, func, *args, discard=None):
        """``func(*args)`` within the deadline; its exceptions propagate.

        Raises :class:`CallSkipped` while ``key`` (or the connection) is
        busy and :class:`CallTimedOut` when the deadline passes.
        ``discard(value)`` gets the value of a call that returns after it
        was abandoned (a connection opened too late is closed).
        """
        held = self.busy(key)
        if held is not None:
            raise CallSkipped('%s: skipped while an earlier call has not '
                              'returned (%s)' % (what, held))
        if self.timeout is None or self.timeout <= 0:
            return func(*args)
        call = _Call(key, what, self.clock())
        self._hand_over(call, func, args, discard)
        if not call.done.acquire(timeout=self.timeout):
            with self._lock:
                if not call.finished:
                    call.abandoned = True
                    self._outstanding[key] = call
                    self.timeouts += 1
            if call.abandoned:
                LOG.error('libvirt call %s timed out after %.1f s: calls on '
                          '%s are skipped until it returns', what,
                          self.timeout, key)
                raise CallTimedOut('%s timed out after %.1f s'
                                   % (what, self.timeout))
            call.done.acquire()
        if call.error is not None:
            raise call.error
        return call.value

    def run_each(self, key, calls, wait=None):
        """Each ``(what, func, args)`` of ``calls`` in turn; their values.

        The calls :meth:`run` would make one after the other, with the
        same deadlines, handed to a worker thread once for them all (a
        guest's vCPUs are pinned with a call each): each call has
        ``timeout`` from its own start; one that misses it is abandoned
        and marks ``key`` busy, and no later one is made; the first that
        raises ends the run. Raises :class:`CallSkipped` while ``key`` is
        busy, :class:`CallTimedOut`, or :class:`ItemFailed` with what the
        call that raised was and its exception.

        ``wait`` (less than ``timeout``): the caller waits at most that
        for each call; one still under way then is abandoned all the
        same, and :class:`CallInFlight` raised.
        """
        calls = list(calls)
        if not calls:
            return []
        outcome, = self.run_batch([(key, calls)], wait)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    def run_batch(self, items, wait=None):
        """The calls of several keys, handed to a worker thread at once.

        ``items`` are ``(key, calls)``, run in turn as :meth:`run_each`
        runs each (``calls`` may also be a generator, sent the value of
        each call it yields: a call may depend on an earlier one's
        value). Returns the outcome of each item run, in order: the
        values of its calls, or the exception :meth:`run_each` would
        raise. The first item that fails ends the batch: the list is
        shorter than ``items`` then, and ends with its exception. A call
        abandoned at its deadline (or ``wait``) ends it too, so a hung
        key delays the keys after it by one deadline at most, as if
        each had been handed over on its own.
        """
        items = list(items)
        if not items:
            return []
        held = self.busy(items[0][0])
        if held is not None:
            return [self._skipped(items[0][1], held)]
        outcomes = []
        call = _Call(items[0][0], None, self.clock())
        if self.timeout is None or self.timeout <= 0:
            self._run_items(call, items, outcomes)
            return outcomes
        self._hand_over(call, self._run_items, (call, items, outcomes),
                        None)
        limit = self.timeout
        if wait is not None and 0 < wait < limit:
            limit = wait
        wait = limit
        while not call.done.acquire(timeout=wait):
            with self._lock:
                if call.finished:
                    wait = None
                else:
                    # The deadline of the call under way.
                    wait = call.started + limit - self.clock()
                    if wait <= 0:
                        call.abandoned = True
                        self._outstanding[call.key] = call
                        self.timeouts += 1
                        done = list(outcomes)
            if call.abandoned:
                return done + [self._abandoned(call, limit)]
            if wait is None:
                call.done.acquire()
                break
        if call.error is not None:
            raise call.error
        return outcomes

    def _run_items(self, call, items, outcomes):
        """The worker's side of :meth:`run_batch`."""
        for key, calls in items:
            with self._lock:
                if call.abandoned:
                    return
                call.key, call.started = key, self.clock()
                held = self._outstanding.get(key)
                if held is None and key != CONNECTION:
                    held = self._outstanding.get(CONNECTION)
            if held is not None:
                outcomes.append(self._skipped(calls, held.what))
                return
            try:
                values = self._drive(call, calls)
            except _Abandoned:
                return
            except ItemFailed as exc:
                values = exc
            with self._lock:
                if call.abandoned:
                    return      # the caller has its outcomes
                outcomes.append(values)
            if isinstance(values, Exception):
                return

    def _drive(self, call, calls):
        """Make ``calls`` on the worker, as ``call``; their values.

        Raises _Abandoned once the caller gave up on ``call``, and
        ItemFailed for a call that raised.
        """
        values = []
        generator = calls if hasattr(calls, 'send') else None
        steps = iter(calls)
        value = None
        while True:
            try:
                step = steps.send(value) if generator is not None \
                    else next(steps)
            except StopIteration:
                return values
            what, func, args = step
            with self._lock:
                if call.abandoned:
                    raise _Abandoned()      # its key is busy: no call
                call.what, call.started = what, self.clock()
            try:
                value = func(*args)
            except Exception as exc:
                if generator is not None:
                    generator.close()
                raise ItemFailed(what, exc)
            values.append(value)

    @staticmethod
    def _skipped(calls, held):
        what = calls[0][0] if isinstance(calls, (list, tuple)) and calls \
            else 'call'
        return CallSkipped('%s: skipped while an earlier call has not '
                           'returned (%s)' % (what, held))

    def _abandoned(self, call, limit):
        """The exception of ``call``, abandoned after ``limit`` s."""
        if limit < self.timeout:
            LOG.warning('libvirt call %s left in flight after %.2f '
                        's: calls on %s are skipped until it '
                        'returns', call.what, limit, call.key)
            return CallInFlight('%s not returned after %.2f s'
                                % (call.what, limit))
        LOG.error('libvirt call %s timed out after %.1f s: calls on '
                  '%s are skipped until it returns', call.what,
                  self.timeout, call.key)
        return CallTimedOut('%s timed out after %.1f s'
                            % (call.what, self.timeout))

    def _hand_over(self, call, func, args, discard):
        """``func(*args)`` for ``call`` to an idle worker, or a new one."""
        with self._lock:
            worker = self._idle.pop() if self._idle else None
        if worker is None:
            worker = _Worker(self._work)
        worker.calls.put((worker, call, func, args, discard))

    def _work(self, worker, call, func, args, discard):
        try:
            call.value = func(*args)
        except BaseException as exc:    # handed to the caller
            call.error = exc
        with self._lock:
            call.finished = True
            if call.abandoned and self._outstanding.get(call.key) is call:
                del self._outstanding[call.key]
        if call.abandoned and call.error is None and discard is not None:
            try:
                discard(call.value)
            except Exception as exc:
                LOG.debug('Could not discard the late result of %s: %s',
                          call.what, exc)
        if call.abandoned:
            LOG.warning('libvirt call %s returned after %.1f s%s; calls on '
                        '%s resume', call.what,
                        self.clock() - call.started,
                        ' (%s)' % call.error if call.error is not None
                        else '', call.key)
        with self._lock:
            # Before done: the caller's next call may take this worker.
            if len(self._idle) < IDLE_WORKERS:
                self._idle.append(worker)
            else:
                worker.calls.put(None)
        call.done.release()


class _Worker:
    """A daemon thread that runs calls handed to it, one at a time."""

    def __init__(self, work):
        self.calls = queue.SimpleQueue()
        self._work = work
        threading.Thread(target=self._run, name='libvirt-call',
                         daemon=True).start()

    def _run(self):
        while True:
            task = self.calls.get()
            if task is None:
                return
            self._work(*task)
