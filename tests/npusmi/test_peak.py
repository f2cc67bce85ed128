"""npu_peak_flops_per_second: the shipped table (published figures only), the peak derived from a
chip's own AI core count and rated clock, a node's overrides, and which wins."""

from __future__ import annotations

import re

import pytest

from exporter.cli import main
from exporter.npusmi import peak
from exporter.npusmi.options import NpuSmiOptions
from exporter.npusmi.parse import parse_common
from tests.support.exposition import samples
from tests.support.paths import ROOT

FIXTURES = ROOT / "tests" / "fixtures" / "npu-smi"


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
    assert table["910B3"] == {"bf16": (3.13e14, "config")}
    assert table["910A"] == {"fp16": (2e14, "config"), "int8": (512e12, "published")}
    assert peak.peaks_of("910A", table) == (("fp16", 2e14, "config"), ("int8", 512e12, "published"))
    assert peak.peaks_of(None, table) == ()


@pytest.mark.parametrize(
    ("fixture", "cores", "mhz", "tflops"),
    [
        ("info-t-common__910B3__25.5.1__1.txt", 20, 1800, 294.912),  # 8 x 910B3, npu-smi 25.5.1
        ("info-t-common__910B1__23.0.rc2__1.txt", 24, 1800, 353.8944),
        ("info-t-common__910-doc__unknown__1.txt", 30, 900, 221.184),  # Huawei's MindCluster guide
    ],
)
def test_the_derived_peak_of_each_real_common_output(fixture, cores, mhz, tflops):
    (chip,) = parse_common((FIXTURES / fixture).read_text(), npu_id=0).chips
    assert (chip.aicore_count, chip.aicore_freq_mhz) == (cores, mhz)
    assert peak.derived_flops(chip.aicore_count, chip.aicore_freq_mhz) == pytest.approx(tflops * 1e12)


def test_no_derived_peak_without_both_figures():
    (chip, _) = parse_common((FIXTURES / "info-t-common__310P-300IDuo__unknown__1.txt").read_text(), npu_id=1).chips
    assert chip.aicore_count is None and peak.derived_flops(chip.aicore_count, chip.aicore_freq_mhz) is None
    assert peak.derived_flops(20, None) is None
    assert peak.derived_flops(0, 1800) is None and peak.derived_flops(20, 1e9) is None  # no chip has these


def test_config_wins_over_published_and_published_over_derived():
    derived = peak.derived_flops(20, 1800)
    assert derived == pytest.approx(294.912e12)
    table = peak.merged(peak.parse_overrides("910B3:bf16=3.13e14, 910A:fp16=2e14"))
    # An unlisted model: derived bf16 and fp16, a configured figure replacing one of them.
    assert peak.peaks_of("910B3", table, derived) == (("bf16", 3.13e14, "config"), ("fp16", derived, "derived"))
    assert peak.peaks_of("910B4", table, derived) == (("bf16", derived, "derived"), ("fp16", derived, "derived"))
    # A published model gets nothing derived (the first-generation 910 has no bf16), config still wins.
    assert peak.peaks_of("910A", table, peak.derived_flops(32, 1000)) == (("fp16", 2e14, "config"), ("int8", 512e12, "published"))
    assert peak.peaks_of("310P3", table, derived) == (("int8", 140e12, "published"),)
    assert peak.peaks_of("910B4", table, None) == ()


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
        "/".join(dict(ls)[k] for k in ("npu", "chip", "precision", "source")): v
        for (n, ls), v in samples(out).items()
        if n == "npu_peak_flops_per_second"
    }


def test_no_figure_no_series_and_a_configured_one_is_served(capsys):
    assert _peaks(capsys) == {}  # the simulator's 910B3 without `-t common`: not in the table, nothing to derive from
    served = _peaks(capsys, "--npu-smi.peak-flops", "910B3:bf16=3.13e14")
    assert len(served) == 8 and set(served.values()) == {3.13e14} and all(k.endswith("/bf16/config") for k in served)
    duo = _peaks(capsys, "--simulate.model", "310p-duo")
    assert len(duo) == 8 and set(duo.values()) == {140e12} and all(k.endswith("/int8/published") for k in duo)


@pytest.mark.parametrize(("model", "chips", "cores"), [("910b3", 8, 20), ("a3", 16, 24)])
def test_the_simulated_910_family_serves_its_derived_peak(capsys, model, chips, cores):
    # The simulator prints the model's Aicore Count and rated 1800 MHz clock in `-t common`.
    served = _peaks(capsys, "--simulate.model", model, "--npu-smi.details=common")
    assert len(served) == 2 * chips and set(served.values()) == {cores * 1800e6 * 4096 * 2}
    assert {k.split("/", 2)[2] for k in served} == {"bf16/derived", "fp16/derived"}
    configured = _peaks(
        capsys, "--simulate.model", model, "--npu-smi.details=common", "--npu-smi.peak-flops", "Ascend910:bf16=3e14,910B3:bf16=3e14"
    )
    assert {k.split("/", 2)[2]: v for k, v in configured.items()} == {"bf16/config": 3e14, "fp16/derived": cores * 1800e6 * 4096 * 2}


def test_a_bad_override_stops_the_exporter_naming_the_flag(capsys):
    code, _, err = _once(capsys, "--npu-smi.peak-flops", "910B3:fp8=1e14")
    assert code != 0 and "--npu-smi.peak-flops" in err and "fp8" in err
    assert NpuSmiOptions().peak_flops == ()


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        (",".join(f"M{i}:bf16=1e14" for i in range(20_000)), "20000 entries; at most 256"),
        ("x" * 3000 + ":bf16=1e14", "3000 characters; at most 64"),
        ("910 B3:bf16=1e14", "expected the name npu-smi prints"),
        ("910B3\x1b[2J:bf16=1e14", "expected the name npu-smi prints"),
        ("910B3:bf16=3e14, 910A:fp16=2e14, 910B3:bf16=3.1e14", "910B3:bf16 is given twice (3e+14 and 3.1e+14)"),
        (["910B3:bf16=3e14", "910B3:bf16=3e14"], "910B3:bf16 is given twice"),  # a YAML list; the same figure too
    ],
)
def test_the_list_is_bounded_and_refuses_a_repeated_model_and_precision(value, problem):
    with pytest.raises(ValueError, match=re.escape(problem)):
        peak.parse_overrides(value)
    assert len(peak.parse_overrides(",".join(f"M{i}:bf16=1e14" for i in range(256)))) == 256


def test_the_table_is_bounded_and_names_a_bad_model():
    source = {"source": "s", "fp16": 1}
    with pytest.raises(ValueError, match="257 models; at most 256"):
        peak.table_from({"models": {f"M{i}": source for i in range(257)}})
    with pytest.raises(ValueError, match="at most 64"):
        peak.table_from({"models": {"x" * 65: source}})
    assert len(peak.shipped()) <= peak.MAX_ENTRIES and all(peak.model_problem(m) is None for m in peak.shipped())


def test_check_config_names_a_repeated_entry(tmp_path, capsys):
    config = tmp_path / "c.yaml"
    config.write_text("npu_smi:\n  peak_flops: ['910B3:bf16=3.13e14', 'Ascend910:bf16=3.5e14', '910B3:bf16=3.2e14']\n")
    assert main(["check-config", str(config)]) == 2
    err = capsys.readouterr().err
    assert "npu_smi.peak_flops" in err and "910B3:bf16 is given twice" in err
