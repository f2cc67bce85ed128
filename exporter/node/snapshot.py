"""The snapshot store: the latest snapshot the sampler published (core/snapshot.py), and the
live parts (pushed training steps, the web config, the HTTP listener's counts), which change
between sampler runs and are read again on their own cadence.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Awaitable, Callable, Mapping

from exporter.core.snapshot import Snapshot

log = logging.getLogger("exporter")


# Pausing this many times what reading the live parts and encoding them cost keeps a store that
# changes at every step to a few percent of a core (2% of the loop's and the encoder's time).
LIVE_COST_FACTOR = 50.0


class SnapshotStore:
    """The latest sampled snapshot; replacing the reference is the only mutation.

    A published part equal to the one it replaces is not replaced: an unchanged part stays the
    same object, which is how the exposition knows its encoding is still current. ``live``
    names the parts that change between sampler runs (training
    hooks POST at any time, the web config reloads, clients connect). They are read again only
    after a pause in proportion to what reading them, and encoding what changed, cost
    (``LIVE_COST_FACTOR`` times; the exposition reports its encodes through :meth:`charge`), at
    most ``live_interval`` seconds: a store of a few ranks is fresh at every scrape, while a burst
    of steps into a large store costs one new part (and one encode) per interval, not one per scrape.
    """

    def __init__(
        self,
        live: Mapping[str, Callable[[], object]] | None = None,
        *,
        live_interval: float = 0.0,
        clock: Callable[[], float] = time.monotonic,
        cost_clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self._sampled = Snapshot()
        self.live = dict(live or {})
        self.live_interval = live_interval
        self._clock = clock
        self._cost_clock = cost_clock
        self._pause = 0.0  # until the live parts are read again: LIVE_COST_FACTOR x their cost
        self._live: tuple[float, dict[str, object]] | None = None
        self._lock = threading.Lock()
        self._preparer: Callable[[Snapshot], Awaitable[None]] | None = None
        self._generation = 0  # publishes so far: a prepared publish checks nobody published meanwhile

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
        if preparer is not None and _changed(snapshot, self._sampled):
            try:
                await preparer(snapshot)
            except Exception:  # the scrape that needs it encodes it (and fails) in the open
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
        old = self._sampled.parts
        kept = {name: old[name] for name, part in snapshot.parts.items() if name in old and part is not old[name] and part == old[name]}
        return snapshot.replaced(kept) if kept else snapshot

    @property
    def sampled(self) -> Snapshot:
        """The latest published snapshot, without the live parts."""
        return self._sampled

    @property
    def current(self) -> Snapshot:
        return self.with_live(self._sampled)

    def with_live(self, snapshot: Snapshot) -> Snapshot:
        """``snapshot`` with the live parts as they are now."""
        if not self.live:
            return snapshot
        return snapshot.replaced(self._live_parts()[1])

    def charge(self, part: object, seconds: float) -> None:
        """``part`` took ``seconds`` to encode: when it is a live part, the pause grows by its
        share (an encode of thousands of series costs far more than reading them)."""
        with self._lock:
            live = self._live
            if live is not None and any(part is p for p in live[1].values() if p is not None):
                self._pause = min(self.live_interval, self._pause + LIVE_COST_FACTOR * seconds)

    def _live_parts(self) -> tuple[float, dict[str, object]]:
        with self._lock:  # scrapes encode in threads: one reader refreshes, the others reuse
            now = self._clock()
            live = self._live
            if live is None or now - live[0] >= self._pause:
                started = self._cost_clock()
                parts = {name: read() for name, read in self.live.items()}
                self._pause = min(self.live_interval, LIVE_COST_FACTOR * (self._cost_clock() - started))
                if live is not None:  # equal parts stay the same object (see publish)
                    parts = {
                        name: live[1][name] if name in live[1] and (part is live[1][name] or part == live[1][name]) else part
                        for name, part in parts.items()
                    }
                live = self._live = (now, parts)
            return live


def _changed(new: Snapshot, old: Snapshot) -> bool:
    """Whether some part of ``new`` is not the very object of ``old``'s."""
    return new.parts.keys() != old.parts.keys() or any(part is not old.parts[name] for name, part in new.parts.items())
