"""Scenarios: what a simulated node is doing at time ``t``.

`simulate` is pure: every value is a function of (model, scenario, t, chip, seed), so two
simulator processes started for the same instant print the same numbers, and successive
samples move plausibly (smooth value noise; power follows utilization; temperature is a
low-pass of power; HBM used is the driver reservation plus the processes; ECC counters
only grow).

Scenario properties (chips named by logic id, i.e. the `-m` Chip Logic ID):

- ``healthy``: every chip AI Core 86..99 %, one job process per chip (or N, see models).
- ``underutilized``: logic ids 1 and 4 (`UNDERUTILIZED_LOGIC_IDS`) at 28..52 % with their
  processes still on them; every other chip as healthy (> 85 %).
- ``sawtooth``: all chips in phase, AI Core ramping 10 -> 95 % over 60 s then dropping back.
- ``degraded``: healthy load, except logic id 2 (Health ``Critical``, 0 % AI Core, three error
  codes at the SeparateNPU, RestartNPU and RestartRequest levels, growing HBM ECC counts and isolated pages, single- and double-bit); the NPU holding the highest logic id is missing
  from every output (`-i` on it gives "Invalid card id."); `-t usages` and `-t common` for
  the NPU holding logic id 5 fail with the dcmi -8005 error; logic id 3 has one failing HCCS
  link (`DEGRADED_HCCS_LOGIC_ID`: health NOK, CRC errors and retries growing on link 2).
- ``idle``: 0 % everywhere, no processes, only the driver-reserved memory in use.
"""

from __future__ import annotations

import math

from exporter.simulator.models import FAMILY_310P, FAMILY_910_93, ChipSpec, NodeModel
from exporter.simulator.record import Record, replace

try:  # hashlib's blake2b, without hashlib's OpenSSL bindings: a tenth of a simulated call
    from _blake2 import blake2b
except ImportError:  # an interpreter built without it
    from hashlib import blake2b

# typing is for type checkers only here: importing it costs every simulated call ~7 ms.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

    # `npu-smi info -t <subcommand> -i <npu_id>` -> the dcmi error code that query fails with.
    Failures = Mapping[tuple[str, int], int]

SCENARIOS: tuple[str, ...] = ("healthy", "underutilized", "sawtooth", "degraded", "idle")

UNDERUTILIZED_LOGIC_IDS = (1, 4)
DEGRADED_CRITICAL_LOGIC_ID = 2
DEGRADED_FAILING_LOGIC_ID = 5
DEGRADED_FAILING_SUBCOMMANDS = ("usages", "common")
DEGRADED_ERROR_CODE = -8005
DEGRADED_HCCS_LOGIC_ID = 3
FLAP_LOGIC_ID = 0  # the `flap` fault hides this chip's NPU on odd minutes
SAWTOOTH_PERIOD_S = 60.0

ECC_EPOCH = 1_767_225_600  # 2026-01-01: counters start here, so a test clock near 0 reads 0
_TEMP_TAU_S = 30.0  # thermal time constant of the chip package
_TEMP_STEP_S = 5.0
_TEMP_STEPS = 18  # 90 s of power history, 3 tau
# Codes at three handling levels of the shipped fault-code table: SeparateNPU (the chip must leave
# service), RestartNPU and RestartRequest; the chip's level is the most severe, SeparateNPU.
DEGRADED_SEPARATE_CODE = "80E3A201"
_CRITICAL_CODES = (DEGRADED_SEPARATE_CODE, "80E18005", "80CB8009")
_CRITICAL_INFO = ("hbm uncorrectable ecc error, page isolation failed", "hbm multi-bit ecc error", "aicore task exception")


class MemoryEcc(Record):
    """One memory's `-t ecc` counters; each is non-decreasing in t."""

    single_bit: int = 0
    double_bit: int = 0
    single_bit_aggregate: int = 0
    double_bit_aggregate: int = 0
    single_bit_isolated_pages: int = 0
    double_bit_isolated_pages: int = 0


class EccCounters(Record):
    """`-t ecc` counters of a chip's DDR and HBM."""

    ddr: MemoryEcc = MemoryEcc()
    hbm: MemoryEcc = MemoryEcc()


