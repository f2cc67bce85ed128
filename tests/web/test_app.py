"""The aiohttp app: content negotiation, gzip, health and readiness, the landing page."""

from __future__ import annotations

import gzip

from exporter.core.snapshot import Snapshot
from exporter.node.exposition import Exposition, Rendering
from exporter.node.publisher import Publisher
from exporter.npusmi.collector import ChipsCollector
from exporter.npusmi.part import ChipSample, DevicesPart
from exporter.web.app import create_app


def chip(npu: int, **values) -> ChipSample:
    return ChipSample(npu=npu, chip=0, device=npu, up=True, model="910B3", health="OK", **values)


def make_app(snapshot: Snapshot):
    publisher = Publisher(Exposition([Rendering(ChipsCollector(), "devices")]))
    publisher.publish(snapshot)
    return create_app(publisher, lambda: publisher.served.snapshot.ready, background=[publisher.run]), publisher


async def test_text_format_by_default(aiohttp_client):
    app, _ = make_app(Snapshot.of(True, {"devices": DevicesPart(chips=(chip(0, aicore_utilization_ratio=0.91),), chips_seen=1)}))
    client = await aiohttp_client(app)
    resp = await client.get("/metrics")
    assert resp.status == 200
    assert resp.headers["Content-Type"].startswith("text/plain; version=0.0.4")
    text = await resp.text()
    assert 'npu_aicore_utilization_ratio{chip="0",device="0",npu="0"} 0.91' in text
    assert "# EOF" not in text


async def test_openmetrics_when_asked(aiohttp_client):
    app, _ = make_app(Snapshot.of(True, {"devices": DevicesPart(chips=(chip(0, power_watts=99.5),), chips_seen=1)}))
    client = await aiohttp_client(app)
    resp = await client.get("/metrics", headers={"Accept": "application/openmetrics-text; version=1.0.0"})
    assert resp.headers["Content-Type"].startswith("application/openmetrics-text")
    text = await resp.text()
    assert text.rstrip().endswith("# EOF")
    assert 'npu_power_watts{chip="0",device="0",npu="0"} 99.5' in text


async def test_gzip_when_asked(aiohttp_client):
    app, _ = make_app(Snapshot.of(True, {"devices": DevicesPart(chips=(chip(0),), chips_seen=1)}))
    client = await aiohttp_client(app)
    resp = await client.get("/metrics", headers={"Accept-Encoding": "gzip"}, auto_decompress=False)
    assert resp.headers["Content-Encoding"] == "gzip"
    assert b"npu_up" in gzip.decompress(await resp.read())


async def test_health_readiness_and_landing(aiohttp_client):
    app, publisher = make_app(Snapshot())
    client = await aiohttp_client(app)
    assert (await client.get("/healthz")).status == 200
    assert (await client.get("/readyz")).status == 503
    publisher.publish(Snapshot.of(True, {}))
    await publisher.swap()
    assert (await client.get("/readyz")).status == 200
    landing = await client.get("/")
    assert landing.status == 200 and "/metrics" in await landing.text()
