"""`-t health` error codes through NpuSmiSource and a real npu-smi subprocess (a replay of
real fixtures): read only for chips that are not OK, dropped once the chip is OK again, each
with its handling level from the shipped fault-code table."""

from __future__ import annotations

from exporter.core.health import HealthRegistry
from exporter.core.runner import CommandRunner
from exporter.npusmi.options import NpuSmiOptions
from exporter.npusmi.source import NpuSmiSource
from tests.support.replay import calls, write_replay_npu_smi

ALARM_CODES = ("A4025021", "8C03A000", "8C084E00")  # info-t-health__910A__23.0.7__2, by hand


def source(npu_smi) -> NpuSmiSource:
    options = NpuSmiOptions(details=("health",), board=False)
    return NpuSmiSource(options, CommandRunner(timeout=20), HealthRegistry(), command=(str(npu_smi),))


async def sample(src: NpuSmiSource):
    await src.refresh_overview()
    await src.refresh_details()
    (chip,) = src.part().chips
    return chip


async def test_codes_follow_the_chip_health(tmp_path):
    alarm = {"info": "info__310B4__23.0.0__1", "info -t health -i 0 -c 0": "info-t-health__910A__23.0.7__2"}
    src = source(write_replay_npu_smi(tmp_path, alarm))
    chip = await sample(src)
    assert (chip.npu, chip.chip, chip.health) == (0, 0, "Alarm")
    assert tuple(e.code for e in chip.health_errors) == ALARM_CODES
    # NotHandleFault, RestartNPU, FreeRestartNPU in the shipped table: the chip needs a reset.
    assert [e.level for e in chip.health_errors] == ["NotHandleFault", "RestartNPU", "FreeRestartNPU"]
    assert chip.fault_level == "RestartNPU"

    # The same chip (NPU 0, chip 0) reported OK: the codes read a moment ago are not served,
    # and no health call is made (the replay would answer it with an error).
    write_replay_npu_smi(tmp_path, {"info": "info__310P3__22.0.0-drv22.0.2__1"})
    chip = await sample(src)
    assert chip.health == "OK"
    assert chip.health_errors == () and chip.fault_level == "none"
    status = src.health[src.DETAILS].status()
    assert status.success and dict(status.errors) == {}


async def test_an_alarm_without_codes_serves_none(tmp_path):
    # A health answer whose Error Code is NA (the healthy 910A capture) serves no code series.
    replies = {"info": "info__310B4__23.0.0__1", "info -t health -i 0 -c 0": "info-t-health__910A__23.0.x__1"}
    chip = await sample(source(write_replay_npu_smi(tmp_path, replies)))
    assert chip.health == "Alarm" and chip.health_errors == () and chip.fault_level == "none"


async def test_the_level_of_an_unread_chip_is_absent_not_none(tmp_path):
    # The health call fails: the chip is not OK and its codes are unknown, so is its level.
    replies = {"info": "info__310B4__23.0.0__1"}
    chip = await sample(source(write_replay_npu_smi(tmp_path, replies)))
    assert chip.health == "Alarm" and chip.fault_level is None


async def test_a_chip_found_unwell_has_its_codes_in_the_same_round(tmp_path):
    """The overview's task reads the codes of a chip it finds not OK at once, not at the next
    details round (an hour away here): NPUNeedsIsolation, which fires on them at once, can
    mute NPUUnhealthy before it pages. Codes still fresh are not asked for again."""
    alarm = {"info": "info__310B4__23.0.0__1", "info -t health -i 0 -c 0": "info-t-health__910A__23.0.7__2"}
    npu_smi = write_replay_npu_smi(tmp_path, alarm)
    options = NpuSmiOptions(details=("health",), board=False, detail_interval=3600.0)
    src = NpuSmiSource(options, CommandRunner(timeout=20), HealthRegistry(), command=(str(npu_smi),))
    await src.refresh_info()
    (chip,) = src.part().chips
    assert chip.health == "Alarm" and chip.fault_level == "RestartNPU"
    await src.refresh_info()
    assert [c for c in calls(tmp_path) if "-t health" in c] == ["info -t health -i 0 -c 0"]


async def test_codes_that_cannot_be_read_are_asked_at_once_only_once(tmp_path):
    """A health call that fails is not repeated by every overview round (a hung one would hold
    each back by the call's timeout): the details round reads it on its own schedule."""
    npu_smi = write_replay_npu_smi(tmp_path, {"info": "info__310B4__23.0.0__1"})
    options = NpuSmiOptions(details=("health",), board=False, detail_interval=3600.0)
    src = NpuSmiSource(options, CommandRunner(timeout=20), HealthRegistry(), command=(str(npu_smi),))
    for _ in range(3):
        await src.refresh_info()
    assert [c for c in calls(tmp_path) if "-t health" in c] == ["info -t health -i 0 -c 0"]
    (chip,) = src.part().chips
    assert chip.health == "Alarm" and chip.fault_level is None
    # OK again, then not OK: a new episode, asked at once again (and answered this time).
    write_replay_npu_smi(tmp_path, {"info": "info__310P3__22.0.0-drv22.0.2__1"})
    await src.refresh_info()
    write_replay_npu_smi(tmp_path, {"info": "info__310B4__23.0.0__1", "info -t health -i 0 -c 0": "info-t-health__910A__23.0.7__2"})
    await src.refresh_info()
    assert [c for c in calls(tmp_path) if "-t health" in c] == ["info -t health -i 0 -c 0"] * 2
    (chip,) = src.part().chips
    assert chip.fault_level == "RestartNPU"
