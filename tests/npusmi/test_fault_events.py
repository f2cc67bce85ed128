"""`-t current-fault-event` (Ascend 950): the event ids of the copied sample, the shapes a real
answer can take, and their way through the same fault-code path as `-t health` codes."""

from __future__ import annotations

import pytest

from exporter.core.health import HealthRegistry
from exporter.core.runner import CommandRunner
from exporter.npusmi.faultcodes import load_fault_codes
from exporter.npusmi.options import NpuSmiOptions
from exporter.npusmi.parse import ChipFaultEvents, ChipHealth, FaultEvent, NpuSmiError, parse_current_fault_event
from exporter.npusmi.part import FaultCode, chip_faults
from exporter.npusmi.source import NpuSmiSource
from exporter.simulator.faultevents import FAMILY_950, UNSUPPORTED, render_current_fault_event
from exporter.simulator.models import MODELS
from exporter.simulator.record import replace
from exporter.simulator.scenarios import DEGRADED_CRITICAL_LOGIC_ID, simulate
from tests.support.paths import NPU_SMI_FIXTURES
from tests.support.replay import calls, write_replay_npu_smi

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


def test_event_ids_take_the_health_codes_path():
    events = parse_current_fault_event(SAMPLE, npu_id=0)[0]
    # An OK chip (no -t health call) with an active RestartNPU event.
    assert chip_faults("OK", {"current-fault-event": events}, TABLE) == ((FaultCode("81AF8000", "RestartNPU"),), "RestartNPU")
    # A Critical chip: its health codes and the event ids together, once each, the most severe wins.
    health = ChipHealth(0, 0, "Critical", ("80E3A201", "81AF8000"))
    found = chip_faults("Critical", {"health": health, "current-fault-event": events}, TABLE)
    assert found == ((FaultCode("80E3A201", "SeparateNPU"), FaultCode("81AF8000", "RestartNPU")), "SeparateNPU")
    # Codes not read for a chip that is not OK: its level is unknown to us, so absent.
    assert chip_faults("Alarm", {"current-fault-event": events}, TABLE) == ((), None)


async def test_the_source_reads_events_through_a_real_subprocess(tmp_path):
    # Three Ascend 950PR cards (two in Alarm, one OK), each answering the 950 reference's one event.
    replies = {"info": "info__950PR__25.7.rc1__1", "info -t current-fault-event -i *": "info-t-current-fault-event__950__unknown__1"}
    npu_smi = write_replay_npu_smi(tmp_path, replies)
    src = NpuSmiSource(
        NpuSmiOptions(details=("current-fault-event",), board=False, device_wait=0.0),
        CommandRunner(timeout=20),
        HealthRegistry(),
        command=(str(npu_smi),),
    )
    await src.refresh_overview()
    await src.refresh_details()
    chips = {c.npu: c for c in src.part().chips}
    assert chips[2].health == "OK" and chips[2].health_errors == (FaultCode("81AF8000", "RestartNPU"),)
    assert chips[2].fault_level == "RestartNPU"
    # In Alarm, but -t health was not asked: the chip's codes, and so its level, are unknown.
    assert chips[0].health == "Alarm" and chips[0].fault_level is None
    assert src.health[src.DETAILS].status().success


def test_the_simulator_answers_as_the_products_do():
    for model in MODELS.values():  # no simulated model is a 950
        state = simulate(model, "degraded", 1_800_000_000.0)
        assert render_current_fault_event(state, state.chips[0].npu_id) == UNSUPPORTED
        with pytest.raises(NpuSmiError) as caught:
            parse_current_fault_event(UNSUPPORTED, npu_id=0)
        assert caught.value.reason == "not_supported"
    # A 950 (one chip per NPU) lists the degraded chip's codes as its events, and the parser reads them back.
    model = replace(MODELS["910b3"], family=FAMILY_950)
    state = simulate(model, "degraded", 1_800_000_000.0)
    critical = next(c for c in state.chips if c.logic_id == DEGRADED_CRITICAL_LOGIC_ID)
    (found,) = parse_current_fault_event(render_current_fault_event(state, critical.npu_id), npu_id=critical.npu_id)
    assert [e.event_id for e in found.events] == list(critical.error_codes) and found.chip_id == 0
    healthy = next(c for c in state.chips if c.logic_id != DEGRADED_CRITICAL_LOGIC_ID)
    assert parse_current_fault_event(render_current_fault_event(state, healthy.npu_id), npu_id=healthy.npu_id)[0].events == ()


async def test_a_card_that_does_not_answer_is_asked_once_and_fails_nothing(tmp_path):
    # On by default, so every product is asked once; all but the 950 say "does not support".
    assert "current-fault-event" in NpuSmiOptions().details
    refusal = tmp_path / "unsupported.txt"
    refusal.write_text(UNSUPPORTED)
    npu_smi = write_replay_npu_smi(tmp_path, {"info": "info__910B3__25.5.1__1", "info -t current-fault-event -i *": (refusal, 0)})
    src = NpuSmiSource(
        NpuSmiOptions(details=("current-fault-event",), board=False, device_wait=0.0),
        CommandRunner(timeout=20),
        HealthRegistry(),
        command=(str(npu_smi),),
    )
    await src.refresh_overview()
    cards = {c.npu for c in src.part().chips}
    for _ in range(3):
        await src.refresh_details()
    asked = [c for c in calls(tmp_path) if "current-fault-event" in c]
    assert len(cards) > 1 and sorted(asked) == sorted(f"info -t current-fault-event -i {n}" for n in cards)
    assert src.health[src.DETAILS].status().success
    assert all(c.health_errors == () for c in src.part().chips)
