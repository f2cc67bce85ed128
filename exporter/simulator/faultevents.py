"""`npu-smi info -t current-fault-event -i N [-c C]`: the active fault events of a chip, which only
the Ascend 950 answers (docs/formats/npu-smi.md); every other product prints "This device does not
support querying current-fault-event." and so does every simulated model, none being a 950. A
model of the 950 family lists its chips' error codes as events, as the 950 reference prints them
(one chip per NPU: no Chip ID line)."""

from __future__ import annotations

from exporter.simulator.scenarios import ChipState, NodeState

FAMILY_950 = "950"
ANSWERED_BY = frozenset({FAMILY_950})
SEVERITY = 2  # npu-smi prints one per event; the simulator has no finer story to tell
UNSUPPORTED = "This device does not support querying current-fault-event.\n"


def _kv(key: str, value: object) -> str:
    return f"{key:<30} : {value}\n"


def _events(chip: ChipState) -> str:
    text = _kv("Fault Event Count", len(chip.error_codes))
    for code in chip.error_codes:
        info = f"event id=0x{code}, severity={SEVERITY}, node type ex=215, node id=0, sub node type ex=0, sub node id=0"
        text += _kv("Fault Event Information", info)
    return text


def render_current_fault_event(state: NodeState, npu_id: int, chip_id: int | None = None) -> str:
    if state.model.family not in ANSWERED_BY:
        return UNSUPPORTED
    chips = [c for c in state.chips_of(npu_id) if chip_id is None or c.chip_id == chip_id]
    if len(chips) == 1:
        return _events(chips[0])
    return _kv("NPU ID", npu_id) + _kv("Chip Count", len(chips)) + "".join(_events(c) + _kv("Chip ID", c.chip_id) for c in chips)
