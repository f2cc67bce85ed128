"""What /metrics serves, encoded: every enabled collector renders its part of a snapshot, in a
fixed order, and each part's text is kept encoded until that part changes.

:meth:`Exposition.encode` is the encoder the publisher (publisher.py) runs in its one thread: a
part that is the very object it encoded before is not encoded again, so a new snapshot costs
the encode of the parts that changed and a join. The same object is also the registry's
prometheus_client collector, rendering the node's current snapshot afresh: for `once`, and for
tests that compare what was served with a fresh render.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from prometheus_client.core import Metric
from prometheus_client.exposition import generate_latest as encode_text
from prometheus_client.openmetrics.exposition import (
    generate_latest as encode_openmetrics,
)

from exporter.core.metric import Collector, empty_family
from exporter.core.snapshot import Snapshot

OPENMETRICS_EOF = b"# EOF\n"
KEPT = 2  # encodings kept per part and format, bodies per format: the served and the next


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

    def part_in(self, snapshot: Snapshot) -> Any:
        """Its part of ``snapshot``; None: nothing to render."""
        return snapshot.parts.get(self.name)


@dataclass(frozen=True)
class Encoded:
    """A snapshot's body in one format, and the pieces it joins (the parts' texts, then the
    OpenMetrics EOF): gzip compresses the pieces one by one, keeping the unchanged ones."""

    body: bytes
    pieces: tuple[bytes, ...]


@dataclass(frozen=True)
class _Part:
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
    """The renderings of a node and their kept encodings. :meth:`encode` is not thread-safe:
    one thread (the publisher's encoder) calls it."""

    def __init__(self, renderings: Sequence[Rendering], current: Callable[[], Snapshot] = Snapshot) -> None:
        self.renderings = tuple(renderings)
        self.current = current  # what a fresh render (collect) renders
        self.encodes = 0  # parts encoded so far: what the kept encodings save is counted in tests
        # (rendering, openmetrics) -> its latest encodings, newest first
        self._parts: dict[tuple[int, bool], tuple[_Part, ...]] = {}
        self._bodies: dict[bool, tuple[Encoded, ...]] = {}  # openmetrics -> the latest bodies

    # --- prometheus_client collector: a fresh render of the current snapshot --------------------
    def describe(self) -> Iterator[Metric]:
        for rendering in self.renderings:
            for spec in rendering.collector.specs:
                yield empty_family(spec)

    def collect(self) -> Iterator[Metric]:
        snapshot = self.current()  # one snapshot for the whole render
        for rendering in self.renderings:
            part = rendering.part_in(snapshot)
            if part is not None:
                yield from rendering.collector.render(part)

    # --- served bytes -----------------------------------------------------------------------
    def encode(self, snapshot: Snapshot, openmetrics: bool) -> Encoded:
        """``snapshot``'s body, encoding only the parts not encoded before; the same object while
        no part changed (the gzip of it is kept on that)."""
        texts = tuple(self._text(index, rendering.part_in(snapshot), openmetrics) for index, rendering in enumerate(self.renderings))
        kept = self._bodies.get(openmetrics, ())
        for encoded in kept:
            if len(encoded.pieces) >= len(texts) and all(a is b for a, b in zip(encoded.pieces, texts)):
                return encoded
        pieces = (*texts, OPENMETRICS_EOF) if openmetrics else texts
        encoded = Encoded(b"".join(pieces), pieces)
        self._bodies[openmetrics] = (encoded, *kept[: KEPT - 1])
        return encoded

    def _text(self, index: int, part: Any, openmetrics: bool) -> bytes:
        if part is None:
            return b""
        key = (index, openmetrics)
        kept = self._parts.get(key, ())
        for encoded in kept:
            if encoded.part is part:
                return encoded.text
        encode = encode_openmetrics if openmetrics else encode_text
        text = encode(_Families(self.renderings[index], part), **CLASSIC_NAMES).removesuffix(OPENMETRICS_EOF)
        self.encodes += 1
        self._parts[key] = (_Part(part, text), *kept[: KEPT - 1])
        return text
