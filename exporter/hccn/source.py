"""Which hccn_tool calls to make, when, and how their records become snapshot parts.

hccn_tool answers one chip and one question per process, may block ~300 s on an unhealthy
device and reports "busy" when calls on one device overlap, so:

- every ``interval`` (default 30 s), per chip port: `-link`, `-link_stat`, `-speed`,
  `-net_health`, `-stat`;
- every ``slow_interval`` (default 60 s): `-bandwidth` (blocks ~1 s measuring), `-optical`, `-ip`;
- the calls of one chip run one after another (different chips concurrently, within the
  runner's bound); a chip that times out or is reported unhealthy/absent is skipped for the
  rest of that run instead of costing a timeout per command;
- chips come from the devices snapshot (a callable); ``-i`` is the id hccn_tool expects
  (:func:`tool_id`); Ascend 950 ports are found with `-dev_info` and queried with `-u/-p`.

Health is recorded per command under ``hccn_<command>`` (hccn_link, hccn_optical, ...).
A missing binary (inference-only nodes) is counted once (``not_found``) and logged once;
afterwards the source stays quiet until the binary appears. A command the product does not
support is counted once per chip and then no longer asked. An absent optical module, an
unset IP, `Speed: Unknown!` or "link is down" are readings, not failures.
"""

from __future__ import annotations

import asyncio
import shutil
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from exporter.core import clock
from exporter.core.clock import Clock, Stamped
from exporter.core.health import Failure, HealthRegistry
from exporter.core.runner import CommandRunner, RunError
from exporter.core.sampler import Task
from exporter.hccn.options import HccnOptions
from exporter.hccn.parse import PARSERS, check_exit, parse_dev_info
from exporter.hccn.part import NetworkPart, PortSample, port_sample
from exporter.hccn.records import HccnError, OpticalInfo, PortInfo, Speed
from exporter.npusmi.part import ChipSample

FAST_COMMANDS = ("link", "link_stat", "speed", "net_health", "stat")
SLOW_COMMANDS = ("bandwidth", "optical", "ip")
BANDWIDTH_WINDOW_SECONDS = 1.0  # 910B measures over DEFAULT_TIME_INTERVAL 1000 ms
A5_BANDWIDTH_WINDOW_MS = 100  # what Huawei's exporter passes with `-time` on A5

# A failure after which the chip's remaining calls in this run would fail the same way.
_CHIP_FATAL = frozenset({"timeout", "device_unhealthy", "no_device", "invalid_device_id", "not_found"})

# Errors that are a reading of the port, per command: (reason -> stored record).
_AS_READING: dict[str, dict[str, object]] = {
    "optical": {"optical_not_present": OpticalInfo(present=False)},
    "ip": {"no_ip": ()},
    "speed": {"link_down": Speed(None)},
    "bandwidth": {"link_down": None},
}

ChipKey = tuple[int, int]  # (npu, chip)
PortKey = tuple[int, int, str]  # (npu, chip, port label)
Fresh = tuple[tuple[str, Stamped[object]], ...]  # a port's fresh readings, by command


def age_limit(options: HccnOptions, max_age: float, command: str) -> float:
    """How long a reading of ``command`` is served: max_age, but at least two of its own
    intervals (a max_age tuned for fast npu-smi sampling must not blank the slow optics)."""
    interval = options.slow_interval if command in SLOW_COMMANDS else options.interval
    return max(max_age, 2 * interval)


