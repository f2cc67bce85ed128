"""`diagnose` covers every alert that pages, and says what is known of a node's chips.

Every alert of the threshold table whose severity pages (warning and critical: the shipped
Alertmanager routes deliver both to the receiver, critical ones repeated hourly; info is a
pointer, not an incident, docs/runbooks.md NPUTopOperatorsDominant) must have a `diagnose`
indicator: on a node where everything is wrong, some finding names the alert and its advice
gives causes or levers. An alert added to the table without one fails here.

Then the pure hardware checks this asks for: the chips expected (npu_expected_devices, config
before pci; NPUMissing's look-back on Prometheus; unknown otherwise, never "0 missing"), the
HCCS links, the HCCS, SIO and PCIe error counters (new ones judged, one reading undated), the
sensor limit and the advice of a failing read by the tool that failed.
"""

from __future__ import annotations

from exporter.core.selfmetrics import BUILD_INFO, SIMULATED
from exporter.diagnostics import baseline as bl
from exporter.diagnostics import hardware
from exporter.diagnostics.analysis import analyse
from exporter.diagnostics.hardware_advice import ADVICE
from exporter.diagnostics.model import (
    HARDWARE,
    ChipStats,
    Finding,
    Gap,
    HardwareReadings,
    JobStats,
    Observations,
    PageCount,
    Report,
    Series,
)
from exporter.diagnostics.render import advice
from exporter.diagnostics.scrape_reader import Scrape, observations, parse_exposition
from exporter.hccn.metrics import (
    NETWORK_ERRORS,
    NETWORK_HEALTH,
    NETWORK_LINK_DOWN_TRANSITIONS,
    NETWORK_LINK_UP,
    NETWORK_PACKETS,
    OPTICAL_PRESENT,
    OPTICAL_RX_POWER,
    OPTICAL_TEMPERATURE,
)
from exporter.npusmi.metrics import (
    DEVICES,
    ECC_ERRORS,
    EXPECTED_DEVICES,
    FAULT_LEVEL,
    HBM_TOTAL,
    HBM_USED,
    HCCS_BANDWIDTH,
    HCCS_ERRORS,
    HCCS_HEALTHY,
    HCCS_LINK_INFO,
    HCCS_RETRIES,
    HEALTH,
    PCIE_ERRORS,
    SENSOR_TEMPERATURE,
    SIO_ERRORS,
    TEMPERATURE,
)
from exporter.profiles.indicators import ProfileSummary
from exporter.resources.metrics import MAX_FDS, MEMORY_LIMIT, OPEN_FDS, RESIDENT_MEMORY
from exporter.thresholds.table import ABNORMAL, SEVERITIES, WARNING, Thresholds, load_thresholds

PAGING = ("warning", "critical")
CHIP = {"npu": "0", "chip": "0", "device": "0"}
CHIP_3 = {"npu": "3", "chip": "0", "device": "3"}


