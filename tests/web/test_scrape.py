"""GET /metrics: format negotiation that never fails, no versions in `Server`, encoding and
gzip off the event loop, gzip kept for an unchanged body."""

from __future__ import annotations

import asyncio
import gzip
import threading
from collections.abc import Iterator

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.openmetrics.exposition import (
    generate_latest as generate_openmetrics,
)

from exporter.core.snapshot import Snapshot
from exporter.node.exposition import Exposition, Rendering
from exporter.node.snapshot import SnapshotStore
from exporter.npusmi.collector import ChipsCollector
from exporter.npusmi.part import ChipSample, DevicesPart
from exporter.web import gzip_parts
from exporter.web.app import create_app
from exporter.web.scrape import accepts_gzip, wants_openmetrics
from tests.support.rawhttp import until

SNAPSHOT = Snapshot.of(
    True, {"devices": DevicesPart(chips=(ChipSample(npu=0, chip=0, device=0, up=True, model="910B3", health="OK"),), chips_seen=1)}
)


@pytest.mark.parametrize(
    ("accept", "openmetrics"),
    [
        ("", False),
        ("text/plain;version=0.0.4;q=0.3,*/*;q=0.2", False),
        (
            "application/openmetrics-text;version=1.0.0;escaping=allow-utf-8;q=0.6,application/openmetrics-text;version=0.0.1;q=0.5,"
            "text/plain;version=1.0.0;escaping=allow-utf-8;q=0.4,text/plain;version=0.0.4;q=0.3,*/*;q=0.2",
            True,
        ),  # Prometheus 3
        ("application/openmetrics-text", True),
        ("application/openmetrics-text; version=abc", False),  # was a 500 with a traceback
        ("application/openmetrics-text; version=", False),
        ("application/openmetrics-text; version=2.0.0, text/plain", False),
        (";;;,,,=", False),
        ("application/openmetrics-text; version", False),  # malformed: the text format
    ],
)
def test_negotiation(accept, openmetrics):
    assert wants_openmetrics(accept) is openmetrics


def test_gzip_negotiation():
    assert accepts_gzip("gzip") and accepts_gzip("deflate, gzip;q=0.5") and accepts_gzip("GZIP")
    assert not accepts_gzip("") and not accepts_gzip("gzip;q=0") and not accepts_gzip("br, identity")


def app_for(exposition: Exposition):
    return create_app(exposition, lambda: True)


def exposition_of(collector=None) -> Exposition:
    store = SnapshotStore()
    store.publish(SNAPSHOT)
    return Exposition(store, [Rendering(collector or ChipsCollector(), "devices")])


@pytest.mark.parametrize(
    "accept", ["application/openmetrics-text; version=abc", "application/openmetrics-text; version=1.0.0.0.0; q=x", "a" * 4000]
)
async def test_a_malformed_accept_header_gets_the_text_format(aiohttp_client, accept):
    client = await aiohttp_client(app_for(exposition_of()))
    resp = await client.get("/metrics", headers={"Accept": accept})
    assert resp.status == 200 and resp.headers["Content-Type"] == "text/plain; version=0.0.4; charset=utf-8"
    assert "npu_up" in await resp.text()


async def test_the_server_header_carries_no_version(aiohttp_client):
    client = await aiohttp_client(app_for(exposition_of()))
    for path in ("/metrics", "/healthz", "/", "/missing"):
        resp = await client.get(path)
        assert resp.headers["Server"] == "cann-exporter", path


class BlockingChips(ChipsCollector):
    """Chips whose render waits for a go-ahead, noting the thread it ran on."""

    def __init__(self) -> None:
        super().__init__()
        self.go = threading.Event()
        self.threads: list[str] = []

    def render(self, part: DevicesPart) -> Iterator:
        self.threads.append(threading.current_thread().name)
        assert self.go.wait(30)
        yield from super().render(part)


async def test_encoding_runs_off_the_event_loop(aiohttp_client):
    collector = BlockingChips()
    client = await aiohttp_client(app_for(exposition_of(collector)))
    scrapes = [asyncio.create_task(client.get("/metrics")) for _ in range(3)]
    for _ in range(300):  # bounded: until the encoder thread is inside render
        if collector.threads:
            break
        await asyncio.sleep(0.01)
    health = await client.get("/healthz")  # answered while a scrape's encode is blocked
    assert health.status == 200 and not any(task.done() for task in scrapes)
    collector.go.set()
    bodies = [await (await task).text() for task in scrapes]
    assert all("npu_up" in body for body in bodies)
    assert collector.threads == ["metrics-encoder_0"]  # one encode for three scrapes, in the encoder thread


