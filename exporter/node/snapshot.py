"""The snapshot: what /metrics renders at one moment, one immutable part per source.

The sampler publishes a new snapshot after every task run, built from each sampled source's
``part()`` (npu-smi, hccn_tool, kubelet, profiles, the exporter's process) and the exporter's own
status. The parts
that change between runs by themselves, the ingest (jobs) and the web config, are read when
a scrape asks. A part is None when its source is off.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from exporter.core.selfmetrics import StatusPart
from exporter.hccn.part import NetworkPart
from exporter.jobs.store import JobsPart
from exporter.npusmi.part import DevicesPart
from exporter.pods.part import PodsPart
from exporter.profiles.part import ProfilesPart
from exporter.resources.part import ResourcesPart
from exporter.web.collector import WebStatus


@dataclass(frozen=True)
class Snapshot:
    ready: bool = False                     # the first sample is done (npu-smi's overview)
    status: StatusPart = StatusPart()
    devices: DevicesPart = DevicesPart()
    network: NetworkPart | None = None
    pods: PodsPart | None = None
    profiles: ProfilesPart | None = None
    jobs: JobsPart | None = None
    web: WebStatus | None = None
    resources: ResourcesPart | None = None


class SnapshotStore:
    """The latest sampled snapshot; replacing the reference is the only mutation.

    ``jobs`` and ``web``, when given, are read at every ``current``: they are the parts that
    change between sampler runs (training hooks POST at any time, the web config reloads).
    """

    def __init__(
        self,
        jobs: Callable[[], JobsPart] | None = None,
        web: Callable[[], WebStatus] | None = None,
    ) -> None:
        self._sampled = Snapshot()
        self.jobs = jobs
        self.web = web

    def publish(self, snapshot: Snapshot) -> None:
        self._sampled = snapshot

    @property
    def sampled(self) -> Snapshot:
        """The latest published snapshot, without the live parts."""
        return self._sampled

    @property
    def current(self) -> Snapshot:
        snapshot = self._sampled
        if self.jobs is None and self.web is None:
            return snapshot
        return replace(
            snapshot,
            jobs=self.jobs() if self.jobs is not None else None,
            web=self.web() if self.web is not None else None,
        )
