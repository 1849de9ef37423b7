"""Whether a guest's channel can be trusted to take vCPUs offline.

A guest gets shrink targets only once it has proven that it acknowledges:
on adoption it is sent a target that changes nothing (every vCPU online),
and only its acknowledgement makes it ``proven``. A guest that misses an
acknowledgement (no module, a broken or hostile one, a hung QEMU) falls
back to ``host-only``: it keeps every vCPU online and is asked again only
after a backoff that doubles with each miss. So no guest can make a tick
wait for it more than once per backoff.
"""

import dataclasses
import enum

BACKOFF_FIRST = 30.0
BACKOFF_MAX = 600.0


class AckState(enum.StrEnum):
    UNPROVEN = 'unproven'       # asked once, no answer yet
    PROVEN = 'proven'           # answers: may be sent shrink targets
    HOST_ONLY = 'host-only'     # missed an answer: all vCPUs, backoff
    NO_CHANNEL = 'no-channel'


@dataclasses.dataclass
class GuestAcks:
    """Acknowledgement state of one guest (times from the agent's clock)."""

    vcpus: int
    state: AckState = AckState.UNPROVEN
    target: int = None          # last target sent
    seq: int = None             # its sequence number while unanswered
    sent_at: float = 0.0
    online: int = None          # last target the guest acknowledged
    acked_at: float = 0.0
    misses: int = 0
    retry_at: float = 0.0

    @classmethod
    def for_guest(cls, vcpus, has_channel):
        state = AckState.UNPROVEN if has_channel else AckState.NO_CHANNEL
        return cls(vcpus, state)

    @property
    def waiting(self):
        return self.seq is not None

    @property
    def shrinking(self):
        """A shrink target is out and unanswered."""
        return self.waiting and self.target < self.assumed_online()

    @property
    def may_shrink(self):
        return self.state == AckState.PROVEN

    def wants_probe(self, now):
        """True when an idle target should be sent to (re)prove the guest."""
        if self.waiting:
            return False
        if self.state == AckState.UNPROVEN:
            return True
        return self.state == AckState.HOST_ONLY and now >= self.retry_at

    def sent(self, target, seq, now):
        self.target, self.seq, self.sent_at = target, seq, now

    def acknowledged(self, now):
        self.online, self.seq, self.acked_at = self.target, None, now
        if self.state in (AckState.UNPROVEN, AckState.HOST_ONLY):
            self.state = AckState.PROVEN
            self.misses = 0

    def overdue(self, now, timeout):
        return self.waiting and now - self.sent_at >= timeout

    def missed(self, now):
        """No answer in time: host-only until the backoff has passed."""
        self.misses += 1
        backoff = min(BACKOFF_MAX, BACKOFF_FIRST * 2 ** (self.misses - 1))
        self.state = AckState.HOST_ONLY
        self.retry_at = now + backoff
        self.seq = None
        self.online = None          # unknown: assume every vCPU online
        return backoff

    def reset(self):
        """The guest restarted: its module (if any) starts over.

        Misses are kept, so a guest that reboots to escape its backoff
        only doubles the next one.
        """
        if self.state != AckState.NO_CHANNEL:
            self.state = AckState.UNPROVEN
        self.target = self.seq = self.online = None

    def assumed_online(self):
        """vCPUs the guest may have online, as far as the host knows."""
        if self.state == AckState.PROVEN and self.online is not None:
            return self.online
        return self.vcpus