def everything_wrong() -> Observations:
    """One node where every paging alert has something to page on."""
    latest: dict[str, tuple[Series, ...]] = {
        HEALTH.name: (({**CHIP, "state": "Critical"}, 1.0), ({**CHIP_3, "state": "Alarm"}, 1.0)),
        FAULT_LEVEL.name: (({**CHIP, "level": "SeparateNPU"}, 1.0),),
        DEVICES.name: (({}, 7.0),),
        EXPECTED_DEVICES.name: (({"source": "pci"}, 8.0),),
        hardware.SUBJECT_FAILING: (({"source": "hccn", "subject": "link -i 0", "reason": "timeout"}, 1.0),),
        NETWORK_LINK_UP.name: ((CHIP, 0.0),),
        NETWORK_HEALTH.name: (({**CHIP, "state": "Fault"}, 1.0),),
        OPTICAL_PRESENT.name: ((CHIP, 1.0),),
        OPTICAL_RX_POWER.name: (({**CHIP, "lane": "1"}, 0.0),),
        OPTICAL_TEMPERATURE.name: ((CHIP, 90.0),),
        TEMPERATURE.name: ((CHIP, 99.0),),
        HCCS_HEALTHY.name: ((CHIP_3, 0.0),),
        SENSOR_TEMPERATURE.name: (({**CHIP, "sensor": "soc_max"}, 104.0),),
        HBM_USED.name: ((CHIP, 63.0 * 2**30),),
        HBM_TOTAL.name: ((CHIP, 64.0 * 2**30),),
        RESIDENT_MEMORY.name: (({}, 250.0 * 2**20),),
        MEMORY_LIMIT.name: (({}, 256.0 * 2**20),),
        OPEN_FDS.name: (({}, 1000.0),),
        MAX_FDS.name: (({}, 1024.0),),
        BUILD_INFO.name: (({"version": "1"}, 1.0),),
        SIMULATED.name: (({"scenario": "degraded", "model": "910b3"}, 1.0),),
    }
    increases: dict[str, tuple[Series, ...]] = {
        ECC_ERRORS.name: (({**CHIP, "memory": "hbm", "type": "double_bit"}, 2.0),),
        NETWORK_ERRORS.name: (({**CHIP, "kind": "fcs"}, 600.0),),
        NETWORK_LINK_DOWN_TRANSITIONS.name: ((CHIP, 4.0),),
        NETWORK_PACKETS.name: (({**CHIP, "kind": "pfc", "direction": "rx"}, 6e6),),
        HCCS_ERRORS.name: (({**CHIP_3, "link": "2"}, 3.0),),
        SIO_ERRORS.name: (({**CHIP, "direction": "tx"}, 1.0),),
        PCIE_ERRORS.name: (({**CHIP, "type": "retry"}, 5.0),),
    }
    readings = HardwareReadings(latest, increases, 600.0, (Gap("", 1.0e9, 120.0, trailing=True),))
    pages = (PageCount("hbm", "double_bit", 2.0),)
    chips = (
        ChipStats("", "0", "0", "0", 0.0, isolated_pages=pages, new_isolated_pages=2.0),
        ChipStats("", "1", "0", "1", 0.30, 0.05, 0.95, 0.30, 60),
    )
    phases = (("h2d", 0.4), ("framework", 0.3), ("forward", 0.3))
    jobs = (
        # 30% goodput, checkpoints 40% of the time (NPUJobGoodputLow, badput_share)
        JobStats("", "llm", "0", 1.0, 1.0, 8.0, 0.5, phases, 2000.0, 3600.0, 3600.0, "1", goodput=0.3, badput=(("checkpoint_save", 0.4),)),
        JobStats("", "llm", "1", 2.0, 0.5, 4.0, 0.5, phases, 2000.0, 3600.0, 3600.0, "1"),
    )
    profiles = (ProfileSummary("llm", 0, "/p", "torch_npu", top3_operator_ratio=0.95, max_operator_ratio=0.9),)
    return Observations("test", "1h", chips, jobs, profiles, hardware=readings)


def diagnosed(table: Thresholds) -> Report:
    obs = everything_wrong()
    report = analyse(obs, table)
    compared, _ = bl.compare(bl.job_performance(obs.jobs), {"llm": bl.JobPerf("llm", 0.5, 100.0, 2)}, table)
    return Report(report.source, report.window, (*report.findings, *compared))


def test_every_paging_alert_has_a_diagnose_indicator_with_its_levers() -> None:
    table = load_thresholds()
    assert {spec.severity for spec in table.alerts} <= set(SEVERITIES)
    paging = {spec.alert for spec in table.alerts if spec.severity in PAGING}
    report = diagnosed(table)
    named = {f.alert for f in report.findings if f.alert and f.verdict in (WARNING, ABNORMAL)}
    assert paging - named == set(), "paging alerts without a diagnose indicator"
    advised = {alert: tip for tip in advice(report, table) for alert in tip.alerts}
    unadvised = sorted(alert for alert in paging if not (advised[alert].causes and advised[alert].levers))
    assert unadvised == [], "paging alerts whose advice has no causes or levers"


def readings(latest: dict[str, tuple[Series, ...]], increases: dict[str, tuple[Series, ...]] | None = None) -> HardwareReadings:
    return HardwareReadings(latest, increases or {}, 600.0 if increases else None)


def found(r: HardwareReadings, check: str) -> list[Finding]:
    return [f for f in hardware.hardware_findings(r, load_thresholds()) if f.check == check]


