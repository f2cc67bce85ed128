"""Each chip's `device` label (its logic id, the index frameworks use), fixed for the process's life.

A chip's labels are its identity in Prometheus: served once without a device and once with
one, it would be two chips, each with its own alerts (the device-less copy later "resolved").
So a chip is served only once its device is known:

- from `npu-smi info -m` (its "Chip Logic ID"), read at once when a chip is first listed;
- from the overview itself where the product prints it there (310 and 310P rows: "Device");
- else, once `info -m` has been tried and ``wait`` has passed since the chip was first listed
  (`npu_smi.device_wait`), from the one fallback: the chip's position among the chips listed,
  ordered by NPU id and chip id. That is what `info -m` gives on every product we have seen, so
  a later restart that can read `info -m` serves the same labels.

Once served, a chip's device never changes while the process lives; an `info -m` that later
disagrees (a driver reload renumbering chips) is logged once and takes effect at the next start.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping

from exporter.npusmi.parse.records import ChipMapEntry, InfoChip

log = logging.getLogger("exporter.npusmi")

ChipKey = tuple[int, int]  # (NPU id, chip id)


class DeviceIds:
    def __init__(self, wait: float, clock: Callable[[], float]) -> None:
        self.wait = wait
        self.clock = clock
        self._map: dict[ChipKey, int] = {}  # the latest `info -m` answer
        self._tried_at: float | None = None  # when an `info -m` last ended, answered or not
        self._first_seen: dict[ChipKey, float] = {}
        self._fixed: dict[ChipKey, int | None] = {}  # served: never changed
        self._disagreed: set[ChipKey] = set()

    def tried(self, entries: Iterable[ChipMapEntry] | None) -> None:
        """An `info -m` ended: its chip rows (MCU and CPU rows are left out), or None when it failed."""
        self._tried_at = self.clock()
        if entries is None:
            return
        self._map = {(e.npu_id, e.chip_id): e.logic_id for e in entries if e.is_chip and e.logic_id is not None}
        for key, device in self._fixed.items():
            if key in self._map and self._map[key] != device and key not in self._disagreed:
                self._disagreed.add(key)
                log.warning(
                    "npu-smi info -m gives a chip another device id; the one served stays until a restart",
                    extra={"npu": key[0], "chip": key[1], "served": device, "now": self._map[key]},
                )

    def listed(self, chips: Mapping[ChipKey, InfoChip]) -> None:
        """The chips an overview listed: each one's wait starts when it is first seen."""
        now = self.clock()
        for key in chips:
            self._first_seen.setdefault(key, now)

    def device(self, key: ChipKey, chip: InfoChip, known: Iterable[ChipKey]) -> tuple[bool, int | None]:
        """(servable, device) of one chip; ``known``: every chip listed so far (the fallback's order)."""
        if key in self._fixed:
            return True, self._fixed[key]
        found = self._map.get(key, chip.logic_id)
        if found is None and not self._waited(key):
            return False, None
        self._fixed[key] = found if found is not None else sorted(known).index(key)
        return True, self._fixed[key]

    def pending(self, chips: Mapping[ChipKey, InfoChip]) -> list[ChipKey]:
        """The chips not servable yet (what `info -m` should be asked about now)."""
        return [
            key
            for key, chip in chips.items()
            if key not in self._fixed and key not in self._map and chip.logic_id is None and not self._waited(key)
        ]

    def _waited(self, key: ChipKey) -> bool:
        """`info -m` was tried since the chip was first listed, and the wait is over."""
        seen = self._first_seen.get(key)
        if seen is None or self._tried_at is None or self._tried_at < seen:
            return False
        return self.clock() - seen >= self.wait
