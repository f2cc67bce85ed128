"""npu_peak_flops_per_second: the shipped table (published figures only) and a node's overrides."""

from __future__ import annotations

import pytest

from exporter.cli import main
from exporter.npusmi import peak
from exporter.npusmi.options import NpuSmiOptions
from tests.support.exposition import samples


def test_the_shipped_table_has_a_source_for_every_model_and_only_known_precisions():
    table = peak.shipped()
    assert table["910A"] == {"fp16": 256e12, "int8": 512e12}
    assert table["310P3"] == {"int8": 140e12}  # no published FP16 per chip: absent, not guessed
    assert "910B3" not in table and "Ascend910" not in table
    with pytest.raises(ValueError, match="source"):
        peak.table_from({"models": {"X": {"fp16": 1}}})
    with pytest.raises(ValueError, match="positive"):
        peak.table_from({"models": {"X": {"source": "s", "bf16": -1}}})


def test_overrides_add_and_replace():
    overrides = peak.parse_overrides("910B3:bf16=3.13e14, 910A:fp16=2e14")
    table = peak.merged(overrides)
    assert table["910B3"] == {"bf16": 3.13e14}
    assert table["910A"] == {"fp16": 2e14, "int8": 512e12}
    assert peak.peaks_of("910A", table) == (("fp16", 2e14), ("int8", 512e12))
    assert peak.peaks_of(None, table) == ()


@pytest.mark.parametrize("bad", ["910B3=3e14", "910B3:fp8=3e14", "910B3:bf16=lots", "910B3:bf16=0", ":bf16=1e14", "910B3:bf16=1e30"])
def test_a_bad_override_is_refused_with_its_text(bad):
    with pytest.raises(ValueError, match="910B3|MODEL"):
        peak.parse_override(bad)


def _once(capsys, *args: str) -> tuple[int, str, str]:
    # The peaks come with each chip's model from the overview: no per-card detail calls needed.
    code = main(["once", "--simulate", "healthy", "--no-hccn.enabled", "--npu-smi.details=", *args])
    out, err = capsys.readouterr()
    return code, out, err


def _peaks(capsys, *args: str) -> dict:
    code, out, err = _once(capsys, *args)
    assert code == 0, err
    return {
        dict(ls)["npu"] + "/" + dict(ls)["chip"] + "/" + dict(ls)["precision"]: v
        for (n, ls), v in samples(out).items()
        if n == "npu_peak_flops_per_second"
    }


def test_no_published_figure_no_series_and_a_configured_one_is_served(capsys):
    assert _peaks(capsys) == {}  # the simulator's 910B3: not in the table
    served = _peaks(capsys, "--npu-smi.peak-flops", "910B3:bf16=3.13e14")
    assert len(served) == 8 and set(served.values()) == {3.13e14}
    duo = _peaks(capsys, "--simulate.model", "310p-duo")
    assert len(duo) == 8 and set(duo.values()) == {140e12} and all(k.endswith("/int8") for k in duo)


def test_a_bad_override_stops_the_exporter_naming_the_flag(capsys):
    code, _, err = _once(capsys, "--npu-smi.peak-flops", "910B3:fp8=1e14")
    assert code != 0 and "--npu-smi.peak-flops" in err and "fp8" in err
    assert NpuSmiOptions().peak_flops == ()