class ChipState(Record):
    """One chip as npu-smi reports it (integers where npu-smi prints %u/%d)."""

    npu_id: int
    chip_id: int
    logic_id: int
    phy_id: int | None
    name: str
    health: str
    error_codes: tuple[str, ...]
    error_information: tuple[str, ...]
    power_watts: float | None  # as printed for this chip: None on A3 die 1 ("-") and 310P ("NA")
    temperature_celsius: int
    aicore_percent: int
    aivector_percent: int  # 310P: "Vectorcore Usage Rate(%)"
    aicube_percent: int | None  # None where npu-smi prints no such field (310P)
    aicpu_percent: int
    ctrlcpu_percent: int
    npu_util_percent: int | None  # None on 310P
    hbm_used_mb: int | None  # None: no HBM (310P)
    hbm_total_mb: int | None
    ddr_used_mb: int  # 0 / 0 on HBM-only chips
    ddr_total_mb: int
    hbm_bandwidth_percent: int | None
    ddr_bandwidth_percent: int
    hugepages_used: int
    hugepages_total: int
    aicore_freq_mhz: int  # rated
    aicore_cur_freq_mhz: int
    hbm_temperature_celsius: int | None
    ecc: EccCounters
    bus_id: str
    vdie_id: str
    ndie_id: str

    @property
    def hbm_usage_percent(self) -> int | None:
        """npu-smi's integer `used * 100 / total`."""
        return _percent(self.hbm_used_mb, self.hbm_total_mb)

    @property
    def ddr_usage_percent(self) -> int:
        return _percent(self.ddr_used_mb, self.ddr_total_mb) or 0


class CardState(Record):
    """Per-NPU facts outside the chip rows: the card power and the MCU's sensors."""

    npu_id: int
    chip_count: int
    power_watts: float  # whole card: A3 die 0 row, 310P `-t common` MCU block
    mcu_temperature_celsius: int
    board_sensors: tuple[tuple[str, int], ...]
    serial_number: str
    slot_id: int


class ProcessState(Record):
    npu_id: int
    chip_id: int
    pid: int
    name: str  # kernel comm, <= 15 chars, may be empty
    memory_mb: int


_NO_FAILURES: Failures = {}


class ScenarioPlan(Record):
    """Which chips a scenario singles out (logic ids / NPU ids of the given model), and the
    queries that fail."""

    low_logic_ids: tuple[int, ...] = ()
    critical_logic_ids: tuple[int, ...] = ()
    missing_npu_ids: tuple[int, ...] = ()
    failures: Failures = _NO_FAILURES


class NodeState(Record):
    model: NodeModel
    scenario: str
    t: float
    seed: int
    chips: tuple[ChipState, ...]  # present chips only, in enumeration order
    cards: tuple[CardState, ...]  # present NPUs only
    processes: tuple[ProcessState, ...]
    missing: tuple[tuple[int, int], ...]  # (npu_id, chip_id) absent from every output
    failures: Failures

    @property
    def npu_ids(self) -> tuple[int, ...]:
        return tuple(card.npu_id for card in self.cards)

    def chips_of(self, npu_id: int) -> tuple[ChipState, ...]:
        return tuple(chip for chip in self.chips if chip.npu_id == npu_id)

    def card(self, npu_id: int) -> CardState:
        """The card of a present NPU (callers check the id against ``npu_ids`` first)."""
        for card in self.cards:
            if card.npu_id == npu_id:
                return card
        raise KeyError(npu_id)

    def processes_of(self, npu_id: int, chip_id: int) -> tuple[ProcessState, ...]:
        return tuple(p for p in self.processes if p.npu_id == npu_id and p.chip_id == chip_id)

    def failure(self, subcommand: str, npu_id: int) -> int | None:
        """The dcmi error code `npu-smi info -t <subcommand> -i <npu_id>` fails with, if it fails."""
        return self.failures.get((subcommand, npu_id))


def scenario_plan(model: NodeModel, scenario: str) -> ScenarioPlan:
    """The chips each scenario treats specially, resolved for ``model``."""
    if scenario not in SCENARIOS:
        raise ValueError(f"unknown scenario {scenario!r}; choose from {', '.join(SCENARIOS)}")
    if scenario == "underutilized":
        return ScenarioPlan(low_logic_ids=UNDERUTILIZED_LOGIC_IDS)
    if scenario == "degraded":
        failing = model.chip_by_logic_id(DEGRADED_FAILING_LOGIC_ID).npu_id
        return ScenarioPlan(
            critical_logic_ids=(DEGRADED_CRITICAL_LOGIC_ID,),
            missing_npu_ids=(model.chips[-1].npu_id,),
            failures={(sub, failing): DEGRADED_ERROR_CODE for sub in DEGRADED_FAILING_SUBCOMMANDS},
        )
    return ScenarioPlan()


