"""POST /api/v1/steps through the aiohttp app: status codes, JSON errors, counters, isolation."""

from __future__ import annotations

import json
import time

import pytest
from prometheus_client.parser import text_string_to_metric_families

from exporter.jobs.store import IngestStore
from exporter.jobs.validate import IngestLimits
from tests.support.apps import ingest_app, settled

JSON = {"Content-Type": "application/json"}


def make_app(token: str | None = None, **limits):
    return ingest_app(IngestStore(limits=IngestLimits(**limits)), token)


def batch(job: str = "bert", rank: int = 0, n: int = 2, **extra) -> dict:
    steps = [{"duration": 0.5, "end": time.time(), "samples": 8, "phases": {"h2d": 0.1, "compute": 0.3}} for _ in range(n)]
    return {"job_name": job, "rank": rank, "world_size": 4, "device": "2", "framework": "pytorch", "pid": 99, "steps": steps, **extra}


async def metrics(client) -> dict:
    await settled(client.app)  # the live parts are read once a second; now, for the test
    text = await (await client.get("/metrics")).text()
    return {(x.name, frozenset(x.labels.items())): x.value for f in text_string_to_metric_families(text) for x in f.samples}


def get(found: dict, name: str, **labels: str) -> float | None:
    hits = [v for (n, ls), v in found.items() if n == name and set(labels.items()) <= ls]
    assert len(hits) <= 1
    return hits[0] if hits else None


async def post(client, doc=None, raw: bytes | None = None, headers=JSON):
    data = raw if raw is not None else json.dumps(doc).encode()
    return await client.post("/api/v1/steps", data=data, headers=headers)


async def test_accepts_a_batch_and_serves_job_metrics(aiohttp_client):
    client = await aiohttp_client(make_app())
    resp = await post(client, batch(n=3))
    assert resp.status == 200
    assert await resp.json() == {"accepted": 3}
    found = await metrics(client)
    assert get(found, "npu_job_iterations_total", job_name="bert", rank="0") == 3
    assert get(found, "npu_job_samples_total", job_name="bert", rank="0") == 24
    assert get(found, "npu_job_phase_seconds_total", phase="compute") == pytest.approx(0.9)
    assert get(found, "npu_job_info", device="2", world_size="4", framework="pytorch", pid="99") == 1
    assert get(found, "cann_exporter_ingest_steps_total") == 3


async def test_charset_in_content_type_is_fine(aiohttp_client):
    client = await aiohttp_client(make_app())
    resp = await post(client, batch(), headers={"Content-Type": "application/json; charset=utf-8"})
    assert resp.status == 200


BAD = [
    (b"{not json", 400, "malformed_json"),
    (json.dumps({**batch(), "rank": "zero"}).encode(), 400, "invalid"),
    (json.dumps(batch(steps=[{"duration": 0.1, "phases": {"forward": 0.1, "backward": 0.1}}])).encode(), 400, "out_of_range"),
    (json.dumps(batch(steps=[{"duration": -3}])).encode(), 400, "out_of_range"),
    (json.dumps(batch(steps=[{"duration": 10**7}])).encode(), 400, "out_of_range"),
    (json.dumps(batch(job="bad job name")).encode(), 400, "bad_label"),
    (json.dumps(batch(job="x" * 5000)).encode(), 400, "bad_label"),
    (b'{"job_name": "other", ' + json.dumps(batch()).encode()[1:], 400, "malformed_json"),  # job_name twice (issue 45)
]


@pytest.mark.parametrize("raw,status,reason", BAD)
async def test_bad_input_is_a_json_4xx_counted_by_reason_and_changes_nothing(aiohttp_client, raw, status, reason):
    client = await aiohttp_client(make_app())
    assert (await post(client, batch(n=1))).status == 200
    before = await metrics(client)

    resp = await post(client, raw=raw)
    assert resp.status == status
    assert resp.content_type == "application/json"
    answer = await resp.json()
    assert answer["reason"] == reason and answer["error"]

    after = await metrics(client)
    assert get(after, "cann_exporter_ingest_rejected_total", reason=reason) == 1
    job_series = lambda found: {k: v for k, v in found.items() if k[0].startswith("npu_job_")}  # noqa: E731
    assert job_series(after) == job_series(before)
    # and the endpoint keeps working
    assert (await post(client, batch(n=1))).status == 200


