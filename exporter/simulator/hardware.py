"""Renderers for the health and interconnect types: `-t volt`, `pcie-err`, `err-count`,
`sensors`, `sio-info`, `hccs`, `hccs-bw`, `spod-info`.

Labels and widths are npu-smi's printf calls (docs/formats/npu-smi.md); which model answers
which type follows the product table there, and a model without a type answers "This device
does not support querying <type>." as the real product does. Counters grow with the time
since ECC_EPOCH, faster on a busy chip; gauges follow the chip's load and temperature.
"""

from __future__ import annotations

from exporter.simulator.models import FAMILY_310P, FAMILY_910_93, FAMILY_910B
from exporter.simulator.scenarios import (
    DEGRADED_HCCS_LOGIC_ID,
    ECC_EPOCH,
    ChipState,
    NodeState,
    scenario_plan,
    smooth_noise,
    unit_noise,
)

# typing is for type checkers only here: importing it costs every simulated call ~7 ms.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

# Which family answers which type (docs/formats/npu-smi.md, health and interconnect types).
ANSWERS = {
    FAMILY_910B: {"volt", "pcie-err", "sensors", "hccs", "hccs-bw"},
    FAMILY_910_93: {"volt", "pcie-err", "sensors", "hccs", "hccs-bw", "sio-info", "spod-info"},
    FAMILY_310P: {"volt", "pcie-err", "sensors", "hccs"},
}
HCCS_LINKS = {FAMILY_910B: 7, FAMILY_910_93: 7, FAMILY_310P: 2}
FAILING_LINK = 2  # the degraded scenario's failing HCCS link
LINK_GBPS = 56  # per lane
PACKET_BYTES = 20  # npu-smi prints tx/rx bytes as packets x 20
SUPER_POD_SIZE = 384
SERVER_INDEX = 40
MAX_SAMPLE_MS = 10_000  # the simulator's bound on a `-t hccs-bw -time` sleep


def unsupported(kind: str) -> str:
    return f"This device does not support querying {kind}.\n"


def _kv(key: str, value: object) -> str:
    return f"\t{key:<30} : {value}\n"


def _seconds(state: NodeState) -> float:
    return max(0.0, state.t - ECC_EPOCH)


def _nominal_load(state: NodeState, chip: ChipState) -> float:
    """The scenario's long-run load of a chip: what its counters have grown with."""
    plan = scenario_plan(state.model, state.scenario)
    if state.scenario == "idle" or chip.logic_id in plan.critical_logic_ids:
        return 0.0
    if chip.logic_id in plan.low_logic_ids:
        return 0.4
    return 0.5 if state.scenario == "sawtooth" else 0.93


def _failing(state: NodeState, chip: ChipState) -> bool:
    return state.scenario == "degraded" and chip.logic_id == DEGRADED_HCCS_LOGIC_ID


def _chip(state: NodeState, npu_id: int, chip_id: int | None) -> ChipState:
    return next(c for c in state.chips_of(npu_id) if chip_id is None or c.chip_id == chip_id)


def _per_chip(state: NodeState, npu_id: int, chip_id: int | None, body: Callable[[NodeState, ChipState], str]) -> str:
    """A `-c` answer is the chip's fields alone; a card answer opens each chip with its Chip ID."""
    if chip_id is not None:
        return body(state, _chip(state, npu_id, chip_id))
    chips = state.chips_of(npu_id)
    text = _kv("NPU ID", npu_id) + _kv("Chip Count", len(chips)) + "\n"
    return text + "\n".join(_kv("Chip ID", c.chip_id) + body(state, c) for c in chips)


def _volt(state: NodeState, chip: ChipState) -> str:
    base = 0.85 if state.model.family == FAMILY_310P else 0.80
    volts = base + 0.08 * chip.aicore_percent / 100 + 0.01 * smooth_noise(state.t, 30.0, state.seed, chip.logic_id, "volt")
    return _kv("Voltage(V)", f"{volts:.2f}")


def _pcie(state: NodeState, chip: ChipState) -> str:
    # History only: a quarter of the chips once logged a few CRC errors and replays; a healthy
    # node's counters stand still (a rising one is what NPUPCIeErrors pages on).
    noisy = unit_noise(state.seed, state.model.name, chip.logic_id, "pcie") < 0.25
    crc = 1 + int(4 * unit_noise(state.seed, chip.logic_id, "pcie-crc")) if noisy else 0
    retry = int(60 * unit_noise(state.seed, chip.logic_id, "pcie-retry"))
    if state.model.family == FAMILY_310P:
        labels = {"Pcs Rx Error Count": 0, "Phy Lane Error Count": crc, "Dl Lcrc Error Count": crc, "Dl Dcrc Error Count": 0}
    else:
        labels = {"TX Error Count": 0, "RX Error Count": crc, "Lcrc Error Count": crc, "Ecrc Error Count": 0, "Retry Count": retry}
    return "".join(_kv(label, value) for label, value in labels.items())


