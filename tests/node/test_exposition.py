"""Render once, serve bytes: a part is encoded when it changes, not when it is scraped, and the
served bytes are exactly what a fresh render of the same snapshot gives, in both formats."""

from __future__ import annotations

import asyncio
import gzip
import json
import time
from dataclasses import replace

from prometheus_client import generate_latest
from prometheus_client.openmetrics.exposition import (
    generate_latest as generate_openmetrics,
)

from exporter.core.selfmetrics import STATUS, StatusPart
from exporter.jobs.store import JOBS, IngestStore
from exporter.jobs.validate import IngestLimits, parse_batch
from exporter.node.assembly import assemble
from exporter.node.settings import build_settings
from exporter.node.snapshot import SnapshotStore
from exporter.web.gzip_parts import PartsGzip
from exporter.web.scrape import GZIP_LEVEL
from tests.support.apps import ingest_app


def batch(doc: dict):
    return parse_batch(json.dumps(doc).encode(), IngestLimits(), time.time())


def simulated_node(model: str = "a3"):
    settings = build_settings(flags={"simulator.scenario": "healthy", "simulator.model": model, "podresources.enabled": "false"})
    node = assemble(settings, ingest=False)
    asyncio.run(node.sampler.run_once())
    return node


def test_served_bytes_equal_a_fresh_render_in_every_format():
    node = simulated_node()  # chips, processes, the simulated network, the exporter itself
    for openmetrics, fresh in ((False, generate_latest), (True, generate_openmetrics)):
        served = node.exposition.body(openmetrics)
        assert served == fresh(node.registry)
        assert node.exposition.ready_body(openmetrics) is served  # the same object until a part changes
    assert b"npu_network_" in served and served.endswith(b"# EOF\n") and served.count(b"# EOF") == 1


def test_gzip_part_by_part_of_a_real_node_is_its_body_at_about_the_size_of_a_whole_gzip():
    node = simulated_node()
    for openmetrics in (False, True):
        body = node.exposition.body(openmetrics)
        parts = node.exposition.parts_of(body)
        assert parts is not None and b"".join(parts) == body
        compressed = PartsGzip(GZIP_LEVEL).gzip(parts, body)
        assert gzip.decompress(compressed) == body
        assert len(compressed) <= 1.1 * len(gzip.compress(body, GZIP_LEVEL))
    assert node.exposition.parts_of(b"not a body of it") is None


def test_an_unchanged_part_is_not_encoded_again():
    node = simulated_node()
    exposition = node.exposition
    parts = sum(1 for r in exposition.renderings if r.part(node.store.current) is not None)
    exposition.body(False)
    assert exposition.encodes == parts
    for _ in range(5):
        assert exposition.ready_body(False) is not None and exposition.body(False)
    assert exposition.encodes == parts
    # A new snapshot whose parts are equal to the old ones keeps them: still nothing to encode.
    node.store.publish(replace(node.store.sampled))
    assert exposition.ready_body(False) is not None and exposition.encodes == parts
    # One part changes: only that part is encoded again.
    status = node.store.sampled.get(STATUS)
    node.store.publish(node.store.sampled.replaced({STATUS.name: StatusPart(status.sources, status.simulated, status.stale_chips + 1)}))
    assert exposition.ready_body(False) is None
    exposition.body(False)
    assert exposition.encodes == parts + 1


def test_a_store_that_is_cheap_to_read_is_fresh_at_every_read():
    ingest = IngestStore()
    now = [100.0]
    cheap = iter(range(0, 10**6))  # each read "costs" 1 µs: a pause of 50 µs, far below the cap
    store = SnapshotStore({"jobs": ingest.part}, live_interval=1.0, clock=lambda: now[0], cost_clock=lambda: next(cheap) * 1e-6)
    step = {"job_name": "bert", "rank": 0, "steps": [{"duration": 0.5}]}
    seen = []
    for _ in range(3):
        ingest.accept(batch(step))
        now[0] += 0.001
        seen.append(store.current.get(JOBS).counters.steps)
    assert seen == [1, 2, 3]


def test_training_steps_are_coalesced_into_one_part_per_interval():
    now = [100.0]
    ingest = IngestStore()
    costly = iter(range(0, 10**6, 1))  # every read of the parts "costs" 1 s: the pause is the cap
    store = SnapshotStore({"jobs": ingest.part}, live_interval=1.0, clock=lambda: now[0], cost_clock=lambda: float(next(costly)))
    step = {"job_name": "bert", "rank": 0, "steps": [{"duration": 0.5}]}
    ingest.accept(batch(step))
    first = store.current.get(JOBS)
    for _ in range(10):  # a burst of steps within the interval: the same part
        ingest.accept(batch(step))
        assert store.current.get(JOBS) is first
    now[0] += 1.0
    later = store.current.get(JOBS)
    assert later is not first and later.counters.steps == 11
    now[0] += 1.0
    assert store.current.get(JOBS) is later  # nothing new: equal, so still the same object
    assert ingest.part() is ingest.part() is later  # an idle store copies nothing
    ingest.reject("too_large")
    assert ingest.part() is not later


def test_the_encode_of_a_live_part_counts_in_the_pause():
    """Reading a large store is cheap next to encoding its thousands of series: what the encode
    cost pauses the next read too (the encoder holds the GIL the event loop needs)."""
    now = [100.0]
    ingest = IngestStore()
    cheap = iter(range(0, 10**6))  # reads "cost" 1 µs each
    store = SnapshotStore({"jobs": ingest.part}, live_interval=1.0, clock=lambda: now[0], cost_clock=lambda: next(cheap) * 1e-6)
    step = {"job_name": "bert", "rank": 0, "steps": [{"duration": 0.5}]}
    ingest.accept(batch(step))
    first = store.current.get(JOBS)
    store.charge(object(), 1.0)  # not a live part: no pause
    ingest.accept(batch(step))
    now[0] += 0.001
    second = store.current.get(JOBS)
    assert second is not first
    store.charge(second, 0.004)  # its encode took 4 ms: paused 50 x 4 ms = 0.2 s
    ingest.accept(batch(step))
    now[0] += 0.1
    assert store.current.get(JOBS) is second
    now[0] += 0.15
    assert store.current.get(JOBS).counters.steps == 3


async def test_an_ingest_app_serves_encoded_parts_equal_to_a_fresh_render(aiohttp_client):
    ingest = IngestStore()
    ingest.accept(batch({"job_name": "bert", "rank": 0, "steps": [{"duration": 0.5, "phases": {"h2d": 0.1}}]}))
    client = await aiohttp_client(ingest_app(ingest))
    plain = await client.get("/metrics", headers={"Accept-Encoding": "gzip"}, auto_decompress=False)
    body = gzip.decompress(await plain.read())
    assert b'npu_job_iterations_total{job_name="bert",rank="0"} 1.0' in body
    again = await client.get("/metrics", headers={"Accept-Encoding": "gzip"}, auto_decompress=False)
    assert gzip.decompress(await again.read()) == body
