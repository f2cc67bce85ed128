"""Publishing a sampler run once its encodings are prepared (snapshot.py)."""

from __future__ import annotations

import asyncio
import logging

from exporter.core.snapshot import Snapshot
from exporter.node.snapshot import SnapshotStore
from exporter.npusmi.part import DEVICES, ChipSample, DevicesPart


def chips(health: str) -> Snapshot:
    return Snapshot.of(
        True, {"devices": DevicesPart(chips=(ChipSample(npu=0, chip=0, device=0, up=True, model="910B3", health=health),), chips_seen=1)}
    )


async def test_the_preparer_sees_a_changed_snapshot_before_it_is_current_and_never_an_unchanged_one():
    store = SnapshotStore()
    store.publish(chips("OK"))
    seen = []

    async def preparer(snapshot: Snapshot) -> None:
        seen.append((snapshot.get(DEVICES).chips[0].health, store.sampled.get(DEVICES).chips[0].health))

    store.prepare_with(preparer)
    await store.publish_prepared(lambda: chips("OK"))  # equal parts: nothing to prepare
    assert seen == []
    await store.publish_prepared(lambda: chips("Warning"))
    assert seen == [("Warning", "OK")] and store.sampled.get(DEVICES).chips[0].health == "Warning"


async def test_a_publish_during_preparation_is_not_undone():
    store = SnapshotStore()
    store.publish(chips("OK"))
    latest = {"health": "Warning"}
    preparing, go = asyncio.Event(), asyncio.Event()

    async def preparer(snapshot: Snapshot) -> None:
        preparing.set()
        await go.wait()

    store.prepare_with(preparer)
    publishing = asyncio.create_task(store.publish_prepared(lambda: chips(latest["health"])))
    await preparing.wait()
    latest["health"] = "Alarm"
    store.publish(chips("Alarm"))  # e.g. a posted profile, published at once
    go.set()
    await publishing
    assert store.sampled.get(DEVICES).chips[0].health == "Alarm"  # built again from the latest, not the older one


async def test_a_failing_preparer_still_publishes_and_logs(caplog):
    store = SnapshotStore()
    store.publish(chips("OK"))

    async def preparer(snapshot: Snapshot) -> None:
        raise RuntimeError("encoder bug")

    stop = store.prepare_with(preparer)
    with caplog.at_level(logging.ERROR, logger="exporter"):
        await store.publish_prepared(lambda: chips("Warning"))
    assert store.sampled.get(DEVICES).chips[0].health == "Warning"
    assert "preparing the new snapshot's encodings failed" in caplog.text and "encoder bug" in caplog.text
    stop()
    caplog.clear()
    await store.publish_prepared(lambda: chips("Alarm"))  # no preparer any more
    assert store.sampled.get(DEVICES).chips[0].health == "Alarm" and caplog.text == ""
