"""Which npu-smi calls to make, when, and how their records become snapshot parts.

npu-smi costs about a second per call on real hosts, so the schedule keeps spawns few:

- every ``interval`` (default 10 s): one `npu-smi info` for all chips (utilization, HBM/DDR,
  power, temperature, health, processes);
- at start, every ``inventory_interval`` (default 1 h) and whenever the set of chips in the
  overview changes: `npu-smi info -m` (logic ids) and `-t board -i N -c C` per chip (die id),
  and the Ascend PCI functions in sysfs (pci.py: the expected chip count, no subprocess);
- every ``detail_interval`` (default 60 s): per NPU `-t usages` (vector/cube/AI CPU/control
  CPU, bandwidths), `-t common` (clock; 310P card power), `-t ecc`; optionally `-t memory`
  (HBM temperature) and, on Ascend 950, `-t current-fault-event` (its event ids are fault codes).
  Each is one call per card, not per chip. `-t health -i N -c C` (error
  codes) is per chip, and only for chips whose overview health is not OK: a healthy node
  pays nothing for it. A chip the overview finds not OK has its codes read in that round
  already (``refresh_info``), so its fault level is known before NPUUnhealthy can page;
- every ``hardware_interval`` (default 60 s): per chip `-t volt`, `pcie-err`, `sensors`,
  `sio-info`, `hccs -c`; every ``hccs_bw_interval`` (default 120 s) `-t hccs-bw`, one chip at a
  time (queries.py); at inventory time `-t spod-info` per chip. A type a card answers it does
  not support is not asked again until the inventory changes.

A failing call or card is recorded by reason and hides nothing else.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import TypeVar

from exporter.core import clock
from exporter.core.clock import Clock, Stamped
from exporter.core.health import Failure, HealthRegistry
from exporter.core.options import live_fields
from exporter.core.runner import CommandRunner, RunError, RunResult
from exporter.core.sampler import Task
from exporter.npusmi.devices import DeviceIds
from exporter.npusmi.energy import EnergyIntegrator
from exporter.npusmi.faultcodes import FaultCodeTable, load_fault_codes
from exporter.npusmi.options import CARD_KINDS, DETAIL_KINDS, NpuSmiOptions
from exporter.npusmi.parse import (
    BoardInfo,
    ChipCommon,
    ChipMapEntry,
    CommonInfo,
    InfoChip,
    InfoTable,
    NpuSmiError,
    SuperPod,
    detect_error,
    parse_board,
    parse_chip_map,
    parse_health,
    parse_info,
)
from exporter.npusmi.part import ChipSample, DevicesPart, chip_sample, health_state, process_samples
from exporter.npusmi.pci import PciCount, pci_count
from exporter.npusmi.peak import derived_flops, merged, peaks_of
from exporter.npusmi.queries import (
    CARD_PARSERS,
    CHIP_QUERIES,
    GROUPS,
    SUPERPOD,
    ChipQuery,
    Group,
    Unsupported,
    group_queries,
    is_unsupported,
    records_of,
)

log = logging.getLogger("exporter.npusmi")

ChipKey = tuple[int, int]  # (npu id, chip index)
T = TypeVar("T")  # what a parser returns
# The options a SIGHUP applies without a restart: when each task runs.
# The intervals a SIGHUP applies (option(..., live=True); the fault-code table is re-read apart).
LIVE_OPTIONS = tuple(name for name in live_fields(NpuSmiOptions) if name != "fault_codes")


class NpuSmiSource:
    """Keeps the latest parsed npu-smi records and turns them into a DevicesPart.

    ``command`` is the argv prefix (``(options.path,)``, or the simulator's longer one).
    """

    INFO, INVENTORY, DETAILS = "npu_smi_info", "npu_smi_inventory", "npu_smi_details"
    PROCESSES = "info processes"  # the subject of `info`'s process section, counted apart from its chips

    def __init__(
        self,
        options: NpuSmiOptions,
        runner: CommandRunner,
        health: HealthRegistry,
        *,
        command: tuple[str, ...] | None = None,
        max_age: float = 180.0,
        clock: Clock = clock.monotonic,
        fault_codes: FaultCodeTable | None = None,
    ) -> None:
        self.options = options
        self.fault_codes = fault_codes or load_fault_codes(options.fault_codes)  # replaced whole on SIGHUP
        self.command = command or (options.path,)
        self.max_age = max_age
        self.runner = runner
        self.health = health
        self.clock = clock
        self._table: InfoTable | None = None
        self._table_at = -math.inf  # never read: infinitely old on the monotonic clock
        self._table_ok = False
        self._known: dict[ChipKey, InfoChip] = {}  # every chip ever seen, for npu_up 0
        self._map: dict[ChipKey, ChipMapEntry] = {}
        self.devices = DeviceIds(options.device_wait, clock)  # each chip's device label, fixed once served
        self._map_keys: frozenset[ChipKey] | None = None
        self._map_driver: str | None = None  # the driver version the inventory was read under
        self._inventory_at: float | None = None
        self._boards: dict[ChipKey, BoardInfo] = {}
        self._details: dict[tuple[str, ChipKey], Stamped[object]] = {}
        self._asked_at_once: set[ChipKey] = set()  # unwell chips whose codes refresh_info asked for
        self._card_power: dict[int, Stamped[float]] = {}  # 310P: MCU power of `-t common`
        self._pci: PciCount | None = None  # Ascend PCI functions in sysfs, read with the inventory
        self.peaks = merged(options.peak_flops)  # model -> precision -> (FLOP/s, source)
        self.energy = EnergyIntegrator()  # fed by every power read: `info` Power(W), 310P card power
        self._superpods: dict[ChipKey, SuperPod] = {}  # `-t spod-info`, read with the inventory
        self.unsupported = Unsupported()

    # --- scheduled work ------------------------------------------------------------------

    async def refresh_overview(self, inventory: bool = True) -> None:
        """`npu-smi info`, then (``inventory``) the inventory when it is due. The sampler's task
        leaves the inventory to its own task: a round of board and spod-info calls would hold
        back the publication of this read and the next one."""
        start = time.monotonic()
        failures: list[Failure] = []
        try:
            table = parse_info((await self._run("info", urgent=True)).output)
        except (RunError, NpuSmiError) as exc:
            failures.append(Failure("info", exc.reason, str(exc)))
            self._table_ok = False
        else:
            self._table, self._table_at, self._table_ok = table, self.clock(), True
            for chip in table.chips:
                self._known[(chip.npu_id, chip.chip_id)] = chip
                self.energy.add((chip.npu_id, chip.chip_id), self._table_at, chip.power_watts, self.options.interval)
            self.devices.listed(self._known)
            if table.process_error is not None:  # the chips are served; their processes are unknown
                failures.append(Failure(self.PROCESSES, "truncated", table.process_error))
        self.health[self.INFO].record(time.monotonic() - start, failures, ["info", self.PROCESSES])
        if inventory:
            await self.refresh_inventory_when_due()

    async def refresh_info(self) -> None:
        """The INFO task: the overview, then at once `-t health` for each chip it shows not OK
        without codes read since (newly unwell). Its fault level, which NPUNeedsIsolation pages
        on, is then known in this round, not up to detail_interval later, when NPUUnhealthy (1m)
        could have paged first for the same chip. A failed read here is left to the details
        round, which reads every unwell chip and records how it went: each chip is asked here
        once while it stays unwell, so a read that fails or hangs cannot hold back every overview."""
        await self.refresh_overview(inventory=False)
        if self.devices.pending(self._known):  # not served until their device is known: ask now
            start = time.monotonic()
            failure = await self._read_map()
            self.health[self.INVENTORY].record(time.monotonic() - start, [failure] if failure else [], ["info -m"])
        if "health" in self.options.details:
            now, unwell = self.clock(), set(self._unwell_chips())
            self._asked_at_once &= unwell  # OK again: asked again when it next turns unwell
            new = sorted(key for key in unwell - self._asked_at_once if self._fresh("health", key, now) is None)
            self._asked_at_once.update(new)
            await asyncio.gather(*(self._health_detail(key) for key in new))

    def _fresh(self, kind: str, key: ChipKey, now: float) -> Stamped[object] | None:
        """The chip's latest ``kind`` detail while it may still be served, else None."""
        stamped = self._details.get((kind, key))
        return stamped if stamped is not None and stamped.fresh(now, self._max_age(kind)) else None

    async def refresh_inventory_when_due(self) -> None:
        """The inventory, at start, every inventory_interval and when the chips or the driver changed."""
        if self._inventory_due():
            await self.refresh_inventory()

    async def refresh_inventory(self) -> None:
        """`info -m` for logic ids, `-t board -c` per chip for die ids."""
        start = time.monotonic()
        failures: list[Failure] = []
        self._inventory_at = self.clock()
        self._pci = pci_count(Path(self.options.sysfs))
        failure = await self._read_map()
        failures += [failure] if failure else []
        self._map_keys, self._map_driver = self._overview_keys(), self._driver()
        self.unsupported.renew((self._map_keys, self._map_driver))
        subjects = ["info -m"]
        keys = sorted(self._overview_keys() or self._map)
        if self.options.board:
            subjects += [f"board -i {n} -c {c}" for n, c in keys]
            results = await asyncio.gather(*(self._board(key) for key in keys))
            failures += [f for f in results if f is not None]
        if SUPERPOD.kind in self.options.details:
            pods = await asyncio.gather(*(self._chip_query(SUPERPOD, key) for key in keys))
            self._superpods = {key: records_of(found)[0] for key, (_, _, found) in zip(keys, pods) if found is not None}
            failures += [f for f, _, _ in pods if f is not None]
            subjects += [subject for _, subject, _ in pods if subject is not None]
        self.health[self.INVENTORY].record(time.monotonic() - start, failures, subjects)

    async def _read_map(self) -> Failure | None:
        """`info -m`: each chip's logic id (the device label) and, on A3 and 950, its Phy-ID."""
        try:
            entries = parse_chip_map((await self._run("info", "-m", urgent=True)).output)
        except (RunError, NpuSmiError) as exc:
            self.devices.tried(None)
            return Failure("info -m", exc.reason, str(exc))
        self._map = {(e.npu_id, e.chip_id): e for e in entries if e.is_chip}
        self.devices.tried(entries)
        return None

    async def refresh_details(self) -> None:
        """Per-card `-t` queries, concurrently within the runner's bound."""
        start = time.monotonic()
        npus = sorted({npu for npu, _ in self._overview_keys() or self._known})
        jobs = [(kind, npu) for npu in npus for kind in self.options.details if kind in CARD_KINDS and (kind, npu) not in self.unsupported]
        unwell = self._unwell_chips() if "health" in self.options.details else []
        results = await asyncio.gather(
            *(self._detail(kind, npu) for kind, npu in jobs),
            *(self._health_detail(key) for key in unwell),
        )
        failures = [f for f in results if f is not None]
        subjects = [f"{kind} -i {npu}" for kind, npu in jobs] + [f"health -i {n} -c {c}" for n, c in unwell]
        if not npus:  # nothing to read is not success: a node with no chip must not look healthy
            failures.append(Failure("details", "no_chips", "no chip known from npu-smi info, nothing to query"))
        self.health[self.DETAILS].record(time.monotonic() - start, failures, subjects)

    def reload_fault_codes(self, path: str | None) -> None:
        """SIGHUP: the fault-code table read again (the site's file, else the shipped one). A table
        that does not load keeps the one in use (FaultCodeError); the next part uses the new one."""
        self.fault_codes = load_fault_codes(path)

    async def refresh_group(self, group: Group) -> None:
        """One schedule group of per-chip queries (queries.py) for every chip in the overview."""
        start = time.monotonic()
        queries = group_queries(group, self.options.details)
        jobs = [(query, key) for key in sorted(self._overview_keys()) for query in queries]
        if group.serial:
            results = [await self._chip_query(query, key) for query, key in jobs]
        else:
            results = list(await asyncio.gather(*(self._chip_query(query, key) for query, key in jobs)))
        now = self.clock()
        for (query, _), (_, _, found) in zip(jobs, results):
            for record in records_of(found) if found is not None else ():
                self._details[(query.kind, (record.npu_id, record.chip_id))] = Stamped(record, now)
        failures = [f for f, _, _ in results if f is not None]
        self.health[group.task].record(time.monotonic() - start, failures, [s for _, s, _ in results if s is not None])

    def tasks(self) -> list[Task]:
        """The sampler's tasks, in first-run order (readiness waits on the first). Intervals are
        read from ``self.options`` before each wait, so :meth:`apply` changes them live."""
        every = self.options.interval
        out = [
            Task(self.INFO, every, self.refresh_info, period=lambda: self.options.interval, complete=self.named),
            Task(self.INVENTORY, every, self.refresh_inventory_when_due, period=lambda: self.options.interval),  # runs when due
        ]
        if set(self.options.details) & {*CARD_KINDS, "health"}:
            out.append(Task(self.DETAILS, self.options.detail_interval, self.refresh_details, period=lambda: self.options.detail_interval))
        for group in GROUPS:
            if group_queries(group, self.options.details):
                out.append(
                    Task(group.task, self._interval(group), partial(self.refresh_group, group), period=partial(self._interval, group))
                )
        return out

    def named(self) -> bool:
        """Every chip listed is served: its device id is known, or its wait is over (readiness)."""
        return not self.devices.pending(self._known)

    def apply(self, options: NpuSmiOptions) -> None:
        """New intervals (a SIGHUP reload): each task waits by them at once (the sampler reads them)."""
        changed = {name: getattr(options, name) for name in LIVE_OPTIONS if getattr(options, name) != getattr(self.options, name)}
        if changed:
            self.options = replace(self.options, **changed)
            log.info("SIGHUP: npu-smi intervals applied", extra={"options": ",".join(f"npu_smi.{name}" for name in changed)})

    def _interval(self, group: Group) -> float:
        return float(getattr(self.options, group.interval))

    # --- building the snapshot part ----------------------------------------------------------

    def part(self) -> DevicesPart:
        """The chips and processes as of now; an overview older than max_age is withheld."""
        now = self.clock()
        table = self._table
        fresh = self._table_ok and now - self._table_at <= self.max_age
        listed = {(c.npu_id, c.chip_id): c for c in table.chips} if table and self._table_ok else {}
        ages = {kind: self._max_age(kind) for kind in DETAIL_KINDS}  # once, not per chip
        named = {key: self.devices.device(key, chip, self._known) for key, chip in self._known.items()}
        chips = tuple(
            self._chip_sample(key, chip, device, fresh and key in listed, now, ages)
            for key, chip in sorted(self._known.items())
            if (device := named[key])[0]
        )
        return DevicesPart(
            chips=chips,
            processes=process_samples(table, named, self._map) if table and now - self._table_at <= self.max_age else (),
            pending_chips=sum(1 for servable, _ in named.values() if not servable),
            chips_seen=len(listed) if self._table_ok else None,
            driver_version=table.driver_version if table else None,
            tool_version=table.tool_version if table else None,
            stale_chips=0 if fresh else len(listed),
            expected_devices=self.options.expected_devices or None,
            pci_expected_devices=self._pci.expected_chips if self._pci else None,
            pci_functions=self._pci.functions if self._pci else (),
            energy_skipped_intervals=self.energy.skipped_intervals,
        )

    def _chip_sample(
        self, key: ChipKey, chip: InfoChip, device: tuple[bool, int | None], up: bool, now: float, ages: Mapping[str, float]
    ) -> ChipSample:
        mapped = self._map.get(key)
        board = self._boards.get(key)
        sample = ChipSample(
            npu=chip.npu_id,
            chip=chip.chip_id,
            device=device[1],
            up=up,
            model=chip.name,
            bus_id=chip.bus_id,
            phy_id=chip.phy_id if chip.phy_id is not None else (mapped.phy_id if mapped else None),
            vdie_id=board.vdie_id if board else None,
            superpod=self._superpods.get(key),
        )
        if not up:
            return sample  # identity only: a chip we cannot read has no values
        return chip_sample(
            sample,
            chip,
            self._fresh_details(key, now, ages),
            self.fault_codes,
            energy_joules=self.energy.joules(key),
            peak_flops=peaks_of(chip.name, self.peaks, self._derived_peak(key)),
            card_power_watts=self._card_power_watts(key, chip, now),
        )

    def _derived_peak(self, key: ChipKey) -> float | None:
        """The chip's bf16/fp16 cube peak from its latest `-t common` (AI cores x rated clock;
        peak.py), whatever its age: both figures are the chip's own and do not change."""
        stamped = self._details.get(("common", key))
        common = stamped.value if stamped is not None else None
        return derived_flops(common.aicore_count, common.aicore_freq_mhz) if isinstance(common, ChipCommon) else None

    def _card_power_watts(self, key: ChipKey, chip: InfoChip, now: float) -> float | None:
        """310P: the card's `-t common` power, served on its first chip, which prints none."""
        card = self._card_power.get(key[0])
        if card is None or chip.power_watts is not None or key[1] != _first_chip(self._known, key[0]):
            return None
        return card.value if card.fresh(now, self.max_age) else None

    def _unwell_chips(self) -> list[ChipKey]:
        """Chips the latest overview shows as not OK: the only ones worth a `-t health` call."""
        if not self._table_ok or self._table is None:
            return []
        return sorted((c.npu_id, c.chip_id) for c in self._table.chips if health_state(c.health) not in (None, "OK"))

    def _fresh_details(self, key: ChipKey, now: float, ages: Mapping[str, float]) -> dict[str, object]:
        """The chip's detail records by kind, those still servable (``ages``: _max_age by kind)."""
        out: dict[str, object] = {}
        for kind, age in ages.items():
            stamped = self._details.get((kind, key))
            if stamped is not None and stamped.fresh(now, age):
                out[kind] = stamped.value
        return out

    def _max_age(self, kind: str) -> float:
        """max_age, or two of its group's intervals where that is longer (hccs-bw's 120 s by
        default): a reading is served until its next run is overdue."""
        group = next((q.group for q in CHIP_QUERIES if q.kind == kind), None)
        return self.max_age if group is None else max(self.max_age, 2 * self._interval(group))

    # --- calls -------------------------------------------------------------------------------

    async def _run(self, *args: str, urgent: bool = False) -> RunResult:
        """One npu-smi call; the overview is ``urgent``: it passes the per-card queries waiting
        for a slot, so their batch never ages the chips out (max_age)."""
        result = await self.runner.run([*self.command, *args], urgent=urgent)
        if result.returncode != 0:
            error = detect_error(result.output)
            if error is not None:
                raise error
            raise RunError("exit_status", f"npu-smi {' '.join(args)} exited with status {result.returncode}")
        return result

    async def _ask(self, kind: str, npu: int, parse: Callable[[str], T], *args: str) -> T | None:
        """`npu-smi info -t kind -i npu *args`, parsed; None when the card answers it does not
        support the type: a fact about the product, remembered (and logged once) so the type is
        not asked of this card again until the inventory changes. Any other failure raises
        (RunError, NpuSmiError); the parser can find the answer in a status-0 output too."""
        try:
            return parse((await self._run("info", "-t", kind, "-i", str(npu), *args)).output)
        except NpuSmiError as exc:
            if not is_unsupported(exc):
                raise
            self.unsupported.add(kind, npu)
            return None

    async def _board(self, key: ChipKey) -> Failure | None:
        npu, chip = key
        try:
            board = parse_board((await self._run("info", "-t", "board", "-i", str(npu), "-c", str(chip))).output, npu_id=npu)
        except (RunError, NpuSmiError) as exc:
            return Failure(f"board -i {npu} -c {chip}", exc.reason, str(exc))
        self._boards[key] = board
        return None

    async def _chip_query(self, query: ChipQuery, key: ChipKey) -> tuple[Failure | None, str | None, object | None]:
        """(failure, subject, parsed result) of one per-chip query; the subject is None when every
        type of the query is known to be unsupported by this card (nothing was asked)."""
        npu, chip = key
        subject = None
        for kind in query.types:
            if (kind, npu) in self.unsupported:
                continue
            subject = f"{kind} -i {npu} -c {chip}"
            parse = partial(query.parse, npu_id=npu, chip_id=chip)
            try:
                found = await self._ask(kind, npu, parse, "-c", str(chip), *query.args(self.options))
            except (RunError, NpuSmiError) as exc:
                return Failure(subject, exc.reason, str(exc)), subject, None
            if found is not None:
                return None, subject, found
            # unsupported: try the next spelling
        return None, subject, None

    async def _health_detail(self, key: ChipKey) -> Failure | None:
        npu, chip = key
        try:
            text = (await self._run("info", "-t", "health", "-i", str(npu), "-c", str(chip))).output
            record = parse_health(text, npu_id=npu, chip_id=chip)[0]
        except (RunError, NpuSmiError) as exc:
            return Failure(f"health -i {npu} -c {chip}", exc.reason, str(exc))
        self._details[("health", key)] = Stamped(record, self.clock())
        return None

    async def _detail(self, kind: str, npu: int) -> Failure | None:
        try:
            records = await self._ask(kind, npu, partial(CARD_PARSERS[kind], npu_id=npu))
        except (RunError, NpuSmiError) as exc:
            return Failure(f"{kind} -i {npu}", exc.reason, str(exc))
        if records is None:
            return None  # unsupported (current-fault-event before the 950): no failure, not asked again
        now = self.clock()
        if isinstance(records, CommonInfo):
            if records.mcu_power_watts is not None:
                self._card_power[npu] = Stamped(records.mcu_power_watts, now)
                self._add_card_energy(npu, records.mcu_power_watts, now)
            records = records.chips
        for record in records:
            self._details[(kind, (npu, record.chip_id))] = Stamped(record, now)
        return None

    def _add_card_energy(self, npu: int, watts: float, now: float) -> None:
        """310P: the card's power is read once per card and served on its first chip, and so is its energy."""
        first = (npu, _first_chip(self._known, npu))
        chip = self._known.get(first)
        if chip is not None and chip.power_watts is None:  # a chip with power of its own integrates that
            self.energy.add(first, now, watts, self.options.detail_interval)

    def _overview_keys(self) -> frozenset[ChipKey]:
        if not self._table_ok or self._table is None:
            return frozenset()
        return frozenset((c.npu_id, c.chip_id) for c in self._table.chips)

    def _driver(self) -> str | None:
        return self._table.driver_version if self._table_ok and self._table else None

    def _inventory_due(self) -> bool:
        if self._inventory_at is None:
            return True
        keys = self._overview_keys()
        if keys and keys != self._map_keys:
            return True  # chips appeared or disappeared: ids may have moved
        if keys and self._driver() != self._map_driver:
            return True  # a new driver: ids, and the types the cards answer, may have changed
        return self.clock() - self._inventory_at >= self.options.inventory_interval


def _first_chip(known: dict[ChipKey, InfoChip], npu: int) -> int:
    return min((c for n, c in known if n == npu), default=0)
