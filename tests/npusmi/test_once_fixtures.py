"""`cann-exporter once --npu-smi X` on every fixture model: real subprocess, real parsers.

X is a shell stand-in that prints the real npu-smi outputs (tests/conftest.py). Expected
values are read by hand from the fixture text; MiB = 1,048,576 bytes (npu-smi's "MB").
The full exposition of each case is also compared with tests/golden/<fixture>.prom
(rewrite with UPDATE_GOLDENS=1, then read the diff).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from exporter.cli import main
from tests.support.exposition import samples, value
from tests.support.paths import FIXTURES, GOLDEN
from tests.support.tools import tool

MIB = 1024 * 1024
# A sysfs without Ascend functions: the goldens do not depend on the host's /sys. No owners:
# the fixtures' pids would be looked up in this machine's /proc (tests/owners reads them).
QUIET = [
    "--no-collector.self",
    "--no-collector.owners",
    "--log.level",
    "error",
    "--npu-smi.sysfs",
    str(FIXTURES / "sysfs" / "no-ascend__written"),
]
OVERVIEW_ONLY = ["--npu-smi.details=", "--no-npu-smi.board"]

# fixture -> chips in its table (counted by hand)
CHIP_COUNTS = {
    "info__310-Atlas300I-x5__20.2.2__1": 20,
    "info__310B4__23.0.0__1": 1,
    "info__310P3-300IDuo__24.1.rc2__1": 2,
    "info__310P3-300IDuo__25.5.2__1": 1,
    "info__310P3-vnpu-vir01__22.0.4__1": 1,
    "info__310P3__22.0.0-drv22.0.2__1": 1,
    "info__310P3__22.0.2-drv22.0.4__1": 1,
    "info__310P3__22.0.4__1": 1,
    "info__310P3__23.0.0__1": 1,
    "info__310P3__25.2.3__1": 1,
    "info__910-1stgen-Name910B__24.1.0__1": 8,
    "info__910A__21.0.2__1": 2,
    "info__910A__21.0.4__1": 2,
    "info__910B2C__23.0.2.1__1": 2,
    "info__910B2__23.0.7__1": 8,
    "info__910B2__25.2.0__1": 8,
    "info__910B3__25.5.1__1": 8,
    "info__910_93-A3__25.2.0__1": 4,
    "info__950PR__25.7.rc1__1": 3,
}


def run_once(capsys, npu_smi: Path, *extra: str) -> tuple[int, str]:
    status = main(["once", "--npu-smi", str(npu_smi), *QUIET, *extra])
    return status, capsys.readouterr().out


def check_golden(name: str, text: str) -> None:
    path = GOLDEN / f"{name}.prom"
    if os.environ.get("UPDATE_GOLDENS"):
        path.parent.mkdir(exist_ok=True)
        path.write_text(text)
    assert path.exists(), f"missing golden {path}; run with UPDATE_GOLDENS=1 and review it"
    assert text == path.read_text()


@pytest.mark.parametrize("fixture", sorted(CHIP_COUNTS))
def test_every_fixture_model_is_served(fixture, replay_npu_smi, capsys):
    npu_smi = replay_npu_smi({"info": fixture})
    status, text = run_once(capsys, npu_smi, *OVERVIEW_ONLY)
    assert status == 0
    found = samples(text)
    assert value(found, "npu_devices") == CHIP_COUNTS[fixture]
    ups = [v for (n, _), v in found.items() if n == "npu_up"]
    assert ups == [1.0] * CHIP_COUNTS[fixture]
    check_golden(fixture, text)


def test_910b3_with_inventory_and_details(replay_npu_smi, capsys):
    npu_smi = replay_npu_smi(
        {
            "info": "info__910B3__25.5.1__1",
            "info -m": "info-m__910B3__25.5.1__1",
            "info -t usages -i 0": "info-t-usages__910B3__25.5.1__1",
            "info -t common -i 0": "info-t-common__910B3__25.5.1__1",
            "info -t memory -i 0": "info-t-memory__910B3__25.5.1__1",
        }
    )
    status, text = run_once(capsys, npu_smi, "--npu-smi.details=usages,common,memory", "--no-npu-smi.board", "--collector.self")
    assert status == 0
    found = samples(text)
    chip0 = {"npu": "0", "chip": "0", "device": "0"}
    assert value(found, "npu_hbm_used_bytes", **chip0) == 59189 * MIB
    assert value(found, "npu_hbm_total_bytes", **chip0) == 65536 * MIB
    assert value(found, "npu_power_watts", **chip0) == 99.4
    assert value(found, "npu_temperature_celsius", npu="7") == 39
    assert value(found, "npu_hbm_used_bytes", npu="7") == 19319 * MIB
    # 910B has no DDR: npu-smi prints 0 / 0, which is absence, not an empty DDR.
    assert value(found, "npu_memory_total_bytes", npu="0") is None
    # `-t usages` (Ctrlcpu 7%), `-t common` (curFreq 800 MHz), `-t memory` (HBM 31 C) for NPU 0
    assert value(found, "npu_ctrlcpu_utilization_ratio", **chip0) == pytest.approx(0.07)
    assert value(found, "npu_aicore_frequency_hertz", **chip0) == 800e6
    assert value(found, "npu_aicore_rated_frequency_hertz", **chip0) == 1800e6
    assert value(found, "npu_hbm_temperature_celsius", **chip0) == 31
    # The other cards' detail calls fail; their overview values are still served.
    assert value(found, "npu_ctrlcpu_utilization_ratio", npu="3") is None
    assert value(found, "npu_power_watts", npu="3") == 93.2
    assert value(found, "cann_exporter_source_errors_total", source="npu_smi_details", reason="invalid_type") == 7 * 3
    assert value(found, "cann_exporter_source_success", source="npu_smi_details") == 0
    assert value(found, "cann_exporter_source_success", source="npu_smi_info") == 1
    # the process table, with the logic id from `info -m`
    assert value(found, "npu_process_memory_bytes", pid="3233241") == 55844 * MIB
    assert value(found, "npu_process_memory_bytes", pid="3233241", process="VLLMWorker_TP", device="0") == 55844 * MIB
    assert value(found, "npu_process_memory_bytes", pid="1886762", npu="7") == 15975 * MIB
    assert value(found, "npu_driver_info", version="25.5.1") == 1


def test_a3_dies_phy_ids_and_second_die_power(replay_npu_smi, capsys):
    npu_smi = replay_npu_smi({"info": "info__910_93-A3__25.2.0__1"})
    status, text = run_once(capsys, npu_smi, *OVERVIEW_ONLY)
    assert status == 0
    found = samples(text)
    assert value(found, "npu_power_watts", npu="0", chip="0") == 162.8
    assert value(found, "npu_power_watts", npu="0", chip="1") is None  # printed as "-"
    assert value(found, "npu_hbm_used_bytes", npu="1", chip="1") == 10568 * MIB
    assert value(found, "npu_device_info", npu="1", chip="1", phy_id="3", bus_id="0000:39:00.0") == 1
    assert value(found, "npu_process_memory_bytes", npu="1", chip="1", pid="990711", process="python") == 7746 * MIB


def test_310p_duo_uses_the_device_column_and_has_no_power_or_hbm(replay_npu_smi, capsys):
    npu_smi = replay_npu_smi({"info": "info__310P3-300IDuo__24.1.rc2__1"})
    status, text = run_once(capsys, npu_smi, *OVERVIEW_ONLY)
    found = samples(text)
    assert status == 0
    assert value(found, "npu_memory_used_bytes", npu="1792", chip="1", device="1") == 1041 * MIB
    assert value(found, "npu_memory_total_bytes", npu="1792", chip="0", device="0") == 44280 * MIB
    assert value(found, "npu_power_watts", npu="1792", chip="0") is None  # NA in the table
    assert value(found, "npu_hbm_total_bytes", npu="1792", chip="0") is None


def test_first_generation_910_has_ddr_and_hbm(replay_npu_smi, capsys):
    npu_smi = replay_npu_smi({"info": "info__910-1stgen-Name910B__24.1.0__1"})
    status, text = run_once(capsys, npu_smi, *OVERVIEW_ONLY)
    found = samples(text)
    assert status == 0
    assert value(found, "npu_memory_used_bytes", npu="0") == 1197 * MIB
    assert value(found, "npu_memory_total_bytes", npu="0") == 13553 * MIB
    assert value(found, "npu_hbm_used_bytes", npu="0") == 1365 * MIB
    assert value(found, "npu_hbm_total_bytes", npu="0") == 32768 * MIB


def test_950_health_and_npu_util(replay_npu_smi, capsys):
    npu_smi = replay_npu_smi({"info": "info__950PR__25.7.rc1__1"})
    status, text = run_once(capsys, npu_smi, *OVERVIEW_ONLY)
    found = samples(text)
    assert status == 0
    assert value(found, "npu_health", npu="0", state="Alarm") == 1
    assert value(found, "npu_health", npu="0", state="OK") == 0
    assert value(found, "npu_health", npu="2", state="OK") == 1
    assert value(found, "npu_utilization_ratio", npu="0") == 1.0  # NPU Util(%) 100
    assert value(found, "npu_aicore_utilization_ratio", npu="0") is None
    assert value(found, "npu_hbm_used_bytes", npu="0") == 90633 * MIB
    assert value(found, "npu_hbm_total_bytes", npu="2") == 131072 * MIB


def test_old_910a_hbm_zero_is_a_value_and_missing_hugepages_are_absent(replay_npu_smi, capsys):
    npu_smi = replay_npu_smi({"info": "info__910A__21.0.2__1"})
    status, text = run_once(capsys, npu_smi, *OVERVIEW_ONLY)
    found = samples(text)
    assert status == 0
    assert value(found, "npu_hbm_used_bytes", npu="4") == 0
    assert value(found, "npu_hbm_total_bytes", npu="4") == 32768 * MIB
    assert value(found, "npu_memory_used_bytes", npu="1") == 1809 * MIB
    assert value(found, "npu_hugepages_total_pages", npu="1") is None  # 21.0.2 has no hugepages column


def test_ecc_fixture_serves_all_three_families_for_ddr_and_hbm(replay_npu_smi, capsys):
    """`-t ecc` of a 910 with DDR and HBM (NPU 1 of the 910A table): every count printed is 0,
    and 0 is served (it is a reading, not an absence); NPU 4, whose ecc call fails, has none."""
    npu_smi = replay_npu_smi({"info": "info__910A__21.0.2__1", "info -t ecc -i 1": "info-t-ecc__910-doc__unknown__1"})
    status, text = run_once(capsys, npu_smi, "--npu-smi.details=ecc", "--no-npu-smi.board")
    assert status == 0
    found = samples(text)
    for name in ("npu_ecc_errors_total", "npu_ecc_aggregate_errors_total", "npu_ecc_isolated_pages"):
        series = {
            (labels["memory"], labels["type"]): v
            for (n, key), v in found.items()
            if n == name
            for labels in [dict(key)]
            if labels["npu"] == "1"
        }
        assert series == {(memory, kind): 0 for memory in ("ddr", "hbm") for kind in ("single_bit", "double_bit")}, name
        assert value(found, name, npu="4") is None, name


@pytest.mark.parametrize(
    "error",
    [
        "error-dcmi-init-8005__container__unknown__1",
        "error-dcmi-init-8020__container__unknown__1",
    ],
)
def test_npu_smi_error_exits_non_zero_with_the_reason_counted(error, replay_npu_smi, capsys):
    npu_smi = replay_npu_smi({"info": (error, 255), "info -m": (error, 255)})
    status, text = main(["once", "--npu-smi", str(npu_smi), "--log.level", "error", *OVERVIEW_ONLY]), None
    text = capsys.readouterr().out
    found = samples(text)
    assert status == 1
    reason = "dcmi_init_failed" if "8005" in error else "device_busy"
    assert value(found, "cann_exporter_source_errors_total", source="npu_smi_info", reason=reason) == 1
    assert value(found, "cann_exporter_source_success", source="npu_smi_info") == 0
    assert value(found, "npu_devices") is None


def test_once_through_the_console_script(replay_npu_smi, tmp_path):
    """The installed entry point, as a user runs it."""
    npu_smi = replay_npu_smi({"info": "info__910B3__25.5.1__1"})
    proc = subprocess.run(
        [sys.executable, "-m", "exporter", "once", "--npu-smi", str(npu_smi), *OVERVIEW_ONLY],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert 'npu_hbm_used_bytes{chip="0",device="0",npu="0"} 6.2064164864e+10' in proc.stdout
    missing = subprocess.run(
        [sys.executable, "-m", "exporter", "once", "--npu-smi", str(tmp_path / "absent")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert missing.returncode == 1
    assert "no chip could be read" in missing.stderr
    assert 'cann_exporter_source_errors_total{reason="not_found",source="npu_smi_info"} 1.0' in missing.stdout


def test_golden_expositions_pass_promtool_check_metrics():
    """Prometheus' own linter over every golden exposition (naming, units, help texts): not one warning."""
    promtool = tool("promtool")
    for golden in sorted(GOLDEN.glob("*.prom")):
        proc = subprocess.run([promtool, "check", "metrics"], input=golden.read_text(), capture_output=True, text=True, timeout=60)
        problems = [line for line in (proc.stdout + proc.stderr).splitlines() if line.strip()]
        assert (proc.returncode, problems) == (0, []), golden.name


