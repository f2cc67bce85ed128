"""`npu-smi info` whose chip rows are whole but whose process section is missing or cut, through
`cann-exporter once` and a real subprocess stand-in for npu-smi printing the real sample of each
model, cut in the test: every chip is served as in the whole sample, no process series (unknown,
not zero), and the cut counts as `truncated` for the `info processes` subject. A cut inside the
chip rows still withholds the chips."""

from __future__ import annotations

from pathlib import Path

import pytest

from exporter.cli import main
from exporter.npusmi.parse.table import parse_info
from tests.support.exposition import samples, value
from tests.support.paths import FIXTURES, NPU_SMI_FIXTURES

QUIET = [
    "--log.level",
    "error",
    "--npu-smi.sysfs",
    str(FIXTURES / "sysfs" / "no-ascend__written"),
    "--npu-smi.details=",
    "--no-npu-smi.board",
]
# One whole sample with a process section per model and layout.
MODELS = {
    "info__910B3__25.5.1__1": True,  # Atlas A2: the process section is always printed
    "info__910B2__23.0.7__1": True,
    "info__910B2C__23.0.2.1__1": True,
    "info__910_93-A3__25.2.0__1": True,  # Atlas A3 (two dies per NPU)
    "info__950PR__25.7.rc1__1": True,  # 950 V2 layout
    "info__310P3-300IDuo__24.1.rc2__1": False,  # 310P: printed only on some boards
    "info__910-doc-anon__23.0.rc3-drv23.0.rc2.3__1__mangled": False,  # 910, chips named "xxx"
}
PROCESS_SERIES = "npu_process_memory_bytes"


def lines_of(name: str) -> list[str]:
    return (NPU_SMI_FIXTURES / f"{name}.txt").read_text(encoding="utf-8").splitlines(keepends=True)


def process_start(lines: list[str]) -> int:
    """The index of the process section's top border (the line above its header)."""
    return next(i for i, line in enumerate(lines) if "Process id" in line) - 1


def cuts(name: str) -> dict[str, str]:
    lines = lines_of(name)
    start = process_start(lines)
    middle = (start + len(lines)) // 2
    return {
        "missing": "".join(lines[:start]),  # ends with the last NPU's "+==="
        "top_border_only": "".join(lines[: start + 1]),
        "cut_between_rows": "".join(lines[:middle]),
        "cut_mid_line": "".join(lines[:middle]) + lines[middle][: len(lines[middle]) // 2],
    }


def once(capsys, replay_npu_smi, reply: str | Path) -> tuple[int, dict]:
    npu_smi = replay_npu_smi({"info": reply})
    status = main(["once", "--npu-smi", str(npu_smi), *QUIET])
    return status, samples(capsys.readouterr().out)


def chip_series(found: dict) -> dict:
    return {key: v for key, v in found.items() if key[0].startswith("npu_") and key[0] != PROCESS_SERIES}


@pytest.mark.parametrize("cut", ["missing", "top_border_only", "cut_between_rows", "cut_mid_line"])
@pytest.mark.parametrize("name", sorted(MODELS))
def test_chips_are_served_when_only_the_process_section_is_lost(name, cut, replay_npu_smi, capsys, tmp_path):
    status, whole = once(capsys, replay_npu_smi, name)
    assert status == 0 and value(whole, "cann_exporter_source_errors_total", source="npu_smi_info", reason="truncated") is None
    text = cuts(name)[cut]
    path = tmp_path / "info.txt"
    path.write_text(text, encoding="utf-8")
    status, found = once(capsys, replay_npu_smi, path)
    assert status == 0
    chips = len(parse_info("".join(lines_of(name))).chips)
    assert value(found, "npu_devices") == chips
    assert [v for (n, _), v in found.items() if n == "npu_up"] == [1.0] * chips
    assert chip_series(found) == chip_series(whole)  # every chip value as in the whole sample
    assert not [key for key in found if key[0] == PROCESS_SERIES]  # unknown: absent, not zero
    truncated = value(found, "cann_exporter_source_errors_total", source="npu_smi_info", reason="truncated")
    failing = value(found, "cann_exporter_source_subject_failing", source="npu_smi_info", subject="info processes", reason="truncated")
    # Where npu-smi may print no process section, a table ending before it (or with the border
    # a 310P card also prints between its chips) reads as a whole table.
    expected = None if cut in ("missing", "top_border_only") and not MODELS[name] else 1.0
    assert (truncated, failing) == (expected, expected), (truncated, failing)
    assert value(found, "cann_exporter_source_subject_failing", source="npu_smi_info", subject="info") is None


@pytest.mark.parametrize("name", sorted(n for n, required in MODELS.items() if required))
def test_a_cut_inside_the_chip_rows_still_withholds_the_chips(name, replay_npu_smi, capsys, tmp_path):
    lines = lines_of(name)
    last_chip_row = process_start(lines) - 2  # the last chip's second row
    path = tmp_path / "info.txt"
    path.write_text("".join(lines[: last_chip_row + 1]), encoding="utf-8")
    status, found = once(capsys, replay_npu_smi, path)
    assert status == 1  # no chip could be read
    assert not [key for key in found if key[0] == "npu_aicore_utilization_ratio"]
    assert value(found, "cann_exporter_source_subject_failing", source="npu_smi_info", subject="info", reason="truncated") == 1