@dataclass(frozen=True)
class Target:
    """One port hccn_tool can be asked about."""

    npu: int
    chip: int
    device: int | None
    tool_id: int  # the -i argument
    udie: int | None = None  # A5 only: -u / -p
    port: int | None = None

    @property
    def chip_key(self) -> ChipKey:
        return (self.npu, self.chip)

    @property
    def key(self) -> PortKey:
        return (self.npu, self.chip, self.port_label)

    @property
    def port_label(self) -> str:
        return "" if self.port is None else f"{self.udie}/{self.port}"

    def args(self, command: str) -> list[str]:
        if self.port is None:  # 910B/A3: `-i` must be argv[1]
            return ["-i", str(self.tool_id), f"-{command}", "-g"]
        args = ["-g", f"-{command}", "-i", str(self.tool_id), "-u", str(self.udie), "-p", str(self.port)]
        return args + (["-time", str(A5_BANDWIDTH_WINDOW_MS)] if command == "bandwidth" else [])


@dataclass(frozen=True)
class _Outcome:
    command: str
    subject: str
    failure: Failure | None
    duration: float


def is_a5(chip: ChipSample) -> bool:
    """Ascend 950 (A5): `-g -<cmd> -i N -u U -p P`, ports from `-dev_info`."""
    return "950" in (chip.model or "")


def tool_id(chip: ChipSample, chips_on_card: int = 1) -> int | None:
    """The ``-i`` hccn_tool wants for ``chip`` (docs/formats/hccn_tool.md, "Which -i to pass"), or None if unknown.

    950: the NPU ID. 910B/A3: the PHYSICAL chip id (hccn_tool converts it to a logic id);
    npu-smi prints it on A3; on one-chip cards (910B) the card id is the physical id, which
    stays right inside containers where logic ids are renumbered. Else the logic id.
    """
    if is_a5(chip):
        return chip.npu
    if chip.phy_id is not None:
        return chip.phy_id
    if chips_on_card == 1:
        return chip.npu
    return chip.device


