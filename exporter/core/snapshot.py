"""The snapshot: what /metrics renders at one moment, one immutable part per source, keyed by
the source's name.

A snapshot knows no source: a new source adds a key, not a field. Readers ask for a part
through its :class:`PartKey` (the name and the part's type, declared next to the part), which
gives them the part typed, or None when the source is off.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Generic, TypeVar

P = TypeVar("P")


@dataclass(frozen=True)
class PartKey(Generic[P]):
    """A source's name and the type of its part."""

    name: str
    type: type[P]


@dataclass(frozen=True)
class Snapshot:
    ready: bool = False  # the first sample is done (npu-smi's overview)
    parts: Mapping[str, object] = field(default_factory=lambda: MappingProxyType({}))

    @staticmethod
    def of(ready: bool, parts: Mapping[str, object]) -> Snapshot:
        """A snapshot of ``parts`` (a None part, a source that is off, is left out)."""
        return Snapshot(ready, MappingProxyType({name: part for name, part in parts.items() if part is not None}))

    def get(self, key: PartKey[P]) -> P | None:
        """``key``'s part, or None when its source is off or has no part."""
        part = self.parts.get(key.name)
        if part is None:
            return None
        if not isinstance(part, key.type):
            raise TypeError(f"part {key.name!r} is a {type(part).__name__}, not a {key.type.__name__}")
        return part

    def replaced(self, parts: Mapping[str, object]) -> Snapshot:
        """This snapshot with ``parts`` put in (None removes one)."""
        return Snapshot.of(self.ready, {**self.parts, **parts})

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Snapshot) and self.ready == other.ready and dict(self.parts) == dict(other.parts)

    def __hash__(self) -> int:
        return hash((self.ready, tuple(sorted(self.parts))))
