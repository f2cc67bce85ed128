"""ChipsCollector and ProcessesCollector from plain parts: what a chip not read now keeps, and
absence versus zero."""

from __future__ import annotations

from exporter.npusmi.collector import ChipsCollector, ProcessesCollector
from exporter.npusmi.parse import parse_ecc
from exporter.npusmi.part import (
    ChipSample,
    DevicesPart,
    EccCount,
    FaultCode,
    ProcessSample,
    ecc_values,
)
from tests.support.exposition import render, value, values


def chip(npu: int, up: bool = True, **values) -> ChipSample:
    health = {"health": values.pop("health", "OK")} if up else {}
    return ChipSample(npu=npu, chip=0, device=npu, up=up, model="910B3", **health, **values)


def test_a_chip_not_read_now_keeps_its_identity_only():
    part = DevicesPart(chips=(chip(0, aicore_utilization_ratio=0.5), chip(1, up=False)), chips_seen=1, stale_chips=1)
    found = render(ChipsCollector(), part)
    assert values(found, "npu_aicore_utilization_ratio", "npu") == {"0": 0.5}
    assert values(found, "npu_up", "npu") == {"0": 1.0, "1": 0.0}
    assert values(found, "npu_device_info", "npu") == {"0": 1.0, "1": 1.0}
    assert set(values(found, "npu_health", "npu")) == {"0"}


def test_absent_values_are_absent_not_zero():
    found = render(ChipsCollector(), DevicesPart(chips=(chip(0, aicore_utilization_ratio=0.0),), chips_seen=1))
    assert value(found, "npu_aicore_utilization_ratio") == 0.0  # a real zero
    assert value(found, "npu_power_watts") is None  # never read
    assert value(found, "npu_devices") == 1
    assert value(found, "npu_driver_info") is None  # no version read


def test_health_stateset_codes_and_ecc():
    errors = (FaultCode("80E18005", "RestartNPU"), FaultCode("12345678", "unknown"))
    part = DevicesPart(
        chips=(chip(0, health="Critical", health_errors=errors, fault_level="RestartNPU", ecc=(EccCount("hbm", "double_bit", 3),)),)
    )
    found = render(ChipsCollector(), part)
    assert {dict(ls)["state"]: v for (n, ls), v in found.items() if n == "npu_health"} == {
        "OK": 0,
        "Warning": 0,
        "Alarm": 0,
        "Critical": 1,
        "Unknown": 0,
    }
    assert value(found, "npu_health_error_info", code="80E18005", level="RestartNPU") == 1
    assert value(found, "npu_health_error_info", code="12345678", level="unknown") == 1
    levels = {dict(ls)["level"]: v for (n, ls), v in found.items() if n == "npu_fault_level"}
    assert levels["RestartNPU"] == 1 and sum(levels.values()) == 1 and {"none", "unknown", "SeparateNPU"} <= set(levels)
    assert value(found, "npu_ecc_errors_total", memory="hbm", type="double_bit") == 3


def test_processes_without_memory_are_left_out():
    procs = (ProcessSample(0, 0, 0, 42, "python", 1024.0), ProcessSample(0, 0, 0, 43, "idle", None))
    found = render(ProcessesCollector(), DevicesPart(processes=procs))
    assert values(found, "npu_process_memory_bytes", "pid") == {"42": 1024.0}


def test_each_ecc_family_holds_only_what_the_chip_printed():
    """A 310 prints only `Single-bit/Double-bit Error Count` (read as DDR): no lifetime totals,
    no isolated pages; a 910B prints DDR lines but has no DDR, so only HBM is kept."""
    text_310 = "\tSingle-bit Error Count         : 2\n\tDouble-bit Error Count         : 0\n\tChip ID                        : 0\n"
    (ecc_310,) = parse_ecc(text_310, npu_id=0)
    on_310 = ecc_values(ecc_310, ddr=True)
    assert on_310 == ((EccCount("ddr", "single_bit", 2), EccCount("ddr", "double_bit", 0)), (), ())
    errors, aggregate, isolated = on_310
    found = render(ChipsCollector(), DevicesPart(chips=(chip(0, ecc=errors, ecc_aggregate=aggregate, ecc_isolated_pages=isolated),)))
    assert value(found, "npu_ecc_errors_total", type="single_bit") == 2
    assert value(found, "npu_ecc_aggregate_errors_total", type="single_bit") is None
    assert value(found, "npu_ecc_isolated_pages", type="single_bit") is None

    lines = [
        f"{memory} {kind} Bit {what}"
        for memory in ("DDR", "HBM")
        for kind in ("Single", "Double")
        for what in ("Error Count", "Aggregate Total Err Cnt", "Isolated Pages Count")
    ]
    text_910b = "".join(f"\t{line:<40} : {n}\n" for n, line in enumerate(lines, start=1)) + "\tChip ID : 0\n"
    (ecc_910b,) = parse_ecc(text_910b, npu_id=0)
    errors, aggregate, isolated = ecc_values(ecc_910b, ddr=False)  # no DDR: its printed lines are dropped
    assert isolated == (EccCount("hbm", "single_bit", 9), EccCount("hbm", "double_bit", 12))
    assert aggregate == (EccCount("hbm", "single_bit", 8), EccCount("hbm", "double_bit", 11))
    assert errors == (EccCount("hbm", "single_bit", 7), EccCount("hbm", "double_bit", 10))
