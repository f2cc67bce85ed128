"""Render once, serve bytes: a part is encoded when it changes, not when it is scraped, the
served bytes are exactly what a fresh render of the same snapshot gives, in both formats, and
the live parts are read on the publisher's cadence, never by a scrape."""

from __future__ import annotations

import asyncio
import gzip
import json
import time
from dataclasses import replace

import pytest
from prometheus_client import generate_latest
from prometheus_client.openmetrics.exposition import (
    generate_latest as generate_openmetrics,
)

from exporter.app.settings import Settings, build_settings
from exporter.core.exposed import Variant
from exporter.core.selfmetrics import STATUS, StatusPart
from exporter.core.snapshot import Snapshot
from exporter.jobs.collector import JobCollector
from exporter.jobs.store import JOBS, IngestStore
from exporter.jobs.validate import IngestLimits, parse_batch
from exporter.node.assembly import Node, assemble
from exporter.node.exposition import Exposition, Rendering
from exporter.node.gzip_parts import PartsGzip
from exporter.node.publisher import GZIP_LEVEL, Publisher
from tests.support.apps import ingest_app, settled


def batch(doc: dict):
    return parse_batch(json.dumps(doc).encode(), IngestLimits(), time.time())


@pytest.fixture(scope="module")
def sampled() -> tuple[Settings, Snapshot]:
    """One sampled round of a simulated A3 node: chips, processes, the simulated network, the
    exporter itself. About 290 simulated calls, each a Python process: taken once for the module."""
    settings = build_settings(flags={"simulator.scenario": "healthy", "simulator.model": "a3", "podresources.enabled": "false"})
    node = assemble(settings, ingest=False)
    asyncio.run(node.sampler.run_once())
    return settings, node.publisher.sampled


@pytest.fixture
def node(sampled: tuple[Settings, Snapshot]) -> Node:
    """A fresh node (nothing encoded yet) that was handed the sampled round, as its sampler hands it."""
    settings, snapshot = sampled
    fresh = assemble(settings, ingest=False)
    fresh.publisher.publish(snapshot)
    return fresh


async def test_served_bytes_equal_a_fresh_render_in_every_format(node: Node):
    for openmetrics, fresh in ((False, generate_latest), (True, generate_openmetrics)):
        served = await node.publisher.body(Variant(openmetrics))
        assert served == fresh(node.registry)
        assert await node.publisher.body(Variant(openmetrics)) is served  # kept in the pair
    assert b"npu_network_" in served and served.endswith(b"# EOF\n") and served.count(b"# EOF") == 1
    assert gzip.decompress(await node.publisher.body(Variant(True, gzip=True))) == served


def test_gzip_part_by_part_of_a_real_node_is_its_body_at_about_the_size_of_a_whole_gzip(node: Node):
    for openmetrics in (False, True):
        encoded = node.exposition.encode(node.publisher.current, openmetrics)
        assert b"".join(encoded.pieces) == encoded.body
        compressed = PartsGzip(GZIP_LEVEL).gzip(encoded.pieces, encoded.body)
        assert gzip.decompress(compressed) == encoded.body
        assert len(compressed) <= 1.1 * len(gzip.compress(encoded.body, GZIP_LEVEL))


def test_an_unchanged_part_is_not_encoded_again(node: Node):
    exposition, publisher = node.exposition, node.publisher
    parts = sum(1 for r in exposition.renderings if r.part_in(publisher.current) is not None)
    first = exposition.encode(publisher.served.snapshot, False)
    assert exposition.encodes == parts
    for _ in range(5):
        assert exposition.encode(publisher.served.snapshot, False) is first
    assert exposition.encodes == parts
    # A new snapshot whose parts are equal to the old ones keeps them: still nothing to encode.
    publisher.publish(replace(publisher.sampled, parts=dict(publisher.sampled.parts)))
    assert exposition.encode(publisher.served.snapshot, False) is first and exposition.encodes == parts
    # One part changes: only that part is encoded again.
    status = publisher.sampled.get(STATUS)
    publisher.publish(publisher.sampled.replaced({STATUS.name: StatusPart(status.sources, status.simulated, status.stale_chips + 1)}))
    assert exposition.encode(publisher.served.snapshot, False) is not first
    assert exposition.encodes == parts + 1


def jobs_publisher(ingest: IngestStore) -> Publisher:
    return Publisher(Exposition([Rendering(JobCollector(), JOBS.name)]), {JOBS.name: ingest.part})


async def test_a_scrape_never_reads_the_live_parts_and_a_burst_of_steps_is_one_part_per_swap():
    ingest = IngestStore()
    publisher = jobs_publisher(ingest)
    step = {"job_name": "bert", "rank": 0, "steps": [{"duration": 0.5}]}
    ingest.accept(batch(step))
    await publisher.swap()
    first = publisher.served.snapshot.get(JOBS)
    body = await publisher.body(Variant())
    assert first is not None and first.counters.steps == 1
    for _ in range(10):  # a burst of steps between two swaps: scrapes serve the pair's body
        ingest.accept(batch(step))
        assert await publisher.body(Variant()) is body
    await publisher.swap()
    later = publisher.served.snapshot.get(JOBS)
    assert later is not first and later.counters.steps == 11
    assert b"npu_job_iterations_total" in publisher.served.bodies[Variant()]  # scraped since: made ahead
    await publisher.swap()
    assert publisher.served.snapshot.get(JOBS) is later  # nothing new: the same pair
    assert ingest.part() is ingest.part() is later  # an idle store copies nothing


async def test_an_ingest_app_serves_encoded_parts_equal_to_a_fresh_render(aiohttp_client):
    ingest = IngestStore()
    ingest.accept(batch({"job_name": "bert", "rank": 0, "steps": [{"duration": 0.5, "phases": {"h2d": 0.1}}]}))
    client = await aiohttp_client(ingest_app(ingest))
    await settled(client.app)
    plain = await client.get("/metrics", headers={"Accept-Encoding": "gzip"}, auto_decompress=False)
    body = gzip.decompress(await plain.read())
    assert b'npu_job_iterations_total{job_name="bert",rank="0"} 1.0' in body
    again = await client.get("/metrics", headers={"Accept-Encoding": "gzip"}, auto_decompress=False)
    assert gzip.decompress(await again.read()) == body
