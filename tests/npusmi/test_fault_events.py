"""`-t current-fault-event` (Ascend 950): the event ids of the copied sample, the shapes a real
answer can take, and their way through the same fault-code path as `-t health` codes."""

from __future__ import annotations

import pytest

from exporter.npusmi.faultcodes import load_fault_codes
from exporter.npusmi.parse import ChipFaultEvents, ChipHealth, FaultEvent, NpuSmiError, parse_current_fault_event
from exporter.npusmi.part import ChipSample, FaultCode, fault_values
from tests.support.paths import NPU_SMI_FIXTURES

SAMPLE = (NPU_SMI_FIXTURES / "info-t-current-fault-event__950__unknown__1.txt").read_text()
INFO = "Fault Event Information        : event id={id}, severity={sev}, node type ex=215, node id=0, sub node type ex=0, sub node id=0\n"


def test_the_sample_reads_its_one_event():
    # By hand from the sample: one event, id 0x81AF8000, severity 2; the `-i 0` answer names no chip.
    assert parse_current_fault_event(SAMPLE, npu_id=0) == (ChipFaultEvents(0, 0, (FaultEvent("81AF8000", 2),)),)
    assert parse_current_fault_event(SAMPLE, npu_id=3, chip_id=1) == (ChipFaultEvents(3, 1, (FaultEvent("81AF8000", 2),)),)


def test_several_events_and_none():
    text = "Fault Event Count              : 2\n" + INFO.format(id="0x80e3a201", sev=3) + INFO.format(id="0x8C084E00", sev=1)
    (chip,) = parse_current_fault_event(text, npu_id=0)
    assert chip.events == (FaultEvent("80E3A201", 3), FaultEvent("8C084E00", 1))
    (chip,) = parse_current_fault_event("Fault Event Count              : 0\n", npu_id=0)
    assert chip.events == ()


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("Fault Event Count              : 2\n" + INFO.format(id="0x81AF8000", sev=2), "truncated"),  # cut after one event
        ("Fault Event Count              : 1\n" + INFO.format(id="0xZZ", sev=2), "garbled"),
        ("Fault Event Count              : 1\nFault Event Information        : severity=2\n", "garbled"),
        ("This device does not support querying current-fault-event.\n", "not_supported"),
        ("Total Count : 1\n", "garbled"),
    ],
)
def test_a_bad_answer_is_an_npusmi_error(text: str, reason: str):
    with pytest.raises(NpuSmiError) as caught:
        parse_current_fault_event(text, npu_id=0)
    assert caught.value.reason == reason


TABLE = load_fault_codes()


def chip(health: str) -> ChipSample:
    return ChipSample(npu=0, chip=0, device=0, up=True, health=health)


def test_event_ids_take_the_health_codes_path():
    events = parse_current_fault_event(SAMPLE, npu_id=0)[0]
    # An OK chip (no -t health call) with an active RestartNPU event.
    assert fault_values(chip("OK"), {"current-fault-event": events}, TABLE) == {
        "health_errors": (FaultCode("81AF8000", "RestartNPU"),),
        "fault_level": "RestartNPU",
    }
    # A Critical chip: its health codes and the event ids together, once each, the most severe wins.
    health = ChipHealth(0, 0, "Critical", ("80E3A201", "81AF8000"))
    found = fault_values(chip("Critical"), {"health": health, "current-fault-event": events}, TABLE)
    assert found == {
        "health_errors": (FaultCode("80E3A201", "SeparateNPU"), FaultCode("81AF8000", "RestartNPU")),
        "fault_level": "SeparateNPU",
    }
    # Codes not read for a chip that is not OK: its level is unknown to us, so absent.
    assert fault_values(chip("Alarm"), {"current-fault-event": events}, TABLE) == {}