def flap_npu_id(model: NodeModel) -> int:
    return model.chip_by_logic_id(FLAP_LOGIC_ID).npu_id


def without_npu(state: NodeState, npu_id: int) -> NodeState:
    """``state`` with one NPU gone from every output (the `flap` fault)."""
    gone = tuple((c.npu_id, c.chip_id) for c in state.chips if c.npu_id == npu_id)
    return replace(
        state,
        chips=tuple(c for c in state.chips if c.npu_id != npu_id),
        cards=tuple(c for c in state.cards if c.npu_id != npu_id),
        processes=tuple(p for p in state.processes if p.npu_id != npu_id),
        missing=state.missing + gone,
    )


def simulate(model: NodeModel, scenario: str, t: float, seed: int = 0) -> NodeState:
    """The node's state at time ``t`` (seconds, usually epoch) for ``scenario``."""
    plan = scenario_plan(model, scenario)
    present = tuple(spec for spec in model.chips if spec.npu_id not in plan.missing_npu_ids)
    processes = tuple(p for spec in present for p in _processes(model, scenario, spec, t, seed))
    chips = tuple(_chip_state(model, scenario, plan, spec, processes, t, seed) for spec in present)
    cards = tuple(_card_state(model, scenario, plan, npu_id, t, seed) for npu_id in dict.fromkeys(spec.npu_id for spec in present))
    missing = tuple((s.npu_id, s.chip_id) for s in model.chips if s.npu_id in plan.missing_npu_ids)
    return NodeState(
        model=model,
        scenario=scenario,
        t=t,
        seed=seed,
        chips=chips,
        cards=cards,
        processes=processes,
        missing=missing,
        failures=plan.failures,
    )


# --- deterministic noise ---------------------------------------------------------------


_NOISE: dict[tuple[object, ...], float] = {}  # a call asks for the same knots many times, and so do the next calls
_NOISE_KEPT = 16384


def unit_noise(*key: object) -> float:
    """Uniform [0, 1) from a key; blake2b so it does not depend on PYTHONHASHSEED."""
    value = _NOISE.get(key)
    if value is None:
        if len(_NOISE) >= _NOISE_KEPT:
            _NOISE.clear()
        digest = blake2b(repr(key).encode(), digest_size=8).digest()
        value = _NOISE[key] = int.from_bytes(digest, "big") / 2.0**64
    return value


def smooth_noise(t: float, period: float, *key: object) -> float:
    """Value noise in [-1, 1]: random knots every ``period`` s, cosine-interpolated."""
    knot = math.floor(t / period)
    frac = t / period - knot
    a = unit_noise(*key, knot) * 2 - 1
    b = unit_noise(*key, knot + 1) * 2 - 1
    return a + (b - a) * (1 - math.cos(math.pi * frac)) / 2


def _clamp_percent(value: float) -> int:
    return max(0, min(100, round(value)))


def _share(util: float, factor: float, jitter: float, t: float, period: float, *key: object) -> int:
    """A unit's busy percent: a share of the AI Core load plus its own noise, 0 when idle."""
    return _clamp_percent(util * factor + jitter * (util / 100.0) * smooth_noise(t, period, *key))


def _percent(used: int | None, total: int | None) -> int | None:
    if used is None or not total:
        return None
    return used * 100 // total


# --- utilization, power, temperature --------------------------------------------------


def _utilization(scenario: str, plan: ScenarioPlan, logic_id: int, t: float, seed: int) -> float:
    """AI Core busy percent of one chip (float; callers round)."""
    if scenario == "idle" or logic_id in plan.critical_logic_ids:
        return 0.0
    if logic_id in plan.low_logic_ids:
        return 40.0 + 12.0 * smooth_noise(t, 15.0, seed, logic_id, "util-low")
    if scenario == "sawtooth":
        phase = (t % SAWTOOTH_PERIOD_S) / SAWTOOTH_PERIOD_S
        return min(99.0, max(5.0, 10.0 + 85.0 * phase + 2.0 * smooth_noise(t, 5.0, seed, logic_id, "util-saw")))
    return 93.0 + 5.0 * smooth_noise(t, 20.0, seed, logic_id, "util")


