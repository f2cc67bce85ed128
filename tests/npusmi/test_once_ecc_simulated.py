"""`once --simulate degraded` at a fixed instant: the Critical chip's ECC counts and isolated
pages through the real simulator subprocess and the real parsers, values worked out by hand
from the simulator's rates (exporter/simulator/scenarios.py, `_ecc`)."""

from __future__ import annotations

from exporter.cli import main
from exporter.simulator.scenarios import DEGRADED_CRITICAL_LOGIC_ID, ECC_EPOCH
from tests.support.exposition import samples, value

QUIET = ["--log.level", "error", "--npu-smi.details=ecc", "--no-npu-smi.board", "--no-hccn.enabled"]


def run_at(t: float, capsys, monkeypatch) -> dict:
    monkeypatch.setenv("CANN_SIM_TIME", str(t))
    assert main(["once", "--simulate", "degraded", *QUIET]) == 0
    return samples(capsys.readouterr().out)


def test_the_critical_chip_isolates_pages_and_no_other_does(capsys, monkeypatch):
    # 5 h 1 s after the counters start: single-bit errors one per 10 min (30), double-bit
    # 1 + one per hour (6), a page per double-bit error (6) and a single-bit page per 2 h (2).
    found = run_at(ECC_EPOCH + 5 * 3600 + 1, capsys, monkeypatch)
    critical = {"device": str(DEGRADED_CRITICAL_LOGIC_ID), "memory": "hbm"}
    assert value(found, "npu_ecc_errors_total", type="single_bit", **critical) == 30
    assert value(found, "npu_ecc_errors_total", type="double_bit", **critical) == 6
    assert value(found, "npu_ecc_aggregate_errors_total", type="double_bit", **critical) == 6
    assert value(found, "npu_ecc_isolated_pages", type="single_bit", **critical) == 2
    assert value(found, "npu_ecc_isolated_pages", type="double_bit", **critical) == 6
    isolated = {dict(labels)["device"] for (name, labels), v in found.items() if name == "npu_ecc_isolated_pages" and v}
    assert isolated == {str(DEGRADED_CRITICAL_LOGIC_ID)}
    # 910B3 prints DDR lines but has no DDR: no ddr series at all.
    assert not [key for key in found if key[0].startswith("npu_ecc_") and ("memory", "ddr") in key[1]]


def test_pages_grow_over_time(capsys, monkeypatch):
    before = run_at(ECC_EPOCH + 5 * 3600 + 1, capsys, monkeypatch)
    after = run_at(ECC_EPOCH + 7 * 3600 + 1, capsys, monkeypatch)
    critical = {"device": str(DEGRADED_CRITICAL_LOGIC_ID), "memory": "hbm"}
    assert value(after, "npu_ecc_isolated_pages", type="single_bit", **critical) == 3
    assert value(after, "npu_ecc_isolated_pages", type="double_bit", **critical) == 8
    assert value(after, "npu_ecc_errors_total", type="double_bit", **critical) > value(
        before, "npu_ecc_errors_total", type="double_bit", **critical
    )
