"""The aiohttp app: content negotiation, gzip, health and readiness, staleness."""

from __future__ import annotations

import gzip
import time

from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from exporter.collectors.devices import DeviceCollector
from exporter.collectors.self import SelfCollector
from exporter.sampler import SnapshotStore
from exporter.server import create_app
from exporter.snapshot import ChipSample, DevicesPart, ProcessSample, Snapshot, SourceStatus


def chip(npu: int, observed_at: float, **values) -> ChipSample:
    return ChipSample(npu=npu, chip=0, device=npu, observed_at=observed_at, up=True, model="910B3", health="OK", **values)


def make_app(snapshot: Snapshot, max_age: float = 60.0):
    store = SnapshotStore()
    store.current = snapshot
    registry = CollectorRegistry()
    registry.register(DeviceCollector(store, max_age))
    registry.register(SelfCollector(store, max_age))
    return create_app(registry, store), store


def families(text: str) -> dict:
    return {f.name: f for f in text_string_to_metric_families(text)}


async def test_text_format_by_default(aiohttp_client):
    now = time.monotonic()  # observed_at runs on the monotonic clock
    app, _ = make_app(Snapshot(now, DevicesPart(chips=(chip(0, now, aicore_utilization_ratio=0.91),), chips_seen=1), ready=True))
    client = await aiohttp_client(app)
    resp = await client.get("/metrics")
    assert resp.status == 200
    assert resp.headers["Content-Type"].startswith("text/plain; version=0.0.4")
    text = await resp.text()
    assert 'npu_aicore_utilization_ratio{chip="0",device="0",npu="0"} 0.91' in text
    assert "# EOF" not in text


async def test_openmetrics_when_asked(aiohttp_client):
    now = time.monotonic()  # observed_at runs on the monotonic clock
    app, _ = make_app(Snapshot(now, DevicesPart(chips=(chip(0, now, power_watts=99.5),), chips_seen=1), ready=True))
    client = await aiohttp_client(app)
    resp = await client.get("/metrics", headers={"Accept": "application/openmetrics-text; version=1.0.0"})
    assert resp.headers["Content-Type"].startswith("application/openmetrics-text")
    text = await resp.text()
    assert text.rstrip().endswith("# EOF")
    assert 'npu_power_watts{chip="0",device="0",npu="0"} 99.5' in text


async def test_gzip_when_asked(aiohttp_client):
    now = time.monotonic()  # observed_at runs on the monotonic clock
    app, _ = make_app(Snapshot(now, DevicesPart(chips=(chip(0, now),), chips_seen=1), ready=True))
    client = await aiohttp_client(app)
    resp = await client.get("/metrics", headers={"Accept-Encoding": "gzip"}, auto_decompress=False)
    assert resp.headers["Content-Encoding"] == "gzip"
    assert b"npu_up" in gzip.decompress(await resp.read())


async def test_health_readiness_and_landing(aiohttp_client):
    app, store = make_app(Snapshot(0.0))
    client = await aiohttp_client(app)
    assert (await client.get("/healthz")).status == 200
    assert (await client.get("/readyz")).status == 503
    store.current = Snapshot(time.time(), ready=True)
    assert (await client.get("/readyz")).status == 200
    landing = await client.get("/")
    assert landing.status == 200 and "/metrics" in await landing.text()


async def test_stale_chips_are_withheld_not_served_as_fresh(aiohttp_client):
    now = time.monotonic()  # observed_at runs on the monotonic clock
    fresh, stale = chip(0, now, aicore_utilization_ratio=0.5), chip(1, now - 600, aicore_utilization_ratio=0.9)
    procs = (ProcessSample(0, 0, 0, 42, "python", 1024.0),)
    snapshot = Snapshot(now, DevicesPart(chips=(fresh, stale), processes=procs, processes_observed_at=now - 600, chips_seen=2), ready=True)
    app, _ = make_app(snapshot, max_age=60)
    client = await aiohttp_client(app)
    found = families(await (await client.get("/metrics")).text())
    util = {s.labels["npu"]: s.value for s in found["npu_aicore_utilization_ratio"].samples}
    assert util == {"0": 0.5}
    up = {s.labels["npu"]: s.value for s in found["npu_up"].samples}
    assert up == {"0": 1.0, "1": 0.0}
    assert found["npu_process_memory_bytes"].samples == []  # the process table is stale too
    assert found["cann_exporter_stale_chips"].samples[0].value == 1


async def test_absent_values_are_absent_not_zero(aiohttp_client):
    now = time.monotonic()  # observed_at runs on the monotonic clock
    app, _ = make_app(Snapshot(now, DevicesPart(chips=(chip(0, now, aicore_utilization_ratio=0.0),), chips_seen=1), ready=True))
    client = await aiohttp_client(app)
    found = families(await (await client.get("/metrics")).text())
    assert [s.value for s in found["npu_aicore_utilization_ratio"].samples] == [0.0]  # a real zero
    assert found["npu_power_watts"].samples == []                                   # never read


async def test_source_self_metrics(aiohttp_client):
    status = SourceStatus("npu_smi_info", runs=3, success=False, duration_seconds=0.25,
                          last_success_timestamp=1700000000.0, errors={"timeout": 2})
    app, _ = make_app(Snapshot(time.time(), sources=(status,), ready=True))
    client = await aiohttp_client(app)
    text = await (await client.get("/metrics")).text()
    assert 'cann_exporter_source_errors_total{reason="timeout",source="npu_smi_info"} 2.0' in text
    assert 'cann_exporter_source_success{source="npu_smi_info"} 0.0' in text
    assert 'cann_exporter_source_duration_seconds{source="npu_smi_info"} 0.25' in text
    assert 'cann_exporter_source_last_success_timestamp_seconds{source="npu_smi_info"} 1.7e+09' in text
    assert 'cann_exporter_source_runs_total{source="npu_smi_info"} 3.0' in text