def _power(model: NodeModel, scenario: str, plan: ScenarioPlan, logic_id: int, t: float, seed: int) -> float:
    """One chip's (die's) electrical power: idle floor plus a share proportional to load."""
    load = _utilization(scenario, plan, logic_id, t, seed) / 100.0
    span = model.busy_power_watts - model.idle_power_watts
    jitter = 2.5 * (0.3 + load) * smooth_noise(t, 7.0, seed, logic_id, "power")
    return model.idle_power_watts + span * load + jitter


def _lagged_power(model: NodeModel, scenario: str, plan: ScenarioPlan, logic_id: int, t: float, seed: int) -> float:
    """Exponentially weighted past power: the package heats up with a ~30 s lag."""
    weights = [math.exp(-j * _TEMP_STEP_S / _TEMP_TAU_S) for j in range(_TEMP_STEPS + 1)]
    samples = [_power(model, scenario, plan, logic_id, t - j * _TEMP_STEP_S, seed) for j in range(_TEMP_STEPS + 1)]
    return sum(w * p for w, p in zip(weights, samples)) / sum(weights)


def _ambient(model: NodeModel, logic_id: int, seed: int) -> float:
    return 29.0 + 4.0 * unit_noise(seed, model.name, logic_id, "ambient")


def _temperature(model: NodeModel, scenario: str, plan: ScenarioPlan, logic_id: int, t: float, seed: int) -> int:
    heat = _lagged_power(model, scenario, plan, logic_id, t, seed) - model.idle_power_watts
    rise = 24.0 * heat / (model.busy_power_watts - model.idle_power_watts)
    return round(_ambient(model, logic_id, seed) + 4.0 + rise)


# --- memory and processes ---------------------------------------------------------------


def _processes(model: NodeModel, scenario: str, spec: ChipSpec, t: float, seed: int) -> tuple[ProcessState, ...]:
    """The job's processes on one chip; their memory drifts slowly around an even split."""
    count = 0 if scenario == "idle" else model.processes_per_chip
    if count == 0:
        return ()
    base_pid = 1_000_000 + int(unit_noise(seed, model.name, "pid") * 2_000_000)
    share = model.job_memory_mb / count
    return tuple(
        ProcessState(
            npu_id=spec.npu_id,
            chip_id=spec.chip_id,
            pid=base_pid + spec.logic_id * 5003 + index * 17,
            name=model.process_names[index % len(model.process_names)],
            memory_mb=round(share * (1.0 + 0.02 * smooth_noise(t, 120.0, seed, spec.logic_id, index, "mem"))),
        )
        for index in range(count)
    )


def _reserved_mb(model: NodeModel, logic_id: int, seed: int) -> int:
    """Driver reservation on an idle chip (~3 GB HBM on 910B/A3, ~1.5 GB DDR on 310P)."""
    return model.reserved_memory_mb + int(300 * unit_noise(seed, model.name, logic_id, "reserved"))


# --- ECC -------------------------------------------------------------------------------


