"""Every source of the exporter, one line each, in order. Adding a source is a package with a
``registration.py`` (docs/architecture.md, "Adding a source") and its line here.

The order is the exposition's, the parts' building order (a part reads the ones before it: pods
and the exporter's status read the chips) and the sampler's task order (npu-smi first: readiness
waits on it). The web server's own parts (its config's and its listener's counts) are registered
after these by `serve` (app/sources.py): the node knows nothing of the web.
"""

from __future__ import annotations

from typing import Any

from exporter.core.registration import Registration
from exporter.hccn import registration as hccn
from exporter.jobs import registration as jobs
from exporter.node import status
from exporter.npusmi import registration as npusmi
from exporter.owners import registration as owners
from exporter.pods import registration as pods
from exporter.profiles import registration as profiles
from exporter.resources import registration as resources

SOURCES: tuple[Registration[Any], ...] = (
    npusmi.REGISTRATION,  # the chips (collector.devices, collector.processes)
    status.REGISTRATION,  # the exporter's own status (collector.self)
    resources.REGISTRATION,  # the exporter's process (collector.self)
    profiles.REGISTRATION,  # profiler exports and the hooks' profiling windows (collector.profiles)
    hccn.REGISTRATION,  # network ports and optics (collector.network)
    pods.REGISTRATION,  # chip-to-pod attribution (collector.pods)
    owners.REGISTRATION,  # who holds each chip, from its processes' cgroups (collector.owners; after pods: joins their names)
    jobs.REGISTRATION,  # the training hooks' steps (collector.jobs)
)
