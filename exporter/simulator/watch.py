"""`npu-smi info watch`: the scrolling table of per-chip readings, rendered like npu-smi's."""

from __future__ import annotations

from exporter.simulator.models import FAMILY_910_93, NodeModel
from exporter.simulator.render import is_910, join_lines
from exporter.simulator.scenarios import ChipState, NodeState

# (-s letter, header); columns after "Memory BW(%)" are printed as " %-12s".
WATCH_COLUMNS = (
    ("p", "Pwr(W)"),
    ("t", "Temp(C)"),
    ("a", "AI Core(%)"),
    ("i", "AI Cpu(%)"),
    ("c", "Ctrl Cpu(%)"),
    ("m", "Memory(%)"),
    ("b", "Memory BW(%)"),
    ("n", "NPU Util(%)"),
    ("u", "AI Cube(%)"),
)
_WIDE_FROM = 7


def watch_letters(model: NodeModel, selection: str | None = None) -> str:
    """The columns shown, in npu-smi's order: 910B/A3 builds add NPU Util and AI Cube."""
    supported = "ptaicmbnu" if is_910(model) else "ptaicmb"
    return "".join(letter for letter in supported if selection is None or letter in selection)


def render_watch_header(model: NodeModel, letters: str) -> str:
    cells = "".join(_watch_cell(i, header) for i, (letter, header) in enumerate(WATCH_COLUMNS) if letter in letters)
    return f"{'NpuID(Idx)':<12}{'ChipId(Idx)':<12}{cells}\n"


def render_watch_rows(state: NodeState, letters: str, npu_id: int | None = None, chip_id: int | None = None) -> str:
    """One round of rows; every cell `%-12s`, so each row ends in spaces."""
    rows = []
    for chip in state.chips:
        if (npu_id is not None and chip.npu_id != npu_id) or (chip_id is not None and chip.chip_id != chip_id):
            continue
        values = _watch_values(state.model, chip)
        cells = "".join(_watch_cell(i, values[letter]) for i, (letter, _) in enumerate(WATCH_COLUMNS) if letter in letters)
        rows.append(f"{chip.npu_id:<12d}{chip.chip_id:<12d}{cells}")
    return join_lines(rows)


def _watch_cell(index: int, value: str) -> str:
    return f" {value:<12}" if index >= _WIDE_FROM else f"{value:<12}"


def _watch_values(model: NodeModel, chip: ChipState) -> dict[str, str]:
    """Memory(%) / Memory BW(%) are HBM on 910B/A3 and DDR elsewhere."""
    if chip.power_watts is not None:
        power = f"{chip.power_watts:.1f}"
    else:
        power = "-" if model.family == FAMILY_910_93 else "NA"
    hbm = is_910(model)
    return {
        "p": power,
        "t": str(chip.temperature_celsius),
        "a": str(chip.aicore_percent),
        "i": str(chip.aicpu_percent),
        "c": str(chip.ctrlcpu_percent),
        "m": str(chip.hbm_usage_percent if hbm else chip.ddr_usage_percent),
        "b": str(chip.hbm_bandwidth_percent if hbm else chip.ddr_bandwidth_percent),
        "n": str(chip.npu_util_percent),
        "u": str(chip.aicube_percent),
    }
