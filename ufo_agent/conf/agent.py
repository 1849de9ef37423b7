"""Options of the ufo-agent service."""

from oslo_config import cfg

from ufo_agent.service import settings

_DEFAULTS = settings.AgentSettings()
# ufo_guest's default watchdog (watchdog_ms in
# guest_image/ufo-guest/ufo_guest.c): a guest that sees no new heartbeat
# for this long brings every vCPU back. Two heartbeats fit in it at most
# heartbeat_interval apart, so that one late beat does not set it off.
GUEST_WATCHDOG = 5.0
HEARTBEAT_INTERVAL_MAX = GUEST_WATCHDOG / 2

GROUP = cfg.OptGroup(
    'agent',
    title='ufo-agent service',
    help='How ufo-agent runs beside nova-compute.')

OPTS = [
    cfg.StrOpt(
        'libvirt_uri', default='qemu:///system',
        help='libvirt connection URI of the hypervisor to manage.'),
    cfg.StrOpt(
        'state_path', default='/var/lib/ufo-agent',
        help='Directory of per-instance learned models, and of the '
             'in-flight pin record (in-flight-pins.json: where pin calls '
             'that may not have returned can still put each guest, for '
             'the next agent and --restore). Created if missing; entries '
             'of instances that are gone are removed.'),
    cfg.FloatOpt(
        'state_save_interval', default=_DEFAULTS.state_save_interval, min=1.0,
        mutable=True,
        help='Seconds between two saves of the learned models.'),
    cfg.BoolOpt(
        'dry_run', default=_DEFAULTS.dry_run,
        help='Observe, decide and log, but pin nothing and send no target '
             'to any guest; report the cores that would be saved.'),
    cfg.FloatOpt(
        'ack_timeout', default=_DEFAULTS.ack_timeout, min=0.05, max=4.0,
        mutable=True,
        help='Seconds a guest has to acknowledge a vCPU target. A guest '
             'that does not answer in time gets every vCPU back and is '
             'handled in host-only mode, asked again after a backoff of 30 s '
             'that doubles with each miss (up to 10 minutes). Until it '
             'answers a shrink, its pins do not narrow.'),
    cfg.FloatOpt(
        'ack_wait', default=_DEFAULTS.ack_wait, min=0.0, max=2.0,
        mutable=True,
        help='Longest a tick waits for guests to acknowledge that they took '
             'vCPUs offline. A guest that answers later keeps its pins '
             'until it does (or until ack_timeout, when it falls back to '
             'host-only mode): no guest can make the others\' tick wait '
             'longer than this.'),
    cfg.IntOpt(
        'max_vcpu_step', default=_DEFAULTS.max_vcpu_step, min=1, max=64,
        mutable=True,
        help='Most vCPUs a guest is asked to take offline in one tick. '
             'Each takes the guest 20-140 ms, so one step of a large guest '
             'stays well inside ack_timeout.'),
    cfg.FloatOpt(
        'guest_util_tolerance', default=_DEFAULTS.guest_util_tolerance,
        min=0.0, max=10.0,
        mutable=True,
        help='Relative tolerance when checking a guest\'s reported '
             'utilization against the time its vCPU threads ran or waited '
             'to run on the host. A guest above it is handled in host-only '
             'mode.'),
    cfg.FloatOpt(
        'drift_check_interval', default=_DEFAULTS.drift_check_interval,
        min=0.0,
        mutable=True,
        help='Seconds between checks that the live pins of every managed '
             'guest are still those ufo-agent applied; pins changed behind '
             'its back are written again. 0 disables the check.'),
    cfg.FloatOpt(
        'libvirt_call_timeout', default=_DEFAULTS.libvirt_call_timeout,
        min=0.0, max=300.0,
        help='Longest wait in seconds for one libvirt call. A call that '
             'takes longer (a guest whose QEMU monitor does not answer, a '
             'stuck libvirtd) is abandoned: the tick goes on with the other '
             'guests, and that guest is skipped until the call returns. 0 '
             'waits for ever (not recommended).'),
    cfg.FloatOpt(
        'libvirt_pin_wait', default=0.5, min=0.0, max=300.0,
        help='Longest wait in seconds for one call that pins a guest\'s '
             'threads or reads its pins, at most libvirt_call_timeout. '
             'The agent makes these calls guest after guest; one not '
             'returned by then is left in flight and handled as a call '
             'that timed out (its guest skipped and its CPUs held until '
             'it returns), so that one hung guest does not hold up the '
             'others for the whole deadline. 0 waits the whole '
             'libvirt_call_timeout.'),
    cfg.FloatOpt(
        'heartbeat_interval', default=_DEFAULTS.heartbeat_interval,
        min=0.05, max=HEARTBEAT_INTERVAL_MAX,
        help='Seconds between two heartbeats on every guest channel, '
             'written by a thread of their own. At most half the guests\' '
             'watchdog (ufo_guest.watchdog_ms, 5 s by default), so that a '
             'beat a little late never makes a guest bring every vCPU '
             'back while the agent runs; a guest given a shorter watchdog '
             'needs a shorter interval. The heartbeat stops when the '
             'agent has completed no tick for 3 x [controller] '
             'tick_interval + libvirt_call_timeout, so that the guests '
             'bring every vCPU back while the agent is stuck.'),
    cfg.IntOpt(
        'max_failed_ticks', default=_DEFAULTS.max_failed_ticks, min=1,
        max=3600, mutable=True,
        help='Ticks in a row that may fail (an error abandoned the tick, '
             'or the controller\'s plan broke an invariant and was not '
             'applied) before ufo-agent gives every guest back (all vCPUs '
             'online, original pins) and exits with status 1, so that '
             'systemd restarts it (Restart=on-failure) with a fresh start. '
             'A failed tick does not feed systemd\'s watchdog. Ticks that '
             'fail for one guest only (a driver call on that guest) do '
             'not count.'),
    cfg.FloatOpt(
        'latency_stale_after', default=_DEFAULTS.latency_stale_after,
        min=1.0, max=60.0, mutable=True,
        help='Seconds a tail latency a guest published (through its guest '
             'module, /sys/kernel/ufo/latency_us) stands without a new one. '
             'Past that, as for a guest that publishes none or a value '
             'outside 1 us to 10 s, the controller judges the guest by its '
             'black-box signals alone. Guest software is asked to publish '
             'every second.'),
    cfg.BoolOpt(
        'manage_non_nova_domains', default=False,
        help='Manage libvirt domains that carry no Nova instance metadata.'),
    cfg.HostAddressOpt(
        'metrics_host', default='127.0.0.1',
        help='Address of the Prometheus and status endpoint.'),
    cfg.PortOpt(
        'metrics_port', default=9477,
        help='Port of the Prometheus and status endpoint; 0 disables it.'),
]


def register_opts(conf):
    conf.register_group(GROUP)
    conf.register_opts(OPTS, group=GROUP)


def list_opts():
    return {GROUP: OPTS}
