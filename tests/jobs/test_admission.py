"""Admission to the ingest store: the series budget, the limits per client address, and idle
ranks giving way to jobs that report steps (a flood of heartbeat-only names cannot keep real
jobs out). Store-level, through the HTTP route, and as a property over random traffic."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

import pytest
from aiohttp import web
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from exporter.jobs import http as ingest_http
from exporter.jobs.admission import client_key
from exporter.jobs.collector import JobCollector
from exporter.jobs.metrics import SERIES_PER_RANK, WARMUP_STEPS
from exporter.jobs.phases import STAGES, VOCABULARY
from exporter.jobs.store import IngestStore
from exporter.jobs.validate import Batch, IngestError, IngestLimits, Step
from tests.support.exposition import exposition, render, value

NOW = 1_750_000_000.0
IDLE_AFTER = IngestLimits().idle_after


class Clock:
    def __init__(self) -> None:
        self.now = NOW

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


def full_step() -> Step:
    """A step that sets everything a rank can render: samples, every word of the vocabulary
    (past the cap of words per rank, the rest fold onto their stages) and model FLOPs."""
    return Step(0.2, None, 32, tuple((word, 0.001) for word in (*STAGES, *VOCABULARY)), 1e13)


def batch(job: str, rank: int = 0, steps: int = 1, final: bool = False) -> Batch:
    return Batch(job, rank, 64, "3", "pytorch", "77", 0, final, 1 << 30, 1 << 31, (full_step(),) * steps, profiling_seconds=0.5)


def held(store: IngestStore) -> set[tuple[str, int]]:
    return {(r.job_name, r.rank) for r in store.part().ranks}


def jobs(store: IngestStore) -> set[str]:
    return {job for job, _ in held(store)}


def evicted(store: IngestStore) -> dict[str, int]:
    return dict(store.part().counters.evicted)


def refused(store: IngestStore, b: Batch, remote: str | None = None) -> str:
    with pytest.raises(IngestError) as info:
        store.accept(b, remote)
    assert info.value.status == 429
    return info.value.reason


# --- the series budget ---------------------------------------------------------------------------


def test_the_series_budget_reserves_the_worst_case_of_each_rank(clock):
    store = IngestStore(limits=IngestLimits(max_series=3 * SERIES_PER_RANK + SERIES_PER_RANK - 1), clock=clock)
    for rank in range(3):
        store.accept(batch("bert", rank))
    assert refused(store, batch("bert", 3)) == "series_budget"
    assert refused(store, batch("other")) == "series_budget"
    store.accept(batch("bert", 0))  # a held rank keeps reporting
    assert held(store) == {("bert", r) for r in range(3)}
    assert evicted(store) == {}  # every rank is working: nobody gave way


def test_the_worst_case_default_exposition_is_the_series_budget(clock):
    """Everyone at once, from many addresses, with every field set and 128-character labels:
    the jobs part renders at most ingest.max_series series, under 1.2 MB (about 0.5 MB with names like llama-sft-3)."""
    limits = IngestLimits()
    store = IngestStore(clock=clock)
    outcomes: Counter[str] = Counter()
    for j in range(limits.max_jobs * 2):
        name = f"{j:03d}-".ljust(limits.max_label_length, "x")
        for rank in range(limits.max_ranks):
            b = Batch(
                name,
                rank,
                1 << 20,
                "99999",
                "f" * 128,
                str(2**31),
                0,
                False,
                1 << 50,
                1 << 50,
                (full_step(),) * WARMUP_STEPS,
                profiling_seconds=1e9,
            )
            try:
                store.accept(b, f"10.0.{j}.{rank}")
                outcomes["admitted"] += 1
            except IngestError as exc:
                outcomes[exc.reason] += 1
    part = replace(store.part(), peaks=(("99999", "bf16", 3e14),))  # every rank's chip has a peak: MFU too
    text = exposition(JobCollector(), part)
    series = [line for line in text.splitlines() if line.startswith("npu_job_")]
    assert outcomes["admitted"] == limits.max_series // SERIES_PER_RANK == 64
    assert len(series) == outcomes["admitted"] * SERIES_PER_RANK <= limits.max_series == 64 * SERIES_PER_RANK
    assert len(text.encode()) < 1_200_000


def test_one_rank_renders_exactly_the_series_it_reserves(clock):
    store = IngestStore(clock=clock)
    store.accept(batch("bert", steps=WARMUP_STEPS))  # every bucket: the window is fixed
    found = render(JobCollector(), replace(store.part(), peaks=(("3", "bf16", 3e14),)))
    assert len([name for name, _ in found if name.startswith("npu_job_")]) == SERIES_PER_RANK == 81


# --- idle ranks give way to ranks with steps ----------------------------------------------------


def test_a_heartbeat_flood_gives_way_to_a_job_that_reports_steps(clock):
    store = IngestStore(clock=clock)  # the defaults; everyone on loopback (no per-client limit)
    flood = [f"flood-{i}" for i in range(40)]
    admitted = []
    for name in flood:  # one POST per name, no steps
        clock.now += 1
        try:
            store.accept(batch(name, steps=0), "127.0.0.1")
            admitted.append(name)
        except IngestError as exc:
            assert exc.reason == "too_many_jobs"
    assert admitted == flood[: IngestLimits().max_jobs]

    store.accept(batch("bert", steps=1), "127.0.0.1")  # the oldest heartbeat-only name gives way
    assert jobs(store) == set(flood[1:8]) | {"bert"}
    assert evicted(store) == {"too_many_jobs": 1}
    for rank in range(1, 16):
        store.accept(batch("bert", rank), "127.0.0.1")

    # More heartbeat-only names and the flood's keep-alive POSTs: refused, or refreshed in place.
    for name in flood:
        clock.now += 1
        try:
            store.accept(batch(name, steps=0), "127.0.0.1")
        except IngestError as exc:
            assert exc.reason == "too_many_jobs"
    assert jobs(store) == set(flood[1:8]) | {"bert"}

    # A flood that sends steps takes the other flood names' places, then its own idle ones: never bert's.
    for minute in range(20):
        clock.now += 60
        for rank in range(16):
            store.accept(batch("bert", rank), "127.0.0.1")
        for name in flood[8 + minute :: 20]:
            try:
                store.accept(batch(name, steps=1), "127.0.0.1")
            except IngestError as exc:
                assert exc.reason == "too_many_jobs"
        assert "bert" in jobs(store) and len(jobs(store)) == 8
    assert {("bert", r) for r in range(16)} <= held(store)


def test_a_heartbeat_only_newcomer_never_displaces_anyone(clock):
    store = IngestStore(limits=IngestLimits(max_jobs=2), clock=clock)
    store.accept(batch("quiet", steps=0))
    store.accept(batch("stalled", steps=1))
    clock.now += IDLE_AFTER + 1  # both idle, neither expired
    assert refused(store, batch("newcomer", steps=0)) == "too_many_jobs"
    assert jobs(store) == {"quiet", "stalled"} and evicted(store) == {}


def test_a_job_that_stops_stepping_gives_way_only_after_idle_after(clock):
    store = IngestStore(limits=IngestLimits(max_jobs=1), clock=clock)
    store.accept(batch("old", steps=1))
    clock.now += IDLE_AFTER - 1
    store.accept(batch("old", steps=0))  # alive (heartbeat) but not stepping
    assert refused(store, batch("new")) == "too_many_jobs"
    clock.now += 2  # its last step is now idle_after + 1 s old
    store.accept(batch("new"))
    assert held(store) == {("new", 0)}
    assert evicted(store) == {"too_many_jobs": 1}


def test_closed_ranks_go_first_then_never_stepped_then_quiet_longest(clock):
    store = IngestStore(ttl=3600, finished_ttl=3600, limits=IngestLimits(max_series=4 * SERIES_PER_RANK), clock=clock)
    store.accept(batch("stalled", steps=1))
    clock.now += 1
    store.accept(batch("never", steps=0))
    clock.now += 1
    store.accept(batch("closed", steps=1, final=True))
    clock.now += IDLE_AFTER + 1
    store.accept(batch("busy", steps=1))
    order = []
    for i in range(3):
        before = jobs(store)
        store.accept(batch(f"new-{i}"))
        order += sorted(before - jobs(store))
    assert order == ["closed", "never", "stalled"]
    assert refused(store, batch("one-more")) == "series_budget"
    assert evicted(store) == {"series_budget": 3}


def test_a_job_restarting_on_other_ranks_replaces_its_idle_ones(clock):
    store = IngestStore(limits=IngestLimits(max_ranks=2), clock=clock)
    store.accept(batch("elastic", 0))
    store.accept(batch("elastic", 1))
    assert refused(store, batch("elastic", 2)) == "too_many_ranks"
    clock.now += IDLE_AFTER + 1
    store.accept(batch("elastic", 2))
    assert held(store) == {("elastic", 1), ("elastic", 2)}
    assert evicted(store) == {"too_many_ranks": 1}


def test_a_refused_batch_evicts_nothing(clock):
    """The job slot could be freed, but the client's own limit cannot: nothing happens."""
    store = IngestStore(limits=IngestLimits(max_jobs=3, max_jobs_per_client=1), clock=clock)
    store.accept(batch("idle", steps=0), "10.0.0.1")
    store.accept(batch("busy"), "10.0.0.2")
    store.accept(batch("z1"), "10.0.0.3")
    assert refused(store, batch("z2"), "10.0.0.3") == "per_client_limit"
    assert jobs(store) == {"idle", "busy", "z1"} and evicted(store) == {}