def _sensors(state: NodeState, chip: ChipState) -> str:
    soc = chip.temperature_celsius + 3
    if state.model.family == FAMILY_310P:
        return _kv("Soc Max Temperature (C)", soc)  # 310P prints only Soc Max
    sfp = chip.temperature_celsius - 12 if state.model.family == FAMILY_910_93 else "NA"
    hbm = "NA" if chip.hbm_temperature_celsius is None else chip.hbm_temperature_celsius
    return (
        _kv("Soc Max Temperature (C)", soc)
        + _kv("SFP Temperature (C)", sfp)
        + _kv("NDIE Temperature (C)", chip.temperature_celsius - 2)
        + _kv("HBM Temperature (C)", hbm)
    )


def _sio(state: NodeState, chip: ChipState) -> str:
    errors = 2 if unit_noise(state.seed, state.model.name, chip.logic_id, "sio") < 0.125 else 0  # history, standing still
    return f"\t{'TX Error Count'} : {errors}\n\t{'RX Error Count'} : 0\n"  # "\t%-s : %u": not padded


def _hccs_list(values: list[int]) -> str:
    return "[" + "".join(f"{v:<20} " for v in values) + "]"


def _hccs(state: NodeState, chip: ChipState) -> str:
    links = HCCS_LINKS[state.model.family]
    seconds, load = _seconds(state), _nominal_load(state, chip)
    failing = _failing(state, chip)
    modes = [2 if failing and link == FAILING_LINK else 4 for link in range(links)]
    tx = [
        int(seconds * (2000 + 9_000_000 * load) * (1 + 0.05 * unit_noise(state.seed, chip.logic_id, link, "tx"))) for link in range(links)
    ]
    rx = [
        int(seconds * (2000 + 9_000_000 * load) * (1 + 0.05 * unit_noise(state.seed, chip.logic_id, link, "rx"))) for link in range(links)
    ]
    errors = [int(seconds / 60) if failing and link == FAILING_LINK else 0 for link in range(links)]
    retries = [int(seconds / 20) if failing and link == FAILING_LINK else int(seconds * load / 43200) for link in range(links)]
    text = ""
    if state.model.family != FAMILY_310P:  # 310P prints the counters only
        text += _kv("hccs health status ", "NOK" if failing else "OK")
        text += _kv("hccs lane mode ", _hccs_list(modes))
        text += _kv("hccs link lane list ", "[" + "".join(("1111" if m == 4 else "1100") + " " * 16 + " " for m in modes) + "]")
        text += _kv("hccs link speed ", _hccs_list([m * LINK_GBPS for m in modes]))
    text += _kv("hccs tx packets ", _hccs_list(tx)) + _kv("hccs tx bytes ", _hccs_list([n * PACKET_BYTES for n in tx]))
    text += _kv("hccs rx packets ", _hccs_list(rx)) + _kv("hccs rx bytes ", _hccs_list([n * PACKET_BYTES for n in rx]))
    text += _kv("hccs retry count ", _hccs_list(retries)) + _kv("hccs error count ", _hccs_list(errors))
    if state.model.family != FAMILY_310P:
        text += _kv("hccs first error lane ", FAILING_LINK if failing else "NA")
    return text


def _hccs_bw(state: NodeState, chip: ChipState) -> str:
    load = chip.aicore_percent / 100
    rows = []
    for link in range(HCCS_LINKS[state.model.family]):
        tx = 28.0 * load * (1 + 0.1 * smooth_noise(state.t, 10.0, state.seed, chip.logic_id, link, "bw-tx"))
        rx = 28.0 * load * (1 + 0.1 * smooth_noise(state.t, 10.0, state.seed, chip.logic_id, link, "bw-rx"))
        rows.append((tx, rx))
    text = f"{'hccs link':<30} {'tx_bandwidth(GB/S)':<30} {'rx_bandwidth(GB/S)':<30}\n"
    text += "".join(f"{link:<35d} {tx:<30.6f} {rx:<30.6f}\n" for link, (tx, rx) in enumerate(rows))
    return text + f"{'total':<35} {sum(r[0] for r in rows):<30.6f} {sum(r[1] for r in rows):<30.6f}\n"


def _spod(state: NodeState, chip: ChipState) -> str:
    phy = chip.phy_id if chip.phy_id is not None else chip.logic_id
    sdid = (SERVER_INDEX << 22) | (phy << 16) | phy  # bits 22..31: the server index
    return _kv("SDID", sdid) + _kv("Super Pod Size", SUPER_POD_SIZE) + _kv("Super Pod ID", 0) + _kv("Server Index", SERVER_INDEX)


_BODIES: dict[str, Callable[[NodeState, ChipState], str]] = {
    "volt": _volt,
    "pcie-err": _pcie,
    "sensors": _sensors,
    "sio-info": _sio,
    "hccs": _hccs,
    "hccs-bw": _hccs_bw,
    "spod-info": _spod,
}


def _renderer(kind: str) -> Callable[[NodeState, int, int | None], str]:
    def render(state: NodeState, npu_id: int, chip_id: int | None = None) -> str:
        if kind not in ANSWERS[state.model.family]:
            return unsupported(kind)
        return _per_chip(state, npu_id, chip_id, _BODIES[kind])

    return render


HARDWARE_RENDERERS: dict[str, Callable[[NodeState, int, int | None], str]] = {kind: _renderer(kind) for kind in (*_BODIES, "err-count")}
