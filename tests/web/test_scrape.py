"""GET /metrics: format negotiation that never fails, no versions in `Server`, and the bodies of
the publisher's (snapshot, bodies) pair: made off the event loop, ahead for the variants scraped
lately, gzip kept for the parts that did not change."""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import threading
from collections.abc import Iterator

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.openmetrics.exposition import (
    generate_latest as generate_openmetrics,
)

from exporter.core.exposed import Variant
from exporter.core.snapshot import Snapshot
from exporter.node import gzip_parts
from exporter.node.exposition import Exposition, Rendering
from exporter.node.publisher import Publisher
from exporter.npusmi.collector import ChipsCollector
from exporter.npusmi.part import DEVICES, ChipSample, DevicesPart
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


def app_for(publisher: Publisher):
    return create_app(publisher, lambda: True)


def publisher_of(collector=None) -> Publisher:
    publisher = Publisher(Exposition([Rendering(collector or ChipsCollector(), "devices")]))
    publisher.publish(SNAPSHOT)  # nothing scraped yet: swapped in at once, no body made
    assert publisher.served.snapshot == SNAPSHOT and not publisher.served.bodies
    return publisher


@pytest.mark.parametrize(
    "accept", ["application/openmetrics-text; version=abc", "application/openmetrics-text; version=1.0.0.0.0; q=x", "a" * 4000]
)
async def test_a_malformed_accept_header_gets_the_text_format(aiohttp_client, accept):
    client = await aiohttp_client(app_for(publisher_of()))
    resp = await client.get("/metrics", headers={"Accept": accept})
    assert resp.status == 200 and resp.headers["Content-Type"] == "text/plain; version=0.0.4; charset=utf-8"
    assert "npu_up" in await resp.text()


async def test_the_server_header_carries_no_version(aiohttp_client):
    client = await aiohttp_client(app_for(publisher_of()))
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
    client = await aiohttp_client(app_for(publisher_of(collector)))
    scrapes = [asyncio.create_task(client.get("/metrics")) for _ in range(3)]
    await until(lambda: collector.threads, "the encoder thread inside render")
    health = await client.get("/healthz")  # answered while a scrape's encode is blocked
    assert health.status == 200 and not any(task.done() for task in scrapes)
    collector.go.set()
    bodies = [await (await task).text() for task in scrapes]
    assert all("npu_up" in body for body in bodies)
    assert collector.threads == ["metrics-encoder_0"]  # one encode for three scrapes, in the encoder thread


def chips_of(*npus: int, health: str = "OK") -> DevicesPart:
    return DevicesPart(
        chips=tuple(ChipSample(npu=n, chip=0, device=n, up=True, model="910B3", health=health) for n in npus), chips_seen=len(npus)
    )


async def test_gzip_is_not_redone_for_an_unchanged_body_and_only_the_changed_part_is_compressed(aiohttp_client, monkeypatch):
    compressed = []
    real = gzip_parts.deflate_chunk
    monkeypatch.setattr(gzip_parts, "deflate_chunk", lambda data, level: compressed.append(data) or real(data, level))
    steady = chips_of(7)
    exposition = Exposition([Rendering(ChipsCollector(), "devices"), Rendering(ChipsCollector(), "steady")])
    publisher = Publisher(exposition, {"steady": lambda: steady})
    publisher.publish(SNAPSHOT)
    client = await aiohttp_client(app_for(publisher))

    async def scrape() -> bytes:
        resp = await client.get("/metrics", headers={"Accept-Encoding": "gzip"}, auto_decompress=False)
        assert resp.headers["Content-Encoding"] == "gzip"
        return gzip.decompress(await resp.read())

    bodies = [await scrape() for _ in range(4)]
    assert len(compressed) == 2 and len(set(bodies)) == 1  # each part once, then the pair's body
    assert bodies[0] == generate_latest(registry_of(exposition))
    publisher.publish(Snapshot.of(True, {"devices": chips_of(1)}))
    await publisher.swap()  # scraped since the last pair: made ahead, gzip included
    assert len(compressed) == 3 and b'npu="1"' in compressed[-1]  # only the part that changed
    body = await scrape()
    assert b'npu="1"' in body and b'npu="7"' in body and body == generate_latest(registry_of(exposition))
    assert len(compressed) == 3


def warning_chip() -> Snapshot:
    return Snapshot.of(True, {"devices": chips_of(0, health="Warning")})


