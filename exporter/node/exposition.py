"""What /metrics serves: every enabled collector renders its part of one snapshot, in a fixed
order, and each part's text is kept encoded until that part changes.

A scrape that finds every part's encoding current joins bytes and never renders (most scrapes:
sources change every few seconds, Prometheus scrapes more often, several may scrape). A part
that changed is encoded again, alone, off the event loop: for a sampler run, before its
snapshot is published (:meth:`Exposition.prepare_with`), so scrapes meanwhile get the current
one, ready; for a live part, or a format nobody asked for lately, by the scrape that needs it
(:meth:`Exposition.body`). The encodings of the current snapshot and of the one being prepared
are both kept. The same object is also the registry's prometheus_client collector, for `once`
and for tests that render a fresh copy to compare with what was served.
"""

from __future__ import annotations

import inspect
import threading
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

from prometheus_client.core import Metric
from prometheus_client.exposition import generate_latest as encode_text
from prometheus_client.openmetrics.exposition import (
    generate_latest as encode_openmetrics,
)

from exporter.core.metric import Collector, empty_family
from exporter.core.snapshot import Snapshot
from exporter.node.snapshot import SnapshotStore

OPENMETRICS_EOF = b"# EOF\n"
KEPT = 2  # encodings kept per part and format, bodies per format: the served and the prepared


def _classic_names() -> dict[str, str]:
    """The encoders' arguments for names that need no escaping. Every name we expose is a
    classic one (MetricSpec refuses others), for which the `allow-utf-8` scheme writes the same
    bytes as the default one without testing each name character by character: that test was
    a third of encoding a part (prometheus_client 0.22+; older versions have no schemes)."""
    try:
        from prometheus_client.openmetrics.exposition import ALLOWUTF8
    except ImportError:
        return {}
    takes = all("escaping" in inspect.signature(encode).parameters for encode in (encode_text, encode_openmetrics))
    return {"escaping": ALLOWUTF8} if takes else {}


CLASSIC_NAMES = _classic_names()


@dataclass(frozen=True)
class Rendering:
    collector: Collector[Any]
    name: str  # the snapshot key of the part it renders

    def part(self, snapshot: Snapshot) -> Any:
        """Its part of ``snapshot``; None: nothing to render."""
        return snapshot.parts.get(self.name)


@dataclass(frozen=True)
class _Encoded:
    """One part's encoding in one format, and the part object it was made from."""

    part: Any
    text: bytes


class _Families:
    """A prometheus_client "registry" of one rendering's families, for its encoders."""

    def __init__(self, rendering: Rendering, part: Any) -> None:
        self.rendering, self.part = rendering, part

    def collect(self) -> Iterator[Metric]:
        return iter(self.rendering.collector.render(self.part))


class Exposition:
    """The renderings of a node, their cached encodings, and the joined bodies."""

    def __init__(self, store: SnapshotStore, renderings: Sequence[Rendering]) -> None:
        self.store = store
        self.renderings = tuple(renderings)
        self.encodes = 0  # parts encoded for serving: what the cache saves is counted in tests
        self._lock = threading.Lock()
        # (rendering, openmetrics) -> its latest encodings, newest first
        self._parts: dict[tuple[int, bool], tuple[_Encoded, ...]] = {}
        # openmetrics -> its latest bodies, newest first: (the parts' pieces, the body, every
        # piece of the body: the EOF included)
        self._bodies: dict[bool, tuple[tuple[tuple[bytes, ...], bytes, tuple[bytes, ...]], ...]] = {}

    # --- prometheus_client collector: a fresh render of the current snapshot --------------------
    def describe(self) -> Iterator[Metric]:
        for rendering in self.renderings:
            for spec in rendering.collector.specs:
                yield empty_family(spec)

    def collect(self) -> Iterator[Metric]:
        snapshot = self.store.current  # one snapshot for the whole scrape
        for rendering in self.renderings:
            part = rendering.part(snapshot)
            if part is not None:
                yield from rendering.collector.render(part)

    # --- served bytes -----------------------------------------------------------------------
    def prepare_with(self, preparer: Callable[[Callable[[bool], bytes]], Awaitable[None]]) -> Callable[[], None]:
        """Before a sampler run's snapshot is published, ``preparer`` is handed the function
        that encodes its body in a format (run it off the event loop), until the returned
        function is called."""
        return self.store.prepare_with(lambda snapshot: preparer(partial(self.body_of, snapshot)))

    def ready_body(self, openmetrics: bool) -> bytes | None:
        """The body when every part's encoding is current, else None; never encodes (cheap
        enough for the event loop: identity checks and, when a part changed, a join)."""
        parts = self._parts_of(self.store.current)
        with self._lock:
            pieces = []
            for index, part in enumerate(parts):
                text = b"" if part is None else self._cached(index, openmetrics, part)
                if text is None:
                    return None
                pieces.append(text)
            return self._join(openmetrics, tuple(pieces))

    def body(self, openmetrics: bool) -> bytes:
        """The current body, encoding the parts that changed since they were last encoded (run
        it off the event loop: a large part takes long to encode)."""
        return self.body_of(self.store.current, openmetrics)

    def body_of(self, snapshot: Snapshot, openmetrics: bool) -> bytes:
        """``snapshot``'s body, with the live parts as they are now (off the event loop)."""
        parts = self._parts_of(self.store.with_live(snapshot))
        pieces = [b"" if part is None else self._encoded(index, part, openmetrics) for index, part in enumerate(parts)]
        with self._lock:
            return self._join(openmetrics, tuple(pieces))

    def _parts_of(self, snapshot: Snapshot) -> list[Any]:
        return [rendering.part(snapshot) for rendering in self.renderings]

    def _cached(self, index: int, openmetrics: bool, part: Any) -> bytes | None:
        return next((encoded.text for encoded in self._parts.get((index, openmetrics), ()) if encoded.part is part), None)

    def _encoded(self, index: int, part: Any, openmetrics: bool) -> bytes:
        with self._lock:
            cached = self._cached(index, openmetrics, part)
        if cached is not None:
            return cached
        families = _Families(self.renderings[index], part)
        started = time.perf_counter()
        encode = encode_openmetrics if openmetrics else encode_text
        text = encode(families, **CLASSIC_NAMES).removesuffix(OPENMETRICS_EOF)
        self.store.charge(part, time.perf_counter() - started)
        with self._lock:
            self.encodes += 1
            key = (index, openmetrics)
            self._parts[key] = (_Encoded(part, text), *self._parts.get(key, ())[: KEPT - 1])
        return text

    def parts_of(self, body: bytes) -> tuple[bytes, ...] | None:
        """The pieces ``body`` is the join of, while it is a body this exposition serves (gzip
        compresses them one by one, keeping the unchanged ones)."""
        with self._lock:
            for bodies in self._bodies.values():
                for _, joined, pieces in bodies:
                    if joined is body:
                        return pieces
        return None

    def _join(self, openmetrics: bool, pieces: tuple[bytes, ...]) -> bytes:
        """The joined body; the same object while no piece changed (the gzip cache keys on it)."""
        kept = self._bodies.get(openmetrics, ())
        for cached in kept:
            if len(cached[0]) == len(pieces) and all(a is b for a, b in zip(cached[0], pieces)):
                return cached[1]
        joined = pieces + (OPENMETRICS_EOF,) if openmetrics else pieces
        body = b"".join(joined)
        self._bodies[openmetrics] = ((pieces, body, joined), *kept[: KEPT - 1])
        return body