def test_the_chips_expected_come_from_config_before_pci() -> None:
    seen = {DEVICES.name: (({}, 7.0),)}
    both = {**seen, EXPECTED_DEVICES.name: (({"source": "pci"}, 16.0), ({"source": "config"}, 8.0))}
    (f,) = found(readings(both), "missing")
    assert (f.value, f.verdict, f.alert, f.subject) == (1.0, ABNORMAL, "NPUMissing", "this node: chips")
    assert f.detail == '7 of 8 chips listed by npu-smi; expected from npu_expected_devices{source="config"} (npu_smi.expected_devices)'
    (pci,) = found(readings({**seen, EXPECTED_DEVICES.name: (({"source": "pci"}, 8.0),)}), "missing")
    assert pci.detail.startswith("7 of 8 chips") and "(the Ascend PCI functions in sysfs)" in pci.detail
    (whole,) = found(readings({DEVICES.name: (({}, 8.0),), EXPECTED_DEVICES.name: (({"source": "pci"}, 8.0),)}), "missing")
    assert (whole.value, whole.verdict) == (0.0, "healthy")


def test_without_an_expected_count_the_chips_missing_are_unknown_never_healthy() -> None:
    (f,) = found(readings({DEVICES.name: (({}, 7.0),)}), "missing")
    assert (f.value, f.verdict) == (None, None) and f.detail.startswith("unknown: no expected count (7 chips listed")
    # from Prometheus, NPUMissing's own fallback: the most listed within its look-back (1d)
    peak = {DEVICES.name: (({"instance": "n:9435"}, 7.0),), hardware.PEAK_DEVICES: (({"instance": "n:9435"}, 8.0),)}
    (lost,) = found(readings(peak), "missing")
    assert (lost.value, lost.verdict) == (1.0, ABNORMAL)
    assert (
        lost.detail
        == "7 of 8 chips listed by npu-smi; expected from the most it listed in the 1d before the window's end (NPUMissing's fallback)"
    )
    steady = {DEVICES.name: (({"instance": "n:9435"}, 7.0),), hardware.PEAK_DEVICES: (({"instance": "n:9435"}, 7.0),)}
    (same,) = found(readings(steady), "missing")
    assert (same.value, same.verdict) == (None, None) and "it listed no more within the 1d before the window's end" in same.detail


def test_an_hccs_link_nok_is_abnormal_and_names_the_narrow_link() -> None:
    links = tuple(({**CHIP_3, "link": str(i), "lane_mode": "4", "lane_list": "1111", "speed_gbps": "224"}, 1.0) for i in (0, 1))
    narrow = ({**CHIP_3, "link": "2", "lane_mode": "2", "lane_list": "1100", "speed_gbps": "112"}, 1.0)
    r = readings(
        {
            HCCS_HEALTHY.name: ((CHIP_3, 0.0), (CHIP, 1.0)),
            HCCS_LINK_INFO.name: (*links, narrow),
            HCCS_ERRORS.name: (({**CHIP_3, "link": "2"}, 1462416.0), ({**CHIP_3, "link": "0"}, 0.0)),
            HCCS_RETRIES.name: (({**CHIP_3, "link": "2"}, 4387248.0),),
            HCCS_BANDWIDTH.name: tuple(({**CHIP_3, "link": str(i), "direction": d}, 14e9) for i in range(3) for d in ("tx", "rx")),
        }
    )
    bad, good = found(r, "hccs_link")
    assert (bad.title, bad.verdict, bad.alert, bad.subject) == ("HCCS links NOK", ABNORMAL, "NPUHCCSLinkDown", "NPU 3 chip 0 (device 3)")
    assert bad.detail == (
        "npu-smi -t hccs health status NOK; link 2: 2 of 4 lanes (1100, 112 Gbit/s); "
        "link 2: 1462416 CRC errors, 4387248 retries since the driver started"
    )
    assert (good.title, good.verdict) == ("HCCS links OK", "healthy")
    (bw,) = found(r, "hccs_bandwidth")
    assert bw.verdict is None and bw.value == 42e9 / (2 * 28e9 + 14e9)  # each way, against the links' speed
    # one reading: the count since the driver started is shown, not dated
    (count,) = found(r, "hccs_errors")
    assert (count.value, count.verdict, count.alert) == (
        1462416.0,
        None,
        "NPUHCCSErrors",
    ) and "one reading cannot date them" in count.detail


