"""POST /api/v1/profiles through the aiohttp app: a window's summary becomes npu_profile_* series;
bad summaries get a 4xx with a reason, are counted and disturb nothing else."""

from __future__ import annotations

import json
import time

import pytest
from prometheus_client.parser import text_string_to_metric_families

from exporter.jobs.store import IngestStore
from exporter.jobs.validate import IngestLimits
from exporter.profiles.posted import PostedLimits, PostedProfiles
from tests.support.apps import ingest_app, settled

JSON = {"Content-Type": "application/json"}


def make_app(token: str | None = None, posted: PostedLimits = PostedLimits(), **limits):
    return ingest_app(IngestStore(limits=IngestLimits(**limits)), token, posted=PostedProfiles(posted))


def summary(job: str = "llama", rank: int = 0, **extra) -> dict:
    return {
        "job_name": job,
        "rank": rank,
        "world_size": 8,
        "framework": "pytorch",
        "pid": 7,
        "backend": "npu",
        "finished_at": time.time(),
        "steps": 5,
        "step_duration_seconds": 0.2,
        "compute_ratio": 0.8,
        "idle_ratio": 0.15,
        "memcpy_ratio": 0.05,
        "memcpy_kind_ratios": {"h2d": 0.04, "d2h": 0.01},
        "top3_operator_ratio": 0.9,
        "max_operator_ratio": 0.75,
        "operators": [
            {"op_type": "MatMulV2", "ratio": 0.75, "seconds": 0.7, "count": 50},
            {"op_type": "Add", "ratio": 0.1, "seconds": 0.1, "count": 10},
            {"op_type": "Cast", "ratio": 0.05},
        ],
        **extra,
    }


async def metrics(client) -> dict:
    await settled(client.app)  # the live parts are read once a second; now, for the test
    text = await (await client.get("/metrics")).text()
    return {(x.name, frozenset(x.labels.items())): x.value for f in text_string_to_metric_families(text) for x in f.samples}


def get(found: dict, name: str, **labels: str) -> float | None:
    hits = [v for (n, ls), v in found.items() if n == name and set(labels.items()) <= ls]
    assert len(hits) <= 1, hits
    return hits[0] if hits else None


async def post(client, doc=None, raw: bytes | None = None, headers=JSON):
    data = raw if raw is not None else json.dumps(doc).encode()
    return await client.post("/api/v1/profiles", data=data, headers=headers)


async def test_a_summary_becomes_the_profile_series_of_its_job_and_rank(aiohttp_client):
    client = await aiohttp_client(make_app())
    doc = summary()
    resp = await post(client, doc)
    assert resp.status == 200 and await resp.json() == {"accepted": 1}
    found = await metrics(client)
    assert get(found, "npu_profile_max_operator_ratio", job_name="llama", rank="0") == 0.75
    assert get(found, "npu_profile_operator_time_ratio", position="1") == 0.75
    assert get(found, "npu_profile_operator_time_ratio", position="1", op_type="MatMulV2") == 0.75
    assert get(found, "npu_profile_memcpy_kind_ratio", kind="h2d") == 0.04
    assert get(found, "npu_profile_last_update_timestamp_seconds", job_name="llama") == doc["finished_at"]
    assert get(found, "npu_profile_communication_ratio") is None  # not sent: absent, not 0
    assert get(found, "cann_exporter_ingest_profiles_total") == 1


async def test_a_backend_without_a_figure_leaves_it_absent(aiohttp_client):
    client = await aiohttp_client(make_app())
    doc = {
        k: v for k, v in summary(backend="cpu").items() if k not in ("compute_ratio", "idle_ratio", "memcpy_ratio", "memcpy_kind_ratios")
    }
    assert (await post(client, doc)).status == 200
    found = await metrics(client)
    assert get(found, "npu_profile_max_operator_ratio") == 0.75
    for name in ("npu_profile_compute_ratio", "npu_profile_idle_ratio", "npu_profile_memcpy_ratio", "npu_profile_memcpy_kind_ratio"):
        assert get(found, name) is None, name