async def test_a_sampler_run_is_swapped_in_once_encoded_and_scrapes_meanwhile_get_the_body_before_it(aiohttp_client):
    collector = BlockingChips()
    publisher = publisher_of(collector)
    client = await aiohttp_client(app_for(publisher))
    collector.go.set()
    before = await (await client.get("/metrics")).text()  # the text format is now wanted
    collector.go.clear()
    publisher.publish(warning_chip())  # returns at once: the encoder's turn
    swapping = asyncio.create_task(publisher.swap())
    await until(lambda: len(collector.threads) == 2, "the encoder inside the new snapshot's render")
    during = await client.get("/metrics")  # answered while that encode is blocked
    assert during.status == 200 and await during.text() == before and not swapping.done()
    assert publisher.served.snapshot == SNAPSHOT
    collector.go.set()
    await swapping
    encodes = publisher.exposition.encodes
    after = await (await client.get("/metrics")).text()
    assert publisher.exposition.encodes == encodes  # made ahead: the scrape encoded nothing
    assert collector.threads == ["metrics-encoder_0"] * 2  # both encodes in the encoder thread
    assert 'state="Warning"} 1.0' in after and after == generate_latest(registry_of(publisher.exposition)).decode()


async def test_a_body_made_ahead_is_gzipped_before_it_is_swapped_in(aiohttp_client):
    publisher = publisher_of()
    client = await aiohttp_client(app_for(publisher))
    await client.get("/metrics", headers={"Accept": "application/openmetrics-text", "Accept-Encoding": "gzip"})
    publisher.publish(warning_chip())
    await publisher.swap()
    made = publisher.served.bodies[Variant(openmetrics=True, gzip=True)]
    assert b'state="Warning"} 1.0' in gzip.decompress(made)  # made before it was swapped in
    resp = await client.get(
        "/metrics", headers={"Accept": "application/openmetrics-text", "Accept-Encoding": "gzip"}, auto_decompress=False
    )
    assert await resp.read() is not None and gzip.decompress(made) == generate_openmetrics(registry_of(publisher.exposition))


def registry_of(exposition: Exposition) -> CollectorRegistry:
    registry = CollectorRegistry()
    registry.register(exposition)
    return registry


async def test_changes_faster_than_scrapes_are_encoded_ahead_once_per_scrape(aiohttp_client):
    publisher = publisher_of()
    client = await aiohttp_client(app_for(publisher))
    await client.get("/metrics")
    publisher.publish(warning_chip())
    await publisher.swap()
    made = publisher.exposition.encodes
    publisher.publish(Snapshot.of(True, {"devices": chips_of(0, health="Alarm")}))  # not scraped since: swapped in, nothing made
    assert publisher.exposition.encodes == made and not publisher.served.bodies
    body = await (await client.get("/metrics")).text()  # the scrape makes it, for the pair
    assert 'state="Alarm"} 1.0' in body and publisher.exposition.encodes == made + 1
    assert publisher.served.bodies  # kept in the pair (the test client asks for gzip)
    publisher.publish(warning_chip())  # scraped since: made ahead again
    await publisher.swap()
    assert publisher.exposition.encodes == made + 2 and publisher.served.bodies


async def test_the_publisher_loop_swaps_in_published_snapshots_and_live_parts_on_its_cadence():
    """No scrape reads a source: the loop reads the live parts every live_interval, and a part
    that changed is swapped in with the bodies of the variants scraped since."""
    live = {"steady": chips_of(7)}
    exposition = Exposition([Rendering(ChipsCollector(), "devices"), Rendering(ChipsCollector(), "steady")])
    publisher = Publisher(exposition, {"steady": lambda: live["steady"]}, live_interval=0.05)
    publisher.publish(SNAPSHOT)
    await publisher.body(Variant())  # the text format is now wanted
    running = asyncio.create_task(publisher.run())
    try:
        live["steady"] = chips_of(8)
        await until(lambda: publisher.served.snapshot.parts.get("steady") is live["steady"], "the live part swapped in")
        assert b'npu="8"' in publisher.served.bodies[Variant()]  # made ahead: it was scraped since
        publisher.publish(warning_chip())
        await until(lambda: publisher.served.snapshot.get(DEVICES).chips[0].health == "Warning", "the published snapshot swapped in")
    finally:
        running.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await running
