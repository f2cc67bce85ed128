"""The toy part: the latest reading, None when it could not be read."""

from __future__ import annotations

from dataclasses import dataclass

from exporter.core.snapshot import PartKey


@dataclass(frozen=True)
class ToyPart:
    reading: float | None = None


TOY = PartKey("toy", ToyPart)