# --- per client address ----------------------------------------------------------------------


def test_one_address_is_capped_while_another_gets_in(clock):
    store = IngestStore(clock=clock)
    outcomes: Counter[str] = Counter()
    for job in range(6):
        for rank in range(16):
            try:
                store.accept(batch(f"greedy-{job}", rank), "10.0.0.66")
                outcomes["admitted"] += 1
            except IngestError as exc:
                outcomes[exc.reason] += 1
    assert outcomes == {"admitted": 32, "per_client_limit": 64}
    for rank in range(16):  # a full-node job from another pod
        store.accept(batch("bert", rank), "10.0.0.7")
    assert jobs(store) == {"greedy-0", "greedy-1", "bert"}


def test_jobs_per_address(clock):
    store = IngestStore(clock=clock)
    for job in range(4):
        clock.now += 1
        store.accept(batch(f"greedy-{job}"), "10.0.0.66")
    assert refused(store, batch("greedy-4"), "10.0.0.66") == "per_client_limit"
    assert refused(store, batch("greedy-4"), "::ffff:10.0.0.66") == "per_client_limit"  # the same address
    store.accept(batch("greedy-0", 1), "10.0.0.66")  # more ranks of a job it holds
    store.accept(batch("bert"), "10.0.0.7")
    # Its own idle jobs give way to its new one (the per-client limit's eviction).
    clock.now += IDLE_AFTER + 1
    store.accept(batch("greedy-4"), "10.0.0.66")
    assert jobs(store) == {"greedy-0", "greedy-2", "greedy-3", "greedy-4", "bert"}  # greedy-1: quiet longest
    assert evicted(store) == {"per_client_limit": 1}


