"""One protocol for every source of a snapshot part: its name, the tasks the sampler runs for
it, and the part it produces. Three words, three things: a *part* is the frozen data one source
contributes to a snapshot; a source *produces* it (``produce``); a rendering finds it in a
snapshot (``node/exposition.Rendering.part_in``).

``produce(earlier)`` is given the snapshot of the parts built before it (in the order of the
registration table), so a part that depends on another reads it there: pods match kubelet
devices to npu-smi's chips, the exporter's status counts the chips gone stale. Three small
variants adapt what sources look like:

- :class:`Sampled`: a source object with ``tasks()`` and ``part()`` (npu-smi, hccn_tool, ...);
- :class:`Derived`: a part computed from the earlier parts, with the tasks of a source if any;
- :class:`Live`: a part that changes between sampler runs (pushed training steps, the web
  listener's counts): no task; it is read again on the live cadence, not at scrape time.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from exporter.core.sampler import Task
from exporter.core.snapshot import Snapshot


class Source(Protocol):
    @property
    def name(self) -> str:
        """The snapshot key of its part."""

    def tasks(self) -> Sequence[Task]:
        """What the sampler runs for it, on their intervals (none for a live part)."""

    def produce(self, earlier: Snapshot) -> object | None:
        """Its part as of now, given the parts produced before it; None: nothing to render."""


class Scheduled(Protocol):
    """What a sampled source object offers."""

    def tasks(self) -> Sequence[Task]: ...

    def part(self) -> object: ...


class HasTasks(Protocol):
    def tasks(self) -> Sequence[Task]: ...


@dataclass(frozen=True)
class Sampled:
    """A source object whose part needs nothing else."""

    name: str
    source: Scheduled

    def tasks(self) -> Sequence[Task]:
        return self.source.tasks()

    def produce(self, earlier: Snapshot) -> object | None:
        return self.source.part()


@dataclass(frozen=True)
class Derived:
    """A part made from the earlier parts (``make``), sampled by ``source`` if given."""

    name: str
    make: Callable[[Snapshot], object | None]
    source: HasTasks | None = None

    def tasks(self) -> Sequence[Task]:
        return self.source.tasks() if self.source is not None else ()

    def produce(self, earlier: Snapshot) -> object | None:
        return self.make(earlier)


@dataclass(frozen=True)
class Live:
    """A part that changes between sampler runs, read on the live cadence."""

    name: str
    read: Callable[[], object]
    source: object = None  # the object behind ``read`` (the ingest store, the web config), for callers

    def tasks(self) -> Sequence[Task]:
        return ()

    def produce(self, earlier: Snapshot) -> object | None:
        return self.read()