async def test_the_later_summary_of_a_rank_replaces_the_earlier(aiohttp_client):
    client = await aiohttp_client(make_app(posted=PostedLimits(top_k=2)))
    now = time.time()
    assert (await post(client, summary(finished_at=now - 60))).status == 200
    assert (
        await post(
            client,
            summary(
                finished_at=now,
                max_operator_ratio=0.5,
                operators=[{"op_type": "Conv2D", "ratio": 0.5}, {"op_type": "Add", "ratio": 0.2}, {"op_type": "Cast", "ratio": 0.1}],
            ),
        )
    ).status == 200
    found = await metrics(client)
    assert get(found, "npu_profile_max_operator_ratio", job_name="llama", rank="0") == 0.5
    assert get(found, "npu_profile_operator_time_ratio", op_type="Conv2D", position="1") == 0.5
    assert get(found, "npu_profile_operator_time_ratio", position="3") is None  # profiles.top_k
    assert get(found, "npu_profile_operator_time_ratio", op_type="MatMulV2") is None


BAD = [
    ("share above 1", summary(max_operator_ratio=1.2), 400, "out_of_range"),
    ("operator share above 1", summary(operators=[{"op_type": "MatMulV2", "ratio": 1.5}]), 400, "out_of_range"),
    (
        "shares add up above 1",
        summary(max_operator_ratio=0.7, operators=[{"op_type": "A", "ratio": 0.7}, {"op_type": "B", "ratio": 0.6}]),
        400,
        "out_of_range",
    ),
    ("negative share", summary(idle_ratio=-0.1), 400, "out_of_range"),
    ("unknown field", summary(gpu_util=0.5), 400, "invalid"),
    ("unknown operator field", summary(operators=[{"op_type": "A", "ratio": 0.5, "flops": 1}]), 400, "invalid"),
    ("unknown copy kind", summary(memcpy_kind_ratios={"p2p": 0.1}), 400, "invalid"),
    (
        "oversized operator list",
        summary(max_operator_ratio=0.01, top3_operator_ratio=0.03, operators=[{"op_type": f"Op{i}", "ratio": 0.01} for i in range(33)]),
        400,
        "invalid",
    ),
    ("operator twice", summary(operators=[{"op_type": "A", "ratio": 0.5}, {"op_type": "A", "ratio": 0.2}]), 400, "invalid"),
    ("string share", summary(compute_ratio="0.5"), 400, "invalid"),
    ("unknown backend", summary(backend="tpu"), 400, "invalid"),
    ("missing finished_at", {k: v for k, v in summary().items() if k != "finished_at"}, 400, "invalid"),
    ("old window", summary(finished_at=time.time() - 3 * 86_400), 400, "out_of_range"),
    ("job name junk", summary(job="bad job\n"), 400, "bad_label"),
    ("op_type junk", summary(operators=[{"op_type": 'Mat"Mul\n{x}', "ratio": 0.5}]), 400, "bad_label"),
    ("op_type too long", summary(operators=[{"op_type": "A" * 129, "ratio": 0.5}]), 400, "bad_label"),
    ("rank beyond world size", summary(rank=8), 400, "out_of_range"),
    ("max above top3", summary(max_operator_ratio=0.95, top3_operator_ratio=0.9), 400, "out_of_range"),
]


@pytest.mark.parametrize("doc,status,reason", [b[1:] for b in BAD], ids=[b[0] for b in BAD])
async def test_bad_summaries_are_refused_with_a_reason_and_counted(aiohttp_client, doc, status, reason):
    client = await aiohttp_client(make_app())
    assert (await post(client, summary(job="good"))).status == 200
    before = await metrics(client)
    resp = await post(client, doc)
    assert resp.status == status
    assert (await resp.json())["reason"] == reason
    found = await metrics(client)
    assert get(found, "cann_exporter_ingest_profiles_rejected_total", reason=reason) == 1
    # nothing else changed: the good job's series are as they were, no series for the bad one
    profile = {k: v for k, v in found.items() if k[0].startswith("npu_profile_")}
    assert profile == {k: v for k, v in before.items() if k[0].startswith("npu_profile_")}
    assert get(found, "cann_exporter_ingest_profiles_total") == 1


@pytest.mark.parametrize(
    "raw,reason",
    [
        (b"{nope", "malformed_json"),
        (b'{"x": NaN}', "malformed_json"),
        (b"\xff\xfe", "malformed_json"),
        (b'{"job_name": "a", ' + json.dumps(summary()).encode()[1:], "malformed_json"),  # job_name twice
    ],
)
async def test_malformed_bodies(aiohttp_client, raw, reason):
    client = await aiohttp_client(make_app())
    resp = await post(client, raw=raw)
    assert resp.status == 400 and (await resp.json())["reason"] == reason
    assert get(await metrics(client), "cann_exporter_ingest_profiles_rejected_total", reason=reason) == 1