def test_loopback_and_unknown_peers_are_not_limited_per_client():
    assert client_key("127.0.0.1") == client_key("::1") == client_key("::ffff:127.0.0.1") == ""
    assert client_key(None) == client_key("not-an-address") == ""
    assert client_key("::ffff:10.1.2.3") == client_key("10.1.2.3") == "10.1.2.3"
    assert client_key("fd00::5") == "fd00::5"


# --- through the route: request.remote reaches the store; rejections and evictions counted ----


@web.middleware
async def peer_from_header(request: web.Request, handler):
    """Stands in for pods at other addresses (the test client always connects from 127.0.0.1)."""
    return await handler(request.clone(remote=request.headers.get("X-Test-Peer", request.remote)))


def app(store: IngestStore) -> web.Application:
    application = web.Application(middlewares=[peer_from_header])
    application.add_routes(ingest_http.routes(store, None))
    return application


async def post(client, job: str, rank: int = 0, steps: int = 1, peer: str | None = None):
    doc = {"job_name": job, "rank": rank, "world_size": 64, "steps": [{"duration": 0.1, "phases": {"compute": 0.1}}] * steps}
    headers = {"X-Test-Peer": peer} if peer else {}
    return await client.post("/api/v1/steps", json=doc, headers=headers)


async def test_route_counts_series_budget_and_per_client_rejections(aiohttp_client):
    store = IngestStore(limits=IngestLimits(max_series=5 * SERIES_PER_RANK, max_ranks_per_client=2))
    client = await aiohttp_client(app(store))
    for rank in range(2):
        assert (await post(client, "greedy", rank, peer="10.0.0.66")).status == 200
    resp = await post(client, "greedy", 2, peer="10.0.0.66")
    assert resp.status == 429 and (await resp.json())["reason"] == "per_client_limit"
    for rank in range(3):  # from the test client's own loopback address
        assert (await post(client, "bert", rank)).status == 200
    resp = await post(client, "bert", 3)
    assert resp.status == 429 and (await resp.json())["reason"] == "series_budget"
    found = render(JobCollector(), store.part())
    assert value(found, "cann_exporter_ingest_rejected_total", reason="per_client_limit") == 1
    assert value(found, "cann_exporter_ingest_rejected_total", reason="series_budget") == 1
    assert value(found, "cann_exporter_ingest_evicted_total", reason="series_budget") == 0
    assert value(found, "cann_exporter_ingest_ranks") == 5


