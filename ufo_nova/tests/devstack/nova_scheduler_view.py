"""What nova-scheduler makes of a nova.conf: ``python -m ... FILE``.

Parses FILE with Nova's global CONF (every option Nova 34 registers, and
ufo_nova's [ufo]) as a Nova service does, loads the filters and weighers
with Nova's own loaders, and prints JSON. A process of its own, so that the
test process's CONF stays as it was.
"""

import json
import sys

import nova.conf
from nova.scheduler import filters
from nova.scheduler import weights
from nova.virt import hardware

import ufo_nova.conf  # noqa: F401  (registers [ufo], as the filter does)

CONF = nova.conf.CONF


def main(path):
    CONF(['--config-file', path], project='nova', default_config_files=[],
         default_config_dirs=[], use_env=False)
    sched = CONF.filter_scheduler
    available = filters.HostFilterHandler().get_matching_classes(
        sched.available_filters)
    loaded = weights.HostWeightHandler().get_matching_classes(
        sched.weight_classes)
    shared = CONF.compute.cpu_shared_set
    print(json.dumps({
        'enabled_filters': sched.enabled_filters,
        'available_filters': sched.available_filters,
        'weight_classes': sched.weight_classes,
        'available_filter_classes': sorted(
            cls.__name__ for cls in available),
        'weigher_classes': sorted(
            '%s.%s' % (cls.__module__, cls.__name__) for cls in loaded),
        'cpu_shared_set': (sorted(hardware.parse_cpu_spec(shared))
                           if shared else None),
        'ufo_unknown_host_policy': CONF.ufo.unknown_host_policy,
    }))


if __name__ == '__main__':
    main(sys.argv[1])
