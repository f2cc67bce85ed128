"""Which npu-smi calls to make, when, and how their records become snapshot parts.

npu-smi costs about a second per call on real hosts, so the schedule keeps spawns few:

- every ``interval`` (default 10 s): one `npu-smi info` for all chips (utilization, HBM/DDR,
  power, temperature, health, processes);
- at start, every ``inventory_interval`` (default 1 h) and whenever the set of chips in the
  overview changes: `npu-smi info -m` (logic ids) and `-t board -i N -c C` per chip (die id);
- every ``detail_interval`` (default 60 s): per NPU `-t usages` (vector/cube/AI CPU/control
  CPU, bandwidths), `-t common` (clock; 310P card power), `-t ecc`; optionally `-t memory`
  (HBM temperature). Each is one call per card, not per chip. `-t health -i N -c C` (error
  codes) is per chip, and only for chips whose overview health is not OK: a healthy node
  pays nothing for it.

A failing call or card is recorded by reason and hides nothing else.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, replace

from exporter.parsers import npusmi as p
from exporter.metrics import HEALTH_STATES
from exporter.snapshot import ChipSample, DevicesPart, EccCount, ProcessSample
from exporter.sources.health import Failure, HealthRegistry
from exporter.sources.runner import CommandRunner, RunError, RunResult

MIB = 1024 * 1024
DETAIL_KINDS = ("usages", "common", "ecc", "memory", "health")

ChipKey = tuple[int, int]  # (npu id, chip index)


@dataclass(frozen=True)
class NpuSmiSettings:
    command: tuple[str, ...] = ("npu-smi",)   # argv prefix; the simulator is a longer one
    timeout: float = 10.0
    interval: float = 10.0
    detail_interval: float = 60.0
    inventory_interval: float = 3600.0
    details: tuple[str, ...] = ("usages", "common", "ecc", "health")
    board: bool = True
    max_age: float = 180.0


@dataclass(frozen=True)
class _Stamped:
    value: object
    at: float


class NpuSmiSource:
    """Keeps the latest parsed npu-smi records and turns them into a DevicesPart."""

    INFO, INVENTORY, DETAILS = "npu_smi_info", "npu_smi_inventory", "npu_smi_details"

    def __init__(
        self,
        settings: NpuSmiSettings,
        runner: CommandRunner,
        health: HealthRegistry,
        clock: Callable[[], float] = time.monotonic,  # ages only: a wall-clock jump must not age data
    ) -> None:
        self.settings = settings
        self.runner = runner
        self.health = health
        self.clock = clock
        self._table: p.InfoTable | None = None
        self._table_at = -math.inf          # never read: infinitely old on the monotonic clock
        self._table_ok = False
        self._known: dict[ChipKey, p.InfoChip] = {}      # every chip ever seen, for npu_up 0
        self._map: dict[ChipKey, p.ChipMapEntry] = {}
        self._map_keys: frozenset[ChipKey] | None = None
        self._inventory_at: float | None = None
        self._boards: dict[ChipKey, p.BoardInfo] = {}
        self._details: dict[tuple[str, ChipKey], _Stamped] = {}
        self._card_power: dict[int, _Stamped] = {}        # 310P: MCU power of `-t common`

    # --- scheduled work ------------------------------------------------------------------

    async def refresh_overview(self) -> None:
        """`npu-smi info`, then the inventory when it is due."""
        start = time.monotonic()
        failures: list[Failure] = []
        try:
            table = p.parse_info((await self._run("info")).output)
        except (RunError, p.NpuSmiError) as exc:
            failures.append(Failure("info", exc.reason, str(exc)))
            self._table_ok = False
        else:
            self._table, self._table_at, self._table_ok = table, self.clock(), True
            for chip in table.chips:
                self._known[(chip.npu_id, chip.chip_id)] = chip
        self.health[self.INFO].record(time.monotonic() - start, failures, ["info"])
        if self._inventory_due():
            await self.refresh_inventory()

    async def refresh_inventory(self) -> None:
        """`info -m` for logic ids, `-t board -c` per chip for die ids."""
        start = time.monotonic()
        failures: list[Failure] = []
        self._inventory_at = self.clock()
        try:
            entries = p.parse_chip_map((await self._run("info", "-m")).output)
        except (RunError, p.NpuSmiError) as exc:
            failures.append(Failure("info -m", exc.reason, str(exc)))
        else:
            self._map = {(e.npu_id, e.chip_id): e for e in entries if e.is_chip}
        self._map_keys = self._overview_keys()
        subjects = ["info -m"]
        if self.settings.board:
            keys = sorted(self._overview_keys() or self._map)
            subjects += [f"board -i {n} -c {c}" for n, c in keys]
            results = await asyncio.gather(*(self._board(key) for key in keys))
            failures += [f for f in results if f is not None]
        self.health[self.INVENTORY].record(time.monotonic() - start, failures, subjects)

    async def refresh_details(self) -> None:
        """Per-card `-t` queries, concurrently within the runner's bound."""
        start = time.monotonic()
        npus = sorted({npu for npu, _ in self._overview_keys() or self._known})
        jobs = [(kind, npu) for npu in npus for kind in self.settings.details if kind != "health"]
        unwell = self._unwell_chips() if "health" in self.settings.details else []
        results = await asyncio.gather(
            *(self._detail(kind, npu) for kind, npu in jobs),
            *(self._health_detail(key) for key in unwell),
        )
        failures = [f for f in results if f is not None]
        subjects = [f"{kind} -i {npu}" for kind, npu in jobs] + [f"health -i {n} -c {c}" for n, c in unwell]
        self.health[self.DETAILS].record(time.monotonic() - start, failures, subjects)

    def tasks(self) -> list[tuple[str, float, Callable[[], Awaitable[None]]]]:
        """(name, interval, coroutine function) for the sampler, in first-run order."""
        out: list[tuple[str, float, Callable[[], Awaitable[None]]]] = [
            (self.INFO, self.settings.interval, self.refresh_overview)
        ]
        if self.settings.details:
            out.append((self.DETAILS, self.settings.detail_interval, self.refresh_details))
        return out

    # --- building the snapshot part ----------------------------------------------------------

    def part(self) -> DevicesPart:
        now = self.clock()
        table = self._table
        current = {(c.npu_id, c.chip_id): c for c in table.chips} if table else {}
        chips = tuple(
            self._chip_sample(key, chip, up=self._table_ok and key in current, now=now)
            for key, chip in sorted(self._known.items())
        )
        return DevicesPart(
            chips=chips,
            processes=self._processes(table),
            processes_observed_at=self._table_at,
            chips_seen=len(current) if self._table_ok else None,
            driver_version=table.driver_version if table else None,
            tool_version=table.tool_version if table else None,
        )

    def _chip_sample(self, key: ChipKey, chip: p.InfoChip, up: bool, now: float) -> ChipSample:
        mapped = self._map.get(key)
        board = self._boards.get(key)
        sample = ChipSample(
            npu=chip.npu_id,
            chip=chip.chip_id,
            device=mapped.logic_id if mapped else chip.logic_id,
            observed_at=self._table_at if up else 0.0,
            up=up,
            model=chip.name,
            bus_id=chip.bus_id,
            phy_id=chip.phy_id if chip.phy_id is not None else (mapped.phy_id if mapped else None),
            vdie_id=board.vdie_id if board else None,
        )
        if not up:
            return sample  # identity only: a chip we cannot read has no values
        sample = replace(
            sample,
            health=_health(chip.health),
            aicore_utilization_ratio=_ratio(chip.aicore_percent),
            npu_utilization_ratio=_ratio(chip.npu_util_percent),
            hbm_used_bytes=_bytes(chip.hbm_used_mb),
            hbm_total_bytes=_bytes(chip.hbm_total_mb),
            memory_used_bytes=_bytes(chip.memory_used_mb) if _has_ddr(chip) else None,
            memory_total_bytes=_bytes(chip.memory_total_mb) if _has_ddr(chip) else None,
            hugepages_used=chip.hugepages_used,
            hugepages_total=chip.hugepages_total,
            power_watts=chip.power_watts,
            temperature_celsius=chip.temperature_celsius,
        )
        return self._merge_details(sample, key, now)

    def _merge_details(self, sample: ChipSample, key: ChipKey, now: float) -> ChipSample:
        fresh = self._fresh_details(key, now)
        changes: dict[str, object] = {}
        usages = fresh.get("usages")
        if isinstance(usages, p.ChipUsages):
            changes.update(
                aivector_utilization_ratio=_ratio(usages.aivector_percent),
                aicube_utilization_ratio=_ratio(usages.aicube_percent),
                aicpu_utilization_ratio=_ratio(usages.aicpu_percent),
                ctrlcpu_utilization_ratio=_ratio(usages.ctrlcpu_percent),
                hbm_bandwidth_utilization_ratio=_ratio(usages.hbm_bandwidth_percent),
            )
            if sample.memory_total_bytes is not None:
                changes["ddr_bandwidth_utilization_ratio"] = _ratio(usages.ddr_bandwidth_percent)
            if sample.npu_utilization_ratio is None:
                changes["npu_utilization_ratio"] = _ratio(usages.npu_util_percent)
        common = fresh.get("common")
        if isinstance(common, p.ChipCommon):
            changes.update(
                aicore_frequency_hertz=_hertz(common.aicore_cur_freq_mhz),
                aicore_rated_frequency_hertz=_hertz(common.aicore_freq_mhz),
            )
        memory = fresh.get("memory")
        if isinstance(memory, p.ChipMemory):
            changes["hbm_temperature_celsius"] = memory.hbm_temperature_celsius
        health = fresh.get("health")
        if isinstance(health, p.ChipHealth) and sample.health not in (None, "OK"):
            changes["health_error_codes"] = health.error_codes  # a chip back to OK drops its old codes
        ecc = fresh.get("ecc")
        if isinstance(ecc, p.ChipEcc):
            counts = _ecc_counts(ecc)
            if sample.memory_total_bytes is None:
                counts = tuple(c for c in counts if c.memory != "ddr")
            changes["ecc"] = counts
        card_power = self._card_power.get(key[0])
        if sample.power_watts is None and key[1] == _first_chip(self._known, key[0]) and card_power:
            if now - card_power.at <= self.settings.max_age:
                changes["power_watts"] = card_power.value  # 310P: card power, on the card's first chip
        return replace(sample, **changes) if changes else sample

    def _unwell_chips(self) -> list[ChipKey]:
        """Chips the latest overview shows as not OK: the only ones worth a `-t health` call."""
        if not self._table_ok or self._table is None:
            return []
        return sorted((c.npu_id, c.chip_id) for c in self._table.chips if _health(c.health) not in (None, "OK"))

    def _fresh_details(self, key: ChipKey, now: float) -> dict[str, object]:
        out = {}
        for kind in DETAIL_KINDS:
            stamped = self._details.get((kind, key))
            if stamped is not None and now - stamped.at <= self.settings.max_age:
                out[kind] = stamped.value
        return out

    def _processes(self, table: p.InfoTable | None) -> tuple[ProcessSample, ...]:
        if table is None or not table.processes:
            return ()
        out = []
        for proc in table.processes:
            chip = proc.chip_id if proc.chip_id is not None else 0
            mapped = self._map.get((proc.npu_id, chip))
            known = self._known.get((proc.npu_id, chip))
            device = mapped.logic_id if mapped else (known.logic_id if known else None)
            out.append(ProcessSample(proc.npu_id, chip, device, proc.pid, proc.name, _bytes(proc.memory_mb)))
        return tuple(out)

    # --- calls -------------------------------------------------------------------------------

    async def _run(self, *args: str) -> RunResult:
        result = await self.runner.run([*self.settings.command, *args])
        if result.returncode != 0:
            error = p.detect_error(result.output)
            if error is not None:
                raise error
            raise RunError("exit_status", f"npu-smi {' '.join(args)} exited with status {result.returncode}")
        return result

    async def _board(self, key: ChipKey) -> Failure | None:
        npu, chip = key
        try:
            board = p.parse_board((await self._run("info", "-t", "board", "-i", str(npu), "-c", str(chip))).output, npu_id=npu)
        except (RunError, p.NpuSmiError) as exc:
            return Failure(f"board -i {npu} -c {chip}", exc.reason, str(exc))
        self._boards[key] = board
        return None

    async def _health_detail(self, key: ChipKey) -> Failure | None:
        npu, chip = key
        try:
            text = (await self._run("info", "-t", "health", "-i", str(npu), "-c", str(chip))).output
            record = p.parse_health(text, npu_id=npu, chip_id=chip)[0]
        except (RunError, p.NpuSmiError) as exc:
            return Failure(f"health -i {npu} -c {chip}", exc.reason, str(exc))
        self._details[("health", key)] = _Stamped(record, self.clock())
        return None

    async def _detail(self, kind: str, npu: int) -> Failure | None:
        try:
            text = (await self._run("info", "-t", kind, "-i", str(npu))).output
            records = _DETAIL_PARSERS[kind](text, npu_id=npu)
        except (RunError, p.NpuSmiError) as exc:
            return Failure(f"{kind} -i {npu}", exc.reason, str(exc))
        now = self.clock()
        if isinstance(records, p.CommonInfo):
            if records.mcu_power_watts is not None:
                self._card_power[npu] = _Stamped(records.mcu_power_watts, now)
            records = records.chips
        for record in records:
            self._details[(kind, (npu, record.chip_id))] = _Stamped(record, now)
        return None

    def _overview_keys(self) -> frozenset[ChipKey]:
        if not self._table_ok or self._table is None:
            return frozenset()
        return frozenset((c.npu_id, c.chip_id) for c in self._table.chips)

    def _inventory_due(self) -> bool:
        if self._inventory_at is None:
            return True
        keys = self._overview_keys()
        if keys and keys != self._map_keys:
            return True  # chips appeared or disappeared: ids may have moved
        return self.clock() - self._inventory_at >= self.settings.inventory_interval