async def test_route_counts_evictions(aiohttp_client):
    store = IngestStore(limits=IngestLimits(max_jobs=1))
    client = await aiohttp_client(app(store))
    assert (await post(client, "squatter", steps=0, peer="10.0.0.66")).status == 200
    resp = await post(client, "late", steps=0)
    assert resp.status == 429 and (await resp.json())["reason"] == "too_many_jobs"
    assert (await post(client, "bert")).status == 200
    found = render(JobCollector(), store.part())
    assert value(found, "cann_exporter_ingest_evicted_total", reason="too_many_jobs") == 1
    assert value(found, "npu_job_info", job_name="squatter") is None


# --- property: whatever the traffic, the bounds hold and working ranks stay -------------------

_OPS = st.lists(st.tuples(st.integers(0, 5), st.integers(0, 4), st.integers(0, 3), st.booleans(), st.integers(0, 200)), max_size=60)
_SMALL = IngestLimits(
    max_jobs=4, max_ranks=3, max_series=8 * SERIES_PER_RANK, max_jobs_per_client=2, max_ranks_per_client=4, idle_after=120
)
_PEERS = ("10.0.0.1", "10.0.0.2", "fd00::3", "127.0.0.1")


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=_OPS)
def test_bounds_hold_and_working_ranks_are_never_evicted(ops):
    clock = Clock()
    store = IngestStore(ttl=1e9, limits=_SMALL, clock=clock)
    last_step: dict[tuple[str, int], float] = {}
    owner: dict[tuple[str, int], str] = {}
    for job, rank, peer, has_steps, dt in ops:
        clock.now += dt
        key, before = (f"j{job}", rank), held(store)
        working = {k for k in before if clock.now - last_step.get(k, -1e18) <= _SMALL.idle_after}
        try:
            store.accept(batch(*key, steps=int(has_steps)), _PEERS[peer])
        except IngestError as exc:
            assert exc.status == 429 and key not in before
            assert held(store) == before  # refused: nothing changed
            continue
        after = held(store)
        assert working <= after  # nobody working was evicted
        if not has_steps:
            assert before <= after  # a heartbeat evicts no one
        if key not in before:
            owner[key] = _PEERS[peer]
            for gone in before - after:
                last_step.pop(gone, None)
        if has_steps:
            last_step[key] = clock.now
        assert len(after) * SERIES_PER_RANK <= _SMALL.max_series
        assert len({j for j, _ in after}) <= _SMALL.max_jobs
        assert max(Counter(j for j, _ in after).values()) <= _SMALL.max_ranks
        per_client = Counter(owner[k] for k in after if client_key(owner[k]))
        assert all(n <= _SMALL.max_ranks_per_client for n in per_client.values())
        client_jobs = Counter(c for c, _ in {(owner[k], k[0]) for k in after if client_key(owner[k])})
        assert all(n <= _SMALL.max_jobs_per_client for n in client_jobs.values())
