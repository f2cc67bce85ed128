"""The one exposition buffer: the latest (snapshot, bodies) pair, and the encoder that makes the
next one. Data flows one way: the sampler publishes a snapshot, the encoder turns it into
bodies, the pair is swapped in at once, and the web layer reads the latest pair
(core/exposed.py).

After every publish, and every ``live_interval`` for the live parts (training steps pushed to the
ingest, the web config's and the listener's counts: read again on that cadence, never at scrape
time), :meth:`Publisher.run` builds the snapshot as of now. When a part changed, its encoder
thread makes the bodies (text or OpenMetrics, gzip) of the variants scraped in the last
``WANTED_SECONDS`` and since the last pair was made, then swaps the new pair in. Scrapes meanwhile
get the previous pair, ready, and the first scrape after the swap finds its body made; data that
changes faster than it is scraped is encoded ahead once per scrape, not once per change. A
variant the pair lacks is made for the pair by the scrape that asks, in the same thread (scrapes
arriving during that encode wait for it rather than each starting their own). With nothing
scraped since the last pair, a publish swaps its snapshot in at once, with no body made.

Encoding a large node takes tens of milliseconds: none of it runs on the event loop, which only
reads the live parts, compares part objects and swaps references. Parts equal to the ones served
are kept as the served objects, so their encodings and gzip chunks stay valid.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TypeVar

from exporter.core.exposed import Variant
from exporter.core.snapshot import Snapshot
from exporter.node.exposition import Exposition
from exporter.node.gzip_parts import PartsGzip

log = logging.getLogger("exporter")

_T = TypeVar("_T")

GZIP_LEVEL = 5
# A variant is made ahead after a change while someone scraped it this recently (Prometheus
# scrapes every 10 s to 2 min; a one-off curl is not worth encoding for an hour).
WANTED_SECONDS = 600.0
# The live parts are read again this often: what /metrics shows of them is at most this old,
# plus the encode. A burst of training steps costs one new part per interval, not one per step.
LIVE_INTERVAL = 1.0


@dataclass(frozen=True)
class Served:
    """A snapshot and the bodies made of it so far, by variant."""

    snapshot: Snapshot = field(default_factory=Snapshot)
    bodies: Mapping[Variant, bytes] = field(default_factory=lambda: MappingProxyType({}))

    def with_body(self, variant: Variant, body: bytes) -> Served:
        return Served(self.snapshot, MappingProxyType({**self.bodies, variant: body}))


class Publisher:
    """The latest pair (``served``), the sampler's latest snapshot, the live parts and the
    encoder thread. Implements core.exposed.Exposed for the web layer."""

    def __init__(
        self,
        exposition: Exposition,
        live: Mapping[str, Callable[[], object]] | None = None,
        *,
        live_interval: float = LIVE_INTERVAL,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.exposition = exposition
        exposition.current = lambda: self.current  # what a fresh render (the registry's) renders
        self.live = dict(live or {})
        self.live_interval = live_interval
        self.served = Served()
        self._sampled = Snapshot()
        self._clock = clock
        self._published = asyncio.Event()
        self._encoding = asyncio.Lock()  # one encode at a time; waiters find its body made
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="metrics-encoder")
        self._gzips = {openmetrics: PartsGzip(GZIP_LEVEL) for openmetrics in (False, True)}
        self._wanted: dict[Variant, float] = {}  # variant -> when it was last scraped
        self._scraped_since: set[Variant] = set()  # scraped since the last pair was made
        self._swapping = False  # a pair's bodies are being made: a publish waits its turn

    # --- the sampler's side -----------------------------------------------------------------
    def publish(self, snapshot: Snapshot) -> None:
        """The sampler's latest snapshot; the next pair is made of it (returns at once). With no
        body to make ahead (nothing scraped since the last pair), it is swapped in now."""
        self._sampled = self._kept(snapshot)  # compared once here, not at every live read after
        if self._scraped_since or self._swapping:
            self._published.set()  # the encoder's turn
            return
        snapshot = self._kept(self.current)
        if _changed(snapshot, self.served.snapshot):
            self.served = Served(snapshot)

    @property
    def sampled(self) -> Snapshot:
        """The sampler's latest snapshot, without the live parts."""
        return self._sampled

    @property
    def current(self) -> Snapshot:
        """The latest snapshot with the live parts as they are now (a fresh render's)."""
        return self._sampled.replaced(self._read_live()) if self.live else self._sampled

    async def run(self) -> None:
        """Make and swap in a pair after each publish and every ``live_interval``, until cancelled."""
        try:
            while True:
                with contextlib.suppress(asyncio.TimeoutError):  # TimeoutError itself from 3.11 on
                    await asyncio.wait_for(self._published.wait(), self.live_interval)
                self._published.clear()
                try:
                    await self.swap()
                except Exception:  # the scrape that needs a body makes it (and fails) in the open
                    log.exception("making the new exposition failed")
        finally:
            self._executor.shutdown(wait=False, cancel_futures=True)

    async def swap(self) -> None:
        """Swap in the pair of the snapshot as of now, with the bodies of the variants due, if
        some part changed."""
        snapshot = self._kept(self.current)
        if not _changed(snapshot, self.served.snapshot):
            return
        due = self._due()
        bodies: dict[Variant, bytes] = {}
        if due:
            self._swapping = True
            try:
                async with self._encoding:
                    bodies = await self._in_thread(lambda: {variant: self._make(snapshot, variant) for variant in due})
            finally:
                self._swapping = False
        self.served = Served(snapshot, MappingProxyType(bodies))

    # --- the web layer's side (core.exposed.Exposed) ----------------------------------------
    async def body(self, variant: Variant) -> bytes:
        self._wanted[variant] = self._clock()
        self._scraped_since.add(variant)
        served = self.served
        made = served.bodies.get(variant)
        if made is not None:
            return made
        async with self._encoding:
            served = self.served  # a pair swapped in meanwhile may have it, or a scrape made it
            made = served.bodies.get(variant)
            if made is None:
                snapshot = served.snapshot
                made = await self._in_thread(lambda: self._make(snapshot, variant))
                if self.served is served:
                    self.served = served.with_body(variant, made)
            return made

    # --- the encoder thread -----------------------------------------------------------------
    def _make(self, snapshot: Snapshot, variant: Variant) -> bytes:
        encoded = self.exposition.encode(snapshot, variant.openmetrics)
        if not variant.gzip:
            return encoded.body
        return self._gzips[variant.openmetrics].gzip(encoded.pieces, encoded.body)

    async def _in_thread(self, work: Callable[[], _T]) -> _T:
        return await asyncio.get_running_loop().run_in_executor(self._executor, work)

    # --- on the event loop ------------------------------------------------------------------
    def _read_live(self) -> dict[str, object]:
        return {name: read() for name, read in self.live.items()}

    def _kept(self, snapshot: Snapshot) -> Snapshot:
        """``snapshot`` with each part equal to the served one replaced by the served object:
        an unchanged part stays the same object, so its encodings stay valid."""
        old = self.served.snapshot.parts
        kept = {name: old[name] for name, part in snapshot.parts.items() if name in old and part is not old[name] and part == old[name]}
        return snapshot.replaced(kept) if kept else snapshot

    def _due(self) -> list[Variant]:
        """The variants to make ahead, the latest scraped first: scraped lately and since the
        last pair was made (forgetting those not scraped for ``WANTED_SECONDS``)."""
        now = self._clock()
        for variant in [v for v, scraped in self._wanted.items() if now - scraped > WANTED_SECONDS]:
            del self._wanted[variant]
        due = sorted((v for v in self._scraped_since if v in self._wanted), key=lambda v: -self._wanted[v])
        self._scraped_since.clear()
        return due


def _changed(new: Snapshot, old: Snapshot) -> bool:
    """Whether some part of ``new`` is not the very object of ``old``'s (or readiness moved)."""
    return (
        new.ready != old.ready
        or new.parts.keys() != old.parts.keys()
        or any(part is not old.parts[name] for name, part in new.parts.items())
    )