async def test_nan_share_is_refused(aiohttp_client):
    client = await aiohttp_client(make_app())
    raw = json.dumps(summary()).replace('"compute_ratio": 0.8', '"compute_ratio": NaN').encode()
    resp = await post(client, raw=raw)
    assert resp.status == 400 and (await resp.json())["reason"] == "malformed_json"


async def test_token_body_size_and_content_type_as_for_steps(aiohttp_client):
    client = await aiohttp_client(make_app(token="s3cret", max_body_bytes=2000))
    assert (await post(client, summary())).status == 401
    auth = {**JSON, "Authorization": "Bearer s3cret"}
    assert (await post(client, summary(), headers=auth)).status == 200
    assert (await post(client, summary(), headers={"Authorization": "Bearer s3cret", "Content-Type": "text/plain"})).status == 415
    big = summary(
        operators=[{"op_type": f"Operator{i:03d}", "ratio": 0.01, "seconds": 0.001, "count": 1} for i in range(30)],
        max_operator_ratio=0.01,
        top3_operator_ratio=0.03,
    )
    resp = await post(client, big, headers=auth)
    assert resp.status == 413 and (await resp.json())["reason"] == "too_large"
    found = await metrics(client)
    assert {
        r: get(found, "cann_exporter_ingest_profiles_rejected_total", reason=r) for r in ("unauthorized", "content_type", "too_large")
    } == {"unauthorized": 1, "content_type": 1, "too_large": 1}


async def test_ranks_are_admitted_within_the_ingest_limits(aiohttp_client):
    client = await aiohttp_client(make_app(posted=PostedLimits(max_jobs=1, max_ranks=2)))
    assert (await post(client, summary(rank=0))).status == 200
    assert (await post(client, summary(rank=1))).status == 200
    resp = await post(client, summary(rank=2))
    assert resp.status == 429 and (await resp.json())["reason"] == "too_many_ranks"
    assert (await post(client, summary(rank=1, max_operator_ratio=0.8, operators=[{"op_type": "A", "ratio": 0.8}]))).status == 200
    found = await metrics(client)
    assert get(found, "npu_profile_max_operator_ratio", rank="1") == 0.8
    assert get(found, "npu_profile_max_operator_ratio", rank="2") is None


async def test_a_new_job_past_max_jobs_evicts_the_job_with_the_oldest_summary(aiohttp_client):
    """Eight jobs held, a ninth and a tenth come: each is admitted in the place of the job whose
    latest summary is oldest (all its ranks), never refused for a day."""
    client = await aiohttp_client(make_app())
    now = time.time()
    for i in range(8):
        for rank in (0, 1):
            assert (await post(client, summary(job=f"job{i}", rank=rank, finished_at=now - 1000 + i * 10))).status == 200
    assert (await post(client, summary(job="job0", rank=1, finished_at=now - 500))).status == 200  # job0 refreshed: job1 is oldest now
    for newcomer in ("late", "later"):
        resp = await post(client, summary(job=newcomer, finished_at=now))
        assert resp.status == 200, await resp.text()
    found = await metrics(client)
    held = {job for (name, labels), _ in found.items() if name == "npu_profile_max_operator_ratio" for k, job in labels if k == "job_name"}
    assert held == {"job0", "job3", "job4", "job5", "job6", "job7", "late", "later"}
    assert get(found, "npu_profile_max_operator_ratio", job_name="job1", rank="1") is None
    assert get(found, "cann_exporter_ingest_profile_jobs_evicted_total") == 2
    assert get(found, "cann_exporter_ingest_profiles_total") == 19
    assert get(found, "cann_exporter_ingest_profiles_rejected_total", reason="too_many_ranks") == 0


async def test_skipped_windows_are_counted(aiohttp_client):
    client = await aiohttp_client(make_app())
    assert (await post(client, summary(skipped=2))).status == 200
    assert (await post(client, summary(skipped=1))).status == 200
    assert get(await metrics(client), "cann_exporter_ingest_profile_windows_skipped_total") == 3


async def test_steps_route_is_undisturbed(aiohttp_client):
    client = await aiohttp_client(make_app())
    assert (await post(client, summary(max_operator_ratio=3))).status == 400
    steps = {"job_name": "llama", "rank": 0, "steps": [{"duration": 0.5}]}
    resp = await client.post("/api/v1/steps", data=json.dumps(steps).encode(), headers=JSON)
    assert resp.status == 200
    found = await metrics(client)
    assert get(found, "npu_job_iterations_total", job_name="llama") == 1
    assert get(found, "cann_exporter_ingest_rejected_total", reason="out_of_range") == 0