def _events(t: float, interval_s: float) -> int:
    """Errors seen since ECC_EPOCH at one per ``interval_s``: never decreases with t."""
    return int(max(0.0, t - ECC_EPOCH) // interval_s)


def _ecc(model: NodeModel, plan: ScenarioPlan, spec: ChipSpec, t: float, seed: int) -> EccCounters:
    """A quarter of the chips collect correctable errors; a Critical chip adds uncorrectable ones
    and its driver isolates pages: every double-bit error's page, and one more page every
    2 hours where single-bit errors keep recurring."""
    noisy = unit_noise(seed, model.name, spec.logic_id, "ecc") < 0.25
    critical = spec.logic_id in plan.critical_logic_ids
    single = _events(t, 3 * 3600.0) if noisy else 0
    single += _events(t, 600.0) if critical else 0
    double = 1 + _events(t, 3600.0) if critical else 0
    isolated_single = _events(t, 2 * 3600.0) if critical else 0
    history = int(10 * unit_noise(seed, model.name, spec.logic_id, "ecc-history")) if noisy else 0
    counts = MemoryEcc(single, double, single + history, double, isolated_single, double)
    return EccCounters(hbm=counts) if model.has_hbm else EccCounters(ddr=counts)


# --- assembling the state ---------------------------------------------------------------


def _chip_power(model: NodeModel, scenario: str, plan: ScenarioPlan, spec: ChipSpec, t: float, seed: int) -> float | None:
    """What npu-smi prints in this chip's row: A3 die 0 carries the card, die 1 and 310P print none."""
    if model.family == FAMILY_310P or (model.family == FAMILY_910_93 and spec.chip_id != 0):
        return None
    return round(sum(_power(model, scenario, plan, s.logic_id, t, seed) for s in model.chips_of(spec.npu_id)), 1)


def _chip_state(
    model: NodeModel, scenario: str, plan: ScenarioPlan, spec: ChipSpec, processes: tuple[ProcessState, ...], t: float, seed: int
) -> ChipState:
    util = _utilization(scenario, plan, spec.logic_id, t, seed)
    load = util / 100.0
    lid = spec.logic_id
    used = _reserved_mb(model, lid, seed) + sum(p.memory_mb for p in processes if (p.npu_id, p.chip_id) == (spec.npu_id, spec.chip_id))
    temperature = _temperature(model, scenario, plan, lid, t, seed)
    critical = lid in plan.critical_logic_ids
    is_310p = model.family == FAMILY_310P
    return ChipState(
        npu_id=spec.npu_id,
        chip_id=spec.chip_id,
        logic_id=lid,
        phy_id=spec.phy_id,
        name=model.chip_name,
        health="Critical" if critical else "OK",
        error_codes=_CRITICAL_CODES if critical else (),
        error_information=_CRITICAL_INFO if critical else (),
        power_watts=_chip_power(model, scenario, plan, spec, t, seed),
        temperature_celsius=temperature,
        aicore_percent=_clamp_percent(util),
        aivector_percent=_share(util, 0.45, 3.0, t, 11.0, seed, lid, "vec"),
        aicube_percent=None if is_310p else _share(util, 0.95, 2.0, t, 9.0, seed, lid, "cube"),
        aicpu_percent=_share(util, 0.02, 1.0, t, 13.0, seed, lid, "aicpu"),
        ctrlcpu_percent=_clamp_percent(3.0 + 8.0 * load + 2.0 * smooth_noise(t, 6.0, seed, lid, "ctrl")),
        npu_util_percent=None if is_310p else _clamp_percent(util + 1.5 * load),
        hbm_used_mb=None if is_310p else used,
        hbm_total_mb=spec.hbm_total_mb,
        ddr_used_mb=used if is_310p else 0,
        ddr_total_mb=spec.ddr_total_mb,
        hbm_bandwidth_percent=None if is_310p else _share(util, 0.55, 3.0, t, 8.0, seed, lid, "hbmbw"),
        ddr_bandwidth_percent=_share(util, 0.5, 3.0, t, 8.0, seed, lid, "ddrbw") if is_310p else 0,
        hugepages_used=0,
        hugepages_total=0,
        aicore_freq_mhz=model.aicore_freq_mhz,
        aicore_cur_freq_mhz=model.aicore_freq_mhz if util >= 1.0 else model.aicore_idle_freq_mhz,
        hbm_temperature_celsius=None if is_310p else temperature - 1 - int(3 * unit_noise(seed, lid, "hbm-temp")),
        ecc=_ecc(model, plan, spec, t, seed),
        bus_id=spec.bus_id,
        vdie_id=spec.vdie_id,
        ndie_id=spec.ndie_id,
    )


def _card_state(model: NodeModel, scenario: str, plan: ScenarioPlan, npu_id: int, t: float, seed: int) -> CardState:
    chips = model.chips_of(npu_id)
    first = chips[0].logic_id
    ambient = _ambient(model, first, seed)
    index = model.npu_ids.index(npu_id)
    return CardState(
        npu_id=npu_id,
        chip_count=len(chips),
        power_watts=round(sum(_power(model, scenario, plan, c.logic_id, t, seed) for c in chips), 1),
        mcu_temperature_celsius=round(ambient - 1.0),
        board_sensors=(("LM75A_TE", round(ambient - 2.0)), ("LM75B_TE", round(ambient))),
        serial_number=f"1023C{int(unit_noise(model.name, npu_id, 'serial') * 1e7):07d}",
        slot_id=index,
    )
