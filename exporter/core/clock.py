"""The two clocks, and which one to use.

- Ages (is this reading still fresh? has this TTL run out?) use the monotonic clock: a wall
  clock stepped by NTP or an operator must neither expire live data nor revive old data.
- Unix (wall) time is used only where a timestamp is exported, e.g.
  `cann_exporter_source_last_success_timestamp_seconds`.

Components take a clock as a parameter (tests drive time by hand); these are the defaults.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

Clock = Callable[[], float]
T = TypeVar("T")

monotonic: Clock = time.monotonic
wall: Clock = time.time


@dataclass(frozen=True)
class Stamped(Generic[T]):
    """A reading and the monotonic time it was taken."""

    value: T
    at: float

    def fresh(self, now: float, max_age: float) -> bool:
        return now - self.at <= max_age