def test_new_link_errors_are_judged_by_their_alerts() -> None:
    table = load_thresholds()
    new = readings(
        {},
        {
            HCCS_ERRORS.name: (({**CHIP_3, "link": "2"}, 3.0), ({**CHIP_3, "link": "1"}, 0.0)),
            SIO_ERRORS.name: (({**CHIP, "direction": "tx"}, 0.0), ({**CHIP, "direction": "rx"}, 0.0)),
            PCIE_ERRORS.name: (({**CHIP, "type": "retry"}, 2.0), ({**CHIP, "type": "lcrc"}, 1.0)),
        },
    )
    findings = {f.check: f for f in hardware.hardware_findings(new, table)}
    assert "sio_errors" not in findings  # none new
    hccs, pcie = findings["hccs_errors"], findings["pcie_errors"]
    assert (hccs.value, hccs.verdict, hccs.alert, hccs.detail) == (3.0, WARNING, "NPUHCCSErrors", "link 2: 3")
    assert hccs.bounds == f"warning: > {table.alert('NPUHCCSErrors').threshold:g} new in the window"
    assert (pcie.value, pcie.verdict, pcie.alert, pcie.detail) == (3.0, WARNING, "NPUPCIeErrors", "type lcrc: 1, type retry: 2")


def test_a_sensor_at_its_published_limit_is_abnormal_and_unlisted_sensors_are_not_judged() -> None:
    r = readings({SENSOR_TEMPERATURE.name: (({**CHIP, "sensor": "soc_max"}, 101.0), ({**CHIP, "sensor": "hbm"}, 120.0))})
    (hot,) = found(r, "sensor_temperature")
    assert (hot.title, hot.verdict, hot.alert) == ("Sensor soc_max temperature", ABNORMAL, "NPUSensorTemperatureHigh")


def test_a_failing_read_is_advised_by_its_tool() -> None:
    table = load_thresholds()
    failing = (
        ({"source": "hccn", "subject": "optical -i 0", "reason": "permission_denied"}, 1.0),
        ({"source": "npu_smi_details", "subject": "usages -i 5", "reason": "dcmi_init_failed"}, 1.0),
    )
    findings = hardware.hardware_findings(readings({hardware.SUBJECT_FAILING: failing}), table)
    tips = {tip.key: tip for tip in advice(Report("test", None, tuple(findings)), table)}
    assert set(tips) == {"CANNExporterSourceFailing:hccn_tool", "CANNExporterSourceFailing:npu-smi"}
    hccn = " ".join(tips["CANNExporterSourceFailing:hccn_tool"].causes + tips["CANNExporterSourceFailing:hccn_tool"].levers)
    assert "hccn_tool" in hccn and "npu-smi command" not in hccn
    assert any("npu-smi info -t" in lever for lever in tips["CANNExporterSourceFailing:npu-smi"].levers)
    assert all(tip.alerts == ("CANNExporterSourceFailing",) for tip in tips.values())
    assert {f.level for f in findings} == {HARDWARE}
    assert set(ADVICE) >= set(tips)


def test_two_reads_of_an_exporter_judge_the_errors_between_them() -> None:
    """--samples on /metrics or the local node: the counters' increase between the first and
    the last read is what the alerts count."""

    def read(errors: float, retries: float, at: float) -> Scrape:
        text = (
            '# TYPE npu_aicore_utilization_ratio gauge\nnpu_aicore_utilization_ratio{npu="3",chip="0",device="3"} 0.9\n'
            '# TYPE npu_hccs_errors_total counter\nnpu_hccs_errors_total{npu="3",chip="0",device="3",link="2"} ' + f"{errors}\n"
            '# TYPE npu_pcie_errors_total counter\nnpu_pcie_errors_total{npu="3",chip="0",device="3",type="retry"} ' + f"{retries}\n"
        )
        return parse_exposition(text, at, "test")

    obs = observations([read(100, 7, 0.0), read(102, 7, 60.0)], "test")
    findings = {f.check: f for f in hardware.hardware_findings(obs.hardware, load_thresholds())}
    assert (findings["hccs_errors"].value, findings["hccs_errors"].verdict) == (2.0, WARNING)
    assert "pcie_errors" not in findings  # 7 before and after: old retries, no page
