"""A chip's `device` label is known before the chip is served and never changes while the
process lives (npusmi/devices.py): `info -m` is asked at once for a chip first listed, the
overview's own logic id serves where the product prints one, and after npu_smi.device_wait
without an answer the chip's position is the one fallback. Real fixtures through a real
subprocess (tests/support/replay.py), with the source's clock injected."""

from __future__ import annotations

import logging
import time

import pytest
from prometheus_client.parser import text_string_to_metric_families

from exporter.core.health import HealthRegistry
from exporter.core.runner import CommandRunner
from exporter.npusmi.devices import DeviceIds
from exporter.npusmi.options import NpuSmiOptions
from exporter.npusmi.parse import parse_chip_map, parse_info
from exporter.npusmi.source import NpuSmiSource
from tests.support.paths import FIXTURES
from tests.support.replay import write_replay_npu_smi

NPU_SMI = FIXTURES / "npu-smi"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def chips_of(fixture: str) -> dict:
    table = parse_info((NPU_SMI / f"{fixture}.txt").read_text())
    return {(c.npu_id, c.chip_id): c for c in table.chips}


def entries_of(fixture: str) -> list:
    return parse_chip_map((NPU_SMI / f"{fixture}.txt").read_text())


def test_info_m_names_every_chip_at_once() -> None:
    clock, chips = Clock(), chips_of("info__910B3__25.5.1__1")
    ids = DeviceIds(60.0, clock)
    ids.listed(chips)
    assert sorted(ids.pending(chips)) == sorted(chips)  # the overview prints no logic id on 910B
    ids.tried(entries_of("info-m__910B3__25.5.1__1"))
    assert ids.pending(chips) == []
    assert [ids.device(key, chips[key], chips) for key in sorted(chips)] == [(True, n) for n in range(8)]


def test_the_overview_logic_id_serves_where_printed() -> None:
    chips = chips_of("info__310P3-300IDuo__24.1.rc2__1")
    ids = DeviceIds(60.0, Clock())
    ids.listed(chips)
    assert ids.pending(chips) == []
    assert {ids.device(key, chip, chips) for key, chip in chips.items()} == {(True, chip.logic_id) for chip in chips.values()}


def test_without_info_m_a_chip_waits_then_takes_its_position() -> None:
    clock, chips = Clock(), chips_of("info__910_93-A3__25.2.0__1")
    ids = DeviceIds(60.0, clock)
    ids.listed(chips)
    key = (1, 0)
    assert ids.device(key, chips[key], chips) == (False, None)
    clock.now += 120  # the wait is over, but info -m was never tried since the chip was listed
    assert ids.device(key, chips[key], chips) == (False, None)
    ids.tried(None)  # it failed
    assert ids.device(key, chips[key], chips) == (True, 2)  # its position among (0,0) (0,1) (1,0) (1,1)
    assert ids.pending(chips) == []
    # What info -m gives on this product: the fallback is the same label.
    assert {(e.npu_id, e.chip_id): e.logic_id for e in entries_of("info-m__910_93-A3__unknown__1__partial") if e.is_chip}[key] == 2


def test_a_served_device_never_changes(caplog: pytest.LogCaptureFixture) -> None:
    clock, chips = Clock(), chips_of("info__910B3__25.5.1__1")
    ids = DeviceIds(0.0, clock)
    ids.listed(chips)
    ids.tried(entries_of("info-m__910B3__25.5.1__1"))
    served = {key: ids.device(key, chip, chips) for key, chip in chips.items()}
    renumbered = [e for e in entries_of("info-m__910B3__25.5.1__1") if e.is_chip]
    renumbered = [type(e)(e.npu_id, e.chip_id, 7 - e.logic_id, e.chip_name) for e in renumbered]
    with caplog.at_level(logging.WARNING, logger="exporter.npusmi"):
        ids.tried(renumbered)
        ids.tried(renumbered)
    assert {key: ids.device(key, chip, chips) for key, chip in chips.items()} == served
    warned = [r for r in caplog.records if "another device id" in r.getMessage()]
    assert len(warned) == 8  # once per chip, not once per read


async def test_the_source_withholds_chips_until_named_and_says_so(tmp_path) -> None:
    clock = Clock()
    npu_smi = write_replay_npu_smi(tmp_path, {"info": "info__910B3__25.5.1__1"})  # info -m exits 1
    options = NpuSmiOptions(details=(), board=False, device_wait=30.0)
    source = NpuSmiSource(options, CommandRunner(timeout=20), HealthRegistry(), command=(str(npu_smi),), clock=clock)
    await source.refresh_info()
    part = source.part()
    assert part.chips == () and part.pending_chips == 8 and part.chips_seen == 8 and not source.named()
    clock.now += 31
    await source.refresh_info()  # asks info -m again (fails again): the wait is over
    part = source.part()
    assert [(c.npu, c.device) for c in part.chips] == [(n, n) for n in range(8)] and part.pending_chips == 0 and source.named()


async def test_the_source_names_chips_in_the_first_round(tmp_path) -> None:
    replies = {"info": "info__910B3__25.5.1__1", "info -m": "info-m__910B3__25.5.1__1"}
    npu_smi = write_replay_npu_smi(tmp_path, replies)
    source = NpuSmiSource(NpuSmiOptions(details=(), board=False), CommandRunner(timeout=20), HealthRegistry(), command=(str(npu_smi),))
    await source.refresh_info()  # the INFO task alone: readiness needs no inventory round
    assert [c.device for c in source.part().chips] == list(range(8)) and source.named()


@pytest.mark.parametrize("model", ["910b3", "a3"])
def test_no_chip_is_served_twice_from_the_first_second(start, model: str) -> None:
    """Scraped from the moment it listens until a while after it is ready: every chip has one
    device label, never an empty one (a phantom copy would page and later "resolve")."""
    exporter = start("--simulate", "degraded", "--simulate.model", model, "--no-hccn.enabled", "--no-collector.pods")
    seen: dict[tuple[str, str], set[str]] = {}
    ready_at, deadline = None, time.monotonic() + 90
    while time.monotonic() < deadline and (ready_at is None or time.monotonic() < ready_at + 5):
        status, text = exporter.get("/metrics")
        assert status == 200
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if "chip" in sample.labels and "npu" in sample.labels and sample.name.startswith("npu_"):
                    seen.setdefault((sample.labels["npu"], sample.labels["chip"]), set()).add(sample.labels.get("device", ""))
        if ready_at is None and exporter.get("/readyz")[0] == 200:
            ready_at = time.monotonic()
        time.sleep(0.1)
    assert ready_at is not None, "never ready"
    assert seen and all(len(devices) == 1 and "" not in devices for devices in seen.values()), seen