async def test_oversized_body_by_content_length_is_413(aiohttp_client):
    client = await aiohttp_client(make_app(max_body_bytes=2048))
    resp = await post(client, batch(n=200))
    assert resp.status == 413
    assert (await resp.json())["reason"] == "too_large"
    assert get(await metrics(client), "cann_exporter_ingest_rejected_total", reason="too_large") == 1


async def test_oversized_chunked_body_is_413(aiohttp_client):
    client = await aiohttp_client(make_app(max_body_bytes=2048))

    async def chunks():
        for _ in range(100):
            yield b" " * 1024

    resp = await client.post("/api/v1/steps", data=chunks(), headers=JSON)
    assert resp.status == 413
    assert (await resp.json())["reason"] == "too_large"


async def test_body_over_the_app_default_but_under_the_ingest_limit_is_read(aiohttp_client):
    client = await aiohttp_client(make_app(max_body_bytes=4 << 20))
    doc = batch(n=12_000)
    assert len(json.dumps(doc)) > 1 << 20
    resp = await post(client, doc)
    assert resp.status == 200 and (await resp.json()) == {"accepted": 12_000}


async def test_wrong_content_type_is_415(aiohttp_client):
    client = await aiohttp_client(make_app())
    resp = await post(client, batch(), headers={"Content-Type": "text/plain"})
    assert resp.status == 415
    assert (await resp.json())["reason"] == "content_type"


async def test_token_required_when_configured(aiohttp_client):
    client = await aiohttp_client(make_app(token="s3cret"))
    for headers in (JSON, {**JSON, "Authorization": "Bearer wrong"}, {**JSON, "Authorization": "Basic s3cret"}):
        resp = await post(client, batch(), headers=headers)
        assert resp.status == 401
        assert resp.headers["WWW-Authenticate"].startswith("Bearer")
        assert (await resp.json())["reason"] == "unauthorized"
    resp = await post(client, batch(), headers={**JSON, "Authorization": "Bearer s3cret"})
    assert resp.status == 200
    found = await metrics(client)
    assert get(found, "cann_exporter_ingest_rejected_total", reason="unauthorized") == 3
    assert get(found, "npu_job_iterations_total") == 2


async def test_cardinality_limits_are_429(aiohttp_client):
    client = await aiohttp_client(make_app(max_jobs=2, max_ranks=2))
    for job, rank in (("a", 0), ("a", 1), ("b", 0)):
        assert (await post(client, batch(job, rank))).status == 200
    resp = await post(client, batch("c", 0))
    assert resp.status == 429 and (await resp.json())["reason"] == "too_many_jobs"
    resp = await post(client, batch("a", 2))
    assert resp.status == 429 and (await resp.json())["reason"] == "too_many_ranks"
    found = await metrics(client)
    assert get(found, "cann_exporter_ingest_ranks") == 3
    assert get(found, "npu_job_iterations_total", job_name="c") is None


async def test_get_is_not_allowed(aiohttp_client):
    client = await aiohttp_client(make_app())
    assert (await client.get("/api/v1/steps")).status == 405


async def test_ingest_disabled_has_no_route(aiohttp_client):
    client = await aiohttp_client(ingest_app(None))
    assert (await post(client, batch())).status == 404


async def test_openapi_document_is_served(aiohttp_client):
    client = await aiohttp_client(make_app())
    resp = await client.get("/api/v1/openapi.yaml")
    assert resp.status == 200
    assert "/api/v1/steps" in await resp.text()