def test_error_codes_are_read_for_a_chip_that_is_not_ok(replay_npu_smi, capsys):
    # The 310B4 overview shows its chip in Alarm; the only real `-t health -c` captures are
    # 910A ones, with the same key-value layout on every model (docs/formats/npu-smi.md, "The -t health output").
    npu_smi = replay_npu_smi(
        {
            "info": "info__310B4__23.0.0__1",
            "info -t health -i 0 -c 0": "info-t-health__910A__23.0.7__2",
        }
    )
    status, text = run_once(capsys, npu_smi, "--npu-smi.details=health", "--no-npu-smi.board", "--collector.self")
    assert status == 0
    found = samples(text)
    assert value(found, "npu_health", npu="0", chip="0", state="Alarm") == 1
    codes = {dict(ls)["code"] for (n, ls), v in found.items() if n == "npu_health_error_info" and v == 1}
    assert codes == {"A4025021", "8C03A000", "8C084E00"}
    assert value(found, "cann_exporter_source_success", source="npu_smi_details") == 1


def test_healthy_chips_cost_no_health_calls(replay_npu_smi, capsys):
    # Every 910B3 chip is OK: a `-t health` call would hit the replay's error reply and count.
    npu_smi = replay_npu_smi({"info": "info__910B3__25.5.1__1"})
    status, text = run_once(capsys, npu_smi, "--npu-smi.details=health", "--no-npu-smi.board", "--collector.self")
    assert status == 0
    found = samples(text)
    assert value(found, "npu_health", npu="0", state="OK") == 1
    assert [n for (n, _), _ in found.items() if n == "npu_health_error_info"] == []
    assert value(found, "cann_exporter_source_success", source="npu_smi_details") == 1
    assert [ls for (n, ls), _ in found.items() if n == "cann_exporter_source_errors_total" and ("source", "npu_smi_details") in ls] == []


def test_a_failing_health_call_hides_nothing_else(replay_npu_smi, capsys):
    npu_smi = replay_npu_smi(
        {
            "info": "info__310B4__23.0.0__1",
            "info -t health -i 0 -c 0": ("error-dcmi-init-8005__container__unknown__1", 1),
        }
    )
    status, text = run_once(capsys, npu_smi, "--npu-smi.details=health", "--no-npu-smi.board", "--collector.self")
    assert status == 0
    found = samples(text)
    assert value(found, "npu_health", npu="0", chip="0", state="Alarm") == 1
    assert value(found, "npu_temperature_celsius", npu="0", chip="0") == 65
    assert [n for (n, _), _ in found.items() if n == "npu_health_error_info"] == []
    assert value(found, "cann_exporter_source_errors_total", source="npu_smi_details", reason="dcmi_init_failed") == 1