async def test_gzip_is_not_redone_for_an_unchanged_body_and_only_the_changed_part_is_compressed(aiohttp_client, monkeypatch):
    compressed = []
    real = gzip_parts.deflate_chunk
    monkeypatch.setattr(gzip_parts, "deflate_chunk", lambda data, level: compressed.append(data) or real(data, level))
    store = SnapshotStore({"steady": lambda: steady})
    store.publish(SNAPSHOT)
    steady = DevicesPart(chips=(ChipSample(npu=7, chip=0, device=7, up=True, model="910B3", health="OK"),), chips_seen=1)
    exposition = Exposition(store, [Rendering(ChipsCollector(), "devices"), Rendering(ChipsCollector(), "steady")])
    client = await aiohttp_client(app_for(exposition))

    async def scrape() -> bytes:
        resp = await client.get("/metrics", headers={"Accept-Encoding": "gzip"}, auto_decompress=False)
        assert resp.headers["Content-Encoding"] == "gzip"
        return gzip.decompress(await resp.read())

    bodies = [await scrape() for _ in range(4)]
    assert len(compressed) == 2 and len(set(bodies)) == 1  # each part once, then the kept gzip
    assert bodies[0] == exposition.body(False)
    store.publish(
        Snapshot.of(
            True, {"devices": DevicesPart(chips=(ChipSample(npu=1, chip=0, device=1, up=True, model="910B3", health="OK"),), chips_seen=1)}
        )
    )
    body = await scrape()
    assert b'npu="1"' in body and b'npu="7"' in body and body == exposition.body(False)
    assert len(compressed) == 3 and b'npu="1"' in compressed[-1]  # only the part that changed


def warning_chip() -> Snapshot:
    return Snapshot.of(
        True, {"devices": DevicesPart(chips=(ChipSample(npu=0, chip=0, device=0, up=True, model="910B3", health="Warning"),), chips_seen=1)}
    )


async def test_a_sampler_run_is_published_once_encoded_and_scrapes_meanwhile_get_the_body_before_it(aiohttp_client):
    collector = BlockingChips()
    exposition = exposition_of(collector)
    client = await aiohttp_client(app_for(exposition))
    collector.go.set()
    before = await (await client.get("/metrics")).text()  # the text format is now wanted
    collector.go.clear()
    publishing = asyncio.create_task(exposition.store.publish_prepared(warning_chip))
    await until(lambda: len(collector.threads) == 2, "the encoder inside the new snapshot's render")
    during = await client.get("/metrics")  # answered while that encode is blocked
    assert during.status == 200 and await during.text() == before and not publishing.done()
    collector.go.set()
    await publishing
    encodes = exposition.encodes
    after = await (await client.get("/metrics")).text()
    assert exposition.encodes == encodes  # prepared: the scrape encoded nothing
    assert collector.threads == ["metrics-encoder_0"] * 2  # both encodes in the encoder thread
    assert 'state="Warning"} 1.0' in after and after == generate_latest(registry_of(exposition)).decode()


async def test_a_prepared_body_is_gzipped_before_it_is_published(aiohttp_client):
    exposition = exposition_of()
    client = await aiohttp_client(app_for(exposition))
    await client.get("/metrics", headers={"Accept": "application/openmetrics-text", "Accept-Encoding": "gzip"})
    await exposition.store.publish_prepared(warning_chip)
    ready = exposition.ready_body(True)
    assert ready is not None and b'state="Warning"} 1.0' in ready  # encoded before it was published
    resp = await client.get(
        "/metrics", headers={"Accept": "application/openmetrics-text", "Accept-Encoding": "gzip"}, auto_decompress=False
    )
    assert gzip.decompress(await resp.read()) == ready == generate_openmetrics(registry_of(exposition))


def registry_of(exposition: Exposition) -> CollectorRegistry:
    registry = CollectorRegistry()
    registry.register(exposition)
    return registry


async def test_changes_faster_than_scrapes_are_encoded_ahead_once_per_scrape(aiohttp_client):
    exposition = exposition_of()
    client = await aiohttp_client(app_for(exposition))
    await client.get("/metrics")
    await exposition.store.publish_prepared(warning_chip)
    prepared = exposition.encodes
    alarm = Snapshot.of(
        True, {"devices": DevicesPart(chips=(ChipSample(npu=0, chip=0, device=0, up=True, model="910B3", health="Alarm"),), chips_seen=1)}
    )
    await exposition.store.publish_prepared(lambda: alarm)  # not scraped since the last one: not encoded ahead
    assert exposition.encodes == prepared and exposition.ready_body(False) is None
    body = await (await client.get("/metrics")).text()  # the scrape encodes it
    assert 'state="Alarm"} 1.0' in body and exposition.encodes == prepared + 1
    await exposition.store.publish_prepared(warning_chip)  # scraped since: encoded ahead again
    assert exposition.encodes == prepared + 2 and exposition.ready_body(False) is not None
