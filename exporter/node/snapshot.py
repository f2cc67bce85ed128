"""The snapshot: what /metrics renders at one moment, one immutable part per source.

The sampler publishes a new snapshot after every task run, built from each sampled source's
``part()`` (npu-smi, hccn_tool, kubelet, profiles, the exporter's process) and the exporter's own
status. The parts that change between runs by themselves, the ingest (jobs), the web
config and the HTTP listener's counts, are read when a scrape asks. A part is None when its
source is off.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, fields, replace

from exporter.core.selfmetrics import StatusPart
from exporter.hccn.part import NetworkPart
from exporter.jobs.store import JobsPart
from exporter.npusmi.part import DevicesPart
from exporter.pods.part import PodsPart
from exporter.profiles.part import ProfilesPart
from exporter.resources.part import ResourcesPart
from exporter.web.collector import HttpStatus, WebStatus

log = logging.getLogger("exporter")


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
    http: HttpStatus | None = None          # `serve`'s listener: connections, the cap, deadlines


# Pausing this many times what reading the live parts and encoding them cost keeps a store that
# changes at every step to a few percent of a core (2% of the loop's and the encoder's time).
LIVE_COST_FACTOR = 50.0


class SnapshotStore:
    """The latest sampled snapshot; replacing the reference is the only mutation.

    A published part equal to the one it replaces is not replaced: an unchanged part stays the
    same object, which is how the exposition knows its encoding is still current. ``jobs``,
    ``web`` and ``http``, when given, are the parts that change between sampler runs (training
    hooks POST at any time, the web config reloads, clients connect). They are read again only
    after a pause in proportion to what reading them, and encoding what changed, cost
    (``LIVE_COST_FACTOR`` times; the exposition reports its encodes through :meth:`charge`), at
    most ``live_interval`` seconds: a store of a few ranks is fresh at every scrape, while a burst
    of steps into a large store costs one new part (and one encode) per interval, not one per scrape.
    """

    def __init__(
        self,
        jobs: Callable[[], JobsPart] | None = None,
        web: Callable[[], WebStatus] | None = None,
        *,
        http: Callable[[], HttpStatus] | None = None,
        live_interval: float = 0.0,
        clock: Callable[[], float] = time.monotonic,
        cost_clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self._sampled = Snapshot()
        self.jobs = jobs
        self.web = web
        self.http = http
        self.live_interval = live_interval
        self._clock = clock
        self._cost_clock = cost_clock
        self._pause = 0.0   # until the live parts are read again: LIVE_COST_FACTOR x their cost
        self._live: tuple[float, JobsPart | None, WebStatus | None, HttpStatus | None] | None = None
        self._lock = threading.Lock()
        self._preparer: Callable[[Snapshot], Awaitable[None]] | None = None
        self._generation = 0   # publishes so far: a prepared publish checks nobody published meanwhile

    def publish(self, snapshot: Snapshot) -> None:
        """Make ``snapshot`` current now (its encodings are made when a scrape asks)."""
        self._sampled = self._merged(snapshot)
        self._generation += 1

    async def publish_prepared(self, build: Callable[[], Snapshot]) -> None:
        """Publish the snapshot ``build`` makes once the preparer (the web app's encoder) has
        encoded what changed in it: until then scrapes get the current snapshot, ready, instead
        of waiting for an encode. If someone published meanwhile, build again (from the sources'
        latest parts) and publish that at once."""
        generation = self._generation
        snapshot = self._merged(build())
        preparer = self._preparer
        if preparer is not None and any(getattr(snapshot, f.name) is not getattr(self._sampled, f.name) for f in fields(Snapshot)):
            try:
                await preparer(snapshot)
            except Exception:   # the scrape that needs it encodes it (and fails) in the open
                log.exception("preparing the new snapshot's encodings failed")
            if self._generation != generation:
                snapshot = self._merged(build())
        self._sampled = snapshot
        self._generation += 1

    def prepare_with(self, preparer: Callable[[Snapshot], Awaitable[None]]) -> Callable[[], None]:
        """Have ``preparer`` encode each changed snapshot of :meth:`publish_prepared` before it is
        published, until the returned function is called."""
        self._preparer = preparer

        def stop() -> None:
            if self._preparer is preparer:
                self._preparer = None
        return stop

    def _merged(self, snapshot: Snapshot) -> Snapshot:
        """``snapshot`` with each part equal to the current one replaced by the current one: an
        unchanged part stays the same object, so its encodings stay valid."""
        old = self._sampled
        kept = {f.name: getattr(old, f.name) for f in fields(Snapshot)
                if getattr(snapshot, f.name) is not getattr(old, f.name) and getattr(snapshot, f.name) == getattr(old, f.name)}
        return replace(snapshot, **kept) if kept else snapshot

    @property
    def sampled(self) -> Snapshot:
        """The latest published snapshot, without the live parts."""
        return self._sampled

    @property
    def current(self) -> Snapshot:
        return self.with_live(self._sampled)

    def with_live(self, snapshot: Snapshot) -> Snapshot:
        """``snapshot`` with the live parts as they are now."""
        if self.jobs is None and self.web is None and self.http is None:
            return snapshot
        _, jobs, web, http = self._live_parts()
        return replace(snapshot, jobs=jobs, web=web, http=http)

    def charge(self, part: object, seconds: float) -> None:
        """``part`` took ``seconds`` to encode: when it is a live part, the pause grows by its
        share (an encode of thousands of series costs far more than reading them)."""
        with self._lock:
            live = self._live
            if live is not None and any(part is p for p in live[1:] if p is not None):
                self._pause = min(self.live_interval, self._pause + LIVE_COST_FACTOR * seconds)

    def _live_parts(self) -> tuple[float, JobsPart | None, WebStatus | None, HttpStatus | None]:
        with self._lock:   # scrapes encode in threads: one reader refreshes, the others reuse
            now = self._clock()
            live = self._live
            if live is None or now - live[0] >= self._pause:
                started = self._cost_clock()
                jobs = self.jobs() if self.jobs is not None else None
                web = self.web() if self.web is not None else None
                http = self.http() if self.http is not None else None
                self._pause = min(self.live_interval, LIVE_COST_FACTOR * (self._cost_clock() - started))
                if live is not None:   # equal parts stay the same object (see publish)
                    jobs = live[1] if jobs is live[1] or jobs == live[1] else jobs
                    web = live[2] if web is live[2] or web == live[2] else web
                    http = live[3] if http is live[3] or http == live[3] else http
                live = self._live = (now, jobs, web, http)
            return live
