"""What the landing page says about the node besides its routes: each collector on or off, and
each source's health. Plain data, made where the node is put together and read by the web
layer, which knows nothing of sources."""

from __future__ import annotations

from dataclasses import dataclass

from exporter.core.health import SourceStatus


@dataclass(frozen=True)
class CollectorState:
    """One collector: on or off, and what it runs (or why it is off)."""

    name: str
    on: bool
    detail: str
    switch: bool = True  # its collector.* switch (off: ``detail`` says only that)


@dataclass(frozen=True)
class About:
    """What `/` shows besides the routes: collectors are fixed at start, sources change."""

    collectors: tuple[CollectorState, ...]
    sources: tuple[SourceStatus, ...]