class HccnSource:
    """Keeps the latest parsed hccn_tool records per port and turns them into PortSamples."""

    FAST, SLOW = "hccn", "hccn_slow"  # sampler task names

    def __init__(
        self,
        options: HccnOptions,
        runner: CommandRunner,
        health: HealthRegistry,
        chips: Callable[[], Iterable[ChipSample]],
        *,
        command: tuple[str, ...] | None = None,
        max_age: float = 180.0,
        clock: Clock = clock.monotonic,
    ) -> None:
        self.options = options
        self.command = command or (options.path,)  # argv prefix; the simulator is a longer one
        self.max_age = max_age
        self.runner = runner
        self.health = health
        self.chips = chips
        self.clock = clock
        self._targets: dict[PortKey, Target] = {}
        self._a5_ports: dict[ChipKey, tuple[PortInfo, ...]] = {}
        self._readings: dict[tuple[PortKey, str], Stamped[object]] = {}
        # port -> (device, the readings, the sample built from them); the part built last
        self._built: dict[PortKey, tuple[int | None, Fresh, PortSample]] = {}
        self._last_part: NetworkPart | None = None
        self._unsupported: set[tuple[ChipKey, str]] = set()
        self._unsupported_product: set[str] = set()  # "not supported on this product": every chip
        self._probed: set[str] = set()  # commands asked at least once
        self._recorded: set[str] = set()  # health sources that have a series
        self._locks: dict[ChipKey, asyncio.Lock] = {}  # fast and slow runs never overlap on a chip
        self._missing = False

    # --- scheduled work ----------------------------------------------------------------

    async def refresh_fast(self) -> None:
        await self._refresh(FAST_COMMANDS)

    async def refresh_slow(self) -> None:
        await self._refresh(SLOW_COMMANDS, rediscover=True)  # A5 ports re-read at the slow pace

    def tasks(self) -> list[Task]:
        return [
            Task(self.FAST, self.options.interval, self.refresh_fast),
            Task(self.SLOW, self.options.slow_interval, self.refresh_slow),
        ]

    async def _refresh(self, commands: tuple[str, ...], rediscover: bool = False) -> None:
        if self._missing:
            if not shutil.which(self.command[0]):
                return  # counted and logged once already; nothing to ask
            self._missing = False
        start = time.monotonic()
        targets, discovery = await self._update_targets(rediscover)
        by_chip: dict[ChipKey, list[Target]] = {}
        for target in targets:
            by_chip.setdefault(target.chip_key, []).append(target)
        groups = list(by_chip.values())
        results: list[list[_Outcome]] = []
        if groups and not set(commands) <= self._probed:
            # First run: one chip alone, so a product without RoCE answers "not supported"
            # once per command instead of once per chip and command.
            results.append(await self._chip_calls(groups.pop(0), commands))
            self._probed.update(commands)
        results += await asyncio.gather(*(self._chip_calls(group, commands) for group in groups))
        outcomes = discovery + [o for chip_outcomes in results for o in chip_outcomes]
        self._record(commands + (("dev_info",) if discovery else ()), outcomes, time.monotonic() - start)

    def _record(self, commands: tuple[str, ...], outcomes: list[_Outcome], elapsed: float) -> None:
        missing = next((o for o in outcomes if o.failure and o.failure.reason == "not_found"), None)
        if missing is not None and missing.failure is not None:
            # One failure for the whole node, under the command that found it.
            self._recorded.add(f"hccn_{missing.command}")
            self.health[f"hccn_{missing.command}"].record(elapsed, [missing.failure], ["hccn_tool"])
            return
        for command in commands:
            name = f"hccn_{command}"
            mine = [o for o in outcomes if o.command == command]
            if not mine and name not in self._recorded:
                continue  # never asked (no chips yet, or unsupported everywhere): no series
            self._recorded.add(name)
            self.health[name].record(
                sum(o.duration for o in mine),
                [o.failure for o in mine if o.failure is not None],
                [o.subject for o in mine] + ["hccn_tool"],
            )

    # --- targets -------------------------------------------------------------------------

    async def _update_targets(self, rediscover: bool) -> tuple[list[Target], list[_Outcome]]:
        """Ports to ask about, from the chips npu-smi lists (plus A5 `-dev_info` outcomes)."""
        known = list(self.chips())
        chips = [c for c in known if c.up]
        if not chips:
            return list(self._targets.values()), []  # npu-smi not read yet or failing: keep the last set
        per_card: dict[int, int] = {}
        for chip in known:
            per_card[chip.npu] = per_card.get(chip.npu, 0) + 1
        targets: list[Target] = []
        outcomes: list[_Outcome] = []
        for chip in chips:
            ident = tool_id(chip, per_card[chip.npu])
            if ident is None:
                continue
            if is_a5(chip):
                outcomes += await self._discover_a5_ports(chip, ident, rediscover)
                ports = self._a5_ports.get((chip.npu, chip.chip), ())
                targets += [Target(chip.npu, chip.chip, chip.device, ident, port.udie, port.port) for port in ports]
            else:
                targets.append(Target(chip.npu, chip.chip, chip.device, ident))
        self._targets = {t.key: t for t in targets}
        self._built = {key: built for key, built in self._built.items() if key in self._targets}
        return targets, outcomes

    async def _discover_a5_ports(self, chip: ChipSample, ident: int, rediscover: bool) -> list[_Outcome]:
        """`-dev_info` once, then at the slow pace; a failed re-read keeps the known ports."""
        key = (chip.npu, chip.chip)
        if (key in self._a5_ports and not rediscover) or self._skipped(key, "dev_info") or self._missing:
            return []
        args = ["-g", "-dev_info", "-i", str(ident)]
        async with self._lock(key):
            outcome, ports = await self._query(key, "dev_info", args, parse_dev_info)
        if isinstance(ports, tuple):
            self._a5_ports[key] = ports
        return [outcome]

    def _skipped(self, chip: ChipKey, command: str) -> bool:
        """Unsupported here (counted and logged once already): not asked again."""
        return (chip, command) in self._unsupported or command in self._unsupported_product

    def _lock(self, key: ChipKey) -> asyncio.Lock:
        # hccn_tool answers "busy" when calls on one device overlap.
        return self._locks.setdefault(key, asyncio.Lock())

    # --- calls -----------------------------------------------------------------------------

    async def _chip_calls(self, targets: list[Target], commands: tuple[str, ...]) -> list[_Outcome]:
        """One chip's calls, in sequence: hccn_tool serialises on the device anyway."""
        async with self._lock(targets[0].chip_key):
            return await self._chip_calls_locked(targets, commands)

    async def _chip_calls_locked(self, targets: list[Target], commands: tuple[str, ...]) -> list[_Outcome]:
        outcomes: list[_Outcome] = []
        for target in targets:
            for command in commands:
                if self._missing or self._skipped(target.chip_key, command):
                    continue
                outcome, record = await self._query(target.chip_key, command, target.args(command), PARSERS[command])
                if outcome.failure is None:
                    self._store(target, command, record)
                outcomes.append(outcome)
                if outcome.failure is not None and outcome.failure.reason in _CHIP_FATAL:
                    return outcomes
        return outcomes

    async def _query(self, chip: ChipKey, command: str, args: list[str], parse: Callable[[str], object]) -> tuple[_Outcome, object]:
        """Run one call; never raises. Errors that are readings come back as records."""
        subject = " ".join(args)
        timeout = self.options.timeout + (BANDWIDTH_WINDOW_SECONDS if command == "bandwidth" else 0.0)
        start = time.monotonic()
        failure, record = None, None
        try:
            result = await self.runner.run([*self.command, *args], timeout=timeout)
            check_exit(result.returncode, result.output)
            record = parse(result.output)
        except RunError as exc:
            if exc.reason == "not_found":
                self._missing = True
            failure = Failure(subject, exc.reason, str(exc))
        except HccnError as exc:
            readings = _AS_READING.get(command, {})
            if exc.reason in readings:
                record = readings[exc.reason]
            else:
                if exc.reason == "not_supported":
                    self._unsupported.add((chip, command))
                    if "product" in exc.message.casefold():
                        self._unsupported_product.add(command)
                failure = Failure(subject, exc.reason, exc.message)
        return _Outcome(command, subject, failure, time.monotonic() - start), record

    def _store(self, target: Target, command: str, record: object) -> None:
        self._readings[(target.key, command)] = Stamped(record, self.clock())

    # --- building the snapshot part ----------------------------------------------------------

    def part(self) -> NetworkPart:
        """Every port with a fresh reading, each from its latest fresh reading per command."""
        now = self.clock()
        devices = {(c.npu, c.chip): c.device for c in self.chips()}
        out = []
        for key, target in sorted(self._targets.items()):
            fresh = tuple(
                (command, stamped)
                for command in FAST_COMMANDS + SLOW_COMMANDS
                if (stamped := self._readings.get((key, command))) is not None
                and stamped.fresh(now, age_limit(self.options, self.max_age, command))
            )
            if fresh:
                out.append(self._port_sample(key, target, devices.get(target.chip_key, target.device), fresh))
        samples = tuple(out)
        last = self._last_part
        if last is None or len(last.ports) != len(samples) or any(a is not b for a, b in zip(last.ports, samples)):
            last = self._last_part = NetworkPart(samples)
        return last

    def _port_sample(self, key: PortKey, target: Target, device: int | None, fresh: Fresh) -> PortSample:
        """A port's sample, built again only when one of its readings (or its device) changed:
        the snapshot is rebuilt after every task run, and classifying counters is most of it."""
        built = self._built.get(key)
        if (
            built is not None
            and built[0] == device
            and len(built[1]) == len(fresh)
            and all(a[0] == b[0] and a[1] is b[1] for a, b in zip(built[1], fresh))
        ):
            return built[2]
        sample = port_sample(target.npu, target.chip, device, target.port_label, {command: stamped.value for command, stamped in fresh})
        self._built[key] = (device, fresh, sample)
        return sample
