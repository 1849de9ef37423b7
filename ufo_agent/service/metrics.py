"""Prometheus exposition and the JSON status, served on localhost.

``GET /metrics`` is the Prometheus text format; ``GET /status`` is the
snapshot as JSON (what ``ufo-status`` prints). The server only reads the
latest snapshot; it never calls into the agent.
"""

import http.server
import json
import logging
import threading

LOG = logging.getLogger(__name__)

_HOST = [
    ('ufo_managed_cores', 'gauge', 'Managed physical cores.',
     ('pools', 'managed_cores')),
    ('ufo_emulator_pool_cores', 'gauge', 'Cores of the emulator pool.',
     ('pools', 'emulator_cores')),
    ('ufo_idle_pool_cores', 'gauge', 'Cores of the idle pool.',
     ('pools', 'idle_cores')),
    ('ufo_vcpu_pool_cores', 'gauge', 'Cores of all vCPU pools together.',
     ('pools', 'vcpu_cores')),
    ('ufo_emulator_pool_utilization_ratio', 'gauge',
     'Utilization of the emulator pool (0-1).', ('pools', 'emulator_util')),
    ('ufo_overloaded', 'gauge',
     '1 when the idle pool could not supply the other pools.',
     ('pools', 'overloaded')),
    ('ufo_shortfall_cores', 'gauge', 'Cores the pools needed and lacked.',
     ('pools', 'shortfall_cores')),
    ('ufo_cores_saved', 'gauge',
     'Cores the guests would hold at flavor size, minus what they hold.',
     ('cores_saved',)),
    ('ufo_tick_duration_seconds', 'gauge', 'Duration of the last tick.',
     ('tick_seconds',)),
    ('ufo_ticks_total', 'counter', 'Ticks run since start.', ('ticks',)),
    ('ufo_tick_errors_total', 'counter',
     'Unexpected errors in ticks, logged with a traceback: each cost one '
     'guest its tick or abandoned a tick.', ('tick_errors',)),
    ('ufo_invariant_violations_total', 'counter',
     'Controller plans that broke an invariant and were not applied.',
     ('invariant_violations',)),
]

_VM = [
    ('ufo_vm_cores', 'Physical cores of the VM\'s vCPU pool.', 'cores'),
    ('ufo_vm_wanted_cores', 'Cores the predictor asked for.',
     'wanted_cores'),
    ('ufo_vm_target_vcpus', 'Online vCPUs the host asked for.',
     'target_vcpus'),
    ('ufo_vm_online_vcpus', 'Online vCPUs the guest reports.',
     'online_vcpus'),
    ('ufo_vm_utilization_percent', 'Guest CPU utilization (sum of vCPUs).',
     'util'),
    ('ufo_vm_scheduling_frequency', 'Scheduling frequency (switches/s).',
     'sf'),
    ('ufo_vm_model_r2', 'R^2 of the fitted model at the current cores.',
     'r2'),
    ('ufo_vm_vcpu_thread_percent', 'Host CPU time of the vCPU threads.',
     'vcpu_pct'),
    ('ufo_vm_emulator_thread_percent',
     'Host CPU time of the other threads.', 'emulator_pct'),
    ('ufo_vm_run_delay_ms_per_second',
     'Run-queue delay of the vCPU threads per second.', 'run_delay_ms'),
]


def _value(value):
    if isinstance(value, bool):
        return '1' if value else '0'
    return repr(float(value))


def _label(value):
    return str(value).replace('\\', '\\\\').replace('"', '\\"').replace(
        '\n', '\\n')


def render(snapshot):
    """The Prometheus text exposition of a snapshot."""
    lines = []
    for name, kind, text, path in _HOST:
        value = snapshot
        for key in path:
            value = value.get(key) if isinstance(value, dict) else None
        if value is None:
            continue
        lines += ['# HELP %s %s' % (name, text), '# TYPE %s %s' % (name,
                                                                   kind),
                  '%s %s' % (name, _value(value))]
    vms = snapshot.get('vms', [])
    for name, text, key in _VM:
        lines += ['# HELP %s %s' % (name, text), '# TYPE %s gauge' % name]
        for vm in vms:
            if vm.get(key) is None:
                continue
            lines.append('%s{uuid="%s",name="%s"} %s' % (
                name, _label(vm['uuid']), _label(vm['name']),
                _value(vm[key])))
    signal = snapshot.get('signal')
    if signal:
        lines += ['# HELP ufo_host_state 1 for the host signal\'s state '
                  '(paper Appendix B.4).', '# TYPE ufo_host_state gauge']
        for state in ('underloaded', 'saturated', 'overloaded'):
            lines.append('ufo_host_state{state="%s"} %d'
                         % (state, signal['state'] == state))
        for key, text in (
                ('reclaimable_cores', 'Cores a new VM could get.'),
                ('unmet_cores', 'Cores the pools lacked (signal).'),
                ('sequence', 'Sequence number of the host signal.')):
            name = 'ufo_host_signal_%s' % key
            lines += ['# HELP %s %s' % (name, text),
                      '# TYPE %s gauge' % name,
                      '%s %s' % (name, _value(signal[key]))]
    lines += ['# HELP ufo_vm_mode 1 for the VM\'s mode and signal source.',
              '# TYPE ufo_vm_mode gauge']
    for vm in vms:
        lines.append('ufo_vm_mode{uuid="%s",mode="%s",signal="%s"} 1' % (
            _label(vm['uuid']), _label(vm['mode']), _label(vm['signal'])))
    return '\n'.join(lines) + '\n'


class MetricsServer:
    """Serves the latest snapshot from a daemon thread."""

    def __init__(self, host, port):
        self.snapshot = {}
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                snap = server.snapshot
                if self.path == '/metrics':
                    body = render(snap).encode()
                    ctype = 'text/plain; version=0.0.4'
                elif self.path == '/status':
                    body = json.dumps(snap, sort_keys=True).encode()
                    ctype = 'application/json'
                else:
                    self.send_error(404)
                    return
                self.send_response(200)
                self.send_header('Content-Type', ctype)
                self.send_header('Content-Length', str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, fmt, *args):
                LOG.debug('metrics: ' + fmt, *args)

        self.httpd = http.server.ThreadingHTTPServer((host, port), Handler)
        self.httpd.daemon_threads = True
        self.address = self.httpd.server_address
        self._thread = threading.Thread(target=self.httpd.serve_forever,
                                        name='ufo-metrics', daemon=True)

    def start(self):
        self._thread.start()
        LOG.info('Metrics and status on http://%s:%d/', *self.address[:2])

    def stop(self):
        self.httpd.shutdown()
        self.httpd.server_close()
