"""What /metrics serves: every enabled collector renders its part of one snapshot, in a fixed
order, and each part's text is kept encoded until that part changes.

A scrape that finds every part's encoding current joins bytes and never renders (most scrapes:
sources change every few seconds, Prometheus scrapes more often, several may scrape). A part
that changed is encoded again, alone, by :meth:`Exposition.body`, which the web app runs off
the event loop. The same object is also the registry's prometheus_client collector, for
`once` and for tests that render a fresh copy to compare with what was served.
"""

from __future__ import annotations

import inspect
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from prometheus_client.core import Metric
from prometheus_client.exposition import generate_latest as encode_text
from prometheus_client.openmetrics.exposition import (
    generate_latest as encode_openmetrics,
)

from exporter.core.metric import Collector, family
from exporter.node.snapshot import Snapshot, SnapshotStore

OPENMETRICS_EOF = b"# EOF\n"


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
    part: Callable[[Snapshot], Any]     # the collector's part of a snapshot; None: nothing to render


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
        self.encodes = 0     # parts encoded for serving: what the cache saves is counted in tests
        self._lock = threading.Lock()
        self._parts: dict[tuple[int, bool], _Encoded] = {}              # (rendering, openmetrics) -> encoding
        # openmetrics -> (the parts' pieces, the body, every piece of the body: the EOF included)
        self._bodies: dict[bool, tuple[tuple[bytes, ...], bytes, tuple[bytes, ...]]] = {}

    # --- prometheus_client collector: a fresh render of the current snapshot --------------------
    def describe(self) -> Iterator[Metric]:
        for rendering in self.renderings:
            for spec in rendering.collector.specs:
                yield family(spec)

    def collect(self) -> Iterator[Metric]:
        snapshot = self.store.current    # one snapshot for the whole scrape
        for rendering in self.renderings:
            part = rendering.part(snapshot)
            if part is not None:
                yield from rendering.collector.render(part)

    # --- served bytes -----------------------------------------------------------------------
    def on_change(self, listener: Callable[[], None]) -> Callable[[], None]:
        """``listener`` is called after a sampler run changed a part (not for the live parts),
        until the returned function is called."""
        return self.store.on_change(listener)

    def ready_body(self, openmetrics: bool) -> bytes | None:
        """The body when every part's encoding is current, else None; never encodes (cheap
        enough for the event loop: identity checks and, when a part changed, a join)."""
        parts = self._current_parts()
        with self._lock:
            pieces = []
            for index, part in enumerate(parts):
                encoded = self._parts.get((index, openmetrics))
                if part is not None and (encoded is None or encoded.part is not part):
                    return None
                pieces.append(encoded.text if part is not None and encoded else b"")
            return self._join(openmetrics, tuple(pieces))

    def body(self, openmetrics: bool) -> bytes:
        """The body, encoding the parts that changed since they were last encoded (run it off
        the event loop: a large part takes long to encode)."""
        parts = self._current_parts()
        pieces = []
        for index, part in enumerate(parts):
            pieces.append(b"" if part is None else self._encoded(index, part, openmetrics))
        with self._lock:
            return self._join(openmetrics, tuple(pieces))

    def _current_parts(self) -> list[Any]:
        snapshot = self.store.current
        return [rendering.part(snapshot) for rendering in self.renderings]

    def _encoded(self, index: int, part: Any, openmetrics: bool) -> bytes:
        with self._lock:
            cached = self._parts.get((index, openmetrics))
            if cached is not None and cached.part is part:
                return cached.text
        families = _Families(self.renderings[index], part)
        started = time.perf_counter()
        encode = encode_openmetrics if openmetrics else encode_text
        text = encode(families, **CLASSIC_NAMES).removesuffix(OPENMETRICS_EOF)
        self.store.charge(part, time.perf_counter() - started)
        with self._lock:
            self.encodes += 1
            self._parts[(index, openmetrics)] = _Encoded(part, text)
        return text

    def parts_of(self, body: bytes) -> tuple[bytes, ...] | None:
        """The pieces ``body`` is the join of, while it is a body this exposition serves (gzip
        compresses them one by one, keeping the unchanged ones)."""
        with self._lock:
            for _, joined, pieces in self._bodies.values():
                if joined is body:
                    return pieces
        return None

    def _join(self, openmetrics: bool, pieces: tuple[bytes, ...]) -> bytes:
        """The joined body; the same object while no piece changed (the gzip cache keys on it)."""
        cached = self._bodies.get(openmetrics)
        if cached is not None and len(cached[0]) == len(pieces) and all(a is b for a, b in zip(cached[0], pieces)):
            return cached[1]
        joined = pieces + (OPENMETRICS_EOF,) if openmetrics else pieces
        body = b"".join(joined)
        self._bodies[openmetrics] = (pieces, body, joined)
        return body