_DETAIL_PARSERS: dict[str, Callable[[str], Iterable[object] | p.CommonInfo]] = {
    "usages": p.parse_usages,
    "common": p.parse_common,
    "ecc": p.parse_ecc,
    "memory": p.parse_memory,
}


def _has_ddr(chip: p.InfoChip) -> bool:
    """910B/A3/950 print DDR as `0 / 0` (they have none): that is absence, not an empty DDR."""
    return bool(chip.memory_total_mb)


def _first_chip(known: dict[ChipKey, p.InfoChip], npu: int) -> int:
    return min((c for n, c in known if n == npu), default=0)


def _ratio(percent: float | None) -> float | None:
    return None if percent is None else percent / 100.0


def _bytes(mib: float | None) -> float | None:
    return None if mib is None else float(mib) * MIB  # npu-smi's "MB" are MiB


def _hertz(mhz: float | None) -> float | None:
    return None if mhz is None else mhz * 1e6


def _health(value: str | None) -> str | None:
    if value is None:
        return None
    for state in HEALTH_STATES:
        if value.lower() == state.lower():
            return state
    return "Unknown"


def _ecc_counts(ecc: p.ChipEcc) -> tuple[EccCount, ...]:
    """Aggregate (lifetime) totals where printed, else the current counts."""
    out = []
    for memory in ("ddr", "hbm"):
        for kind in ("single_bit", "double_bit"):
            total = getattr(ecc, f"{memory}_{kind}_aggregate_total")
            if total is None:
                total = getattr(ecc, f"{memory}_{kind}_errors")
            if total is not None:
                out.append(EccCount(memory, kind, total))
    return tuple(out)
