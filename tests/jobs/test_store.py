"""IngestStore and JobCollector: folding, histogram, TTL expiry, cardinality limits, rendering."""

from __future__ import annotations

import pytest

from exporter.jobs.collector import JobCollector
from exporter.jobs.metrics import INGEST_METRICS, JOB_METRICS, JOB_STATES, WARMUP_STEPS, WINDOW_BOUNDS
from exporter.jobs.store import IngestStore
from exporter.jobs.validate import Batch, IngestError, IngestLimits, Step
from exporter.profiles.indicators import ProfileSummary
from exporter.profiles.posted import PostedProfiles
from tests.support.exposition import render


class Clock:
    def __init__(self, now: float = 1_750_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def batch(job: str = "job-a", rank: int = 0, steps=(), final: bool = False, dropped: int = 0, memory=(None, None), **info) -> Batch:
    fields = {"world_size": 8, "device": "3", "framework": "pytorch", "pid": "77", "session": "", **info}
    return Batch(
        job,
        rank,
        fields["world_size"],
        fields["device"],
        fields["framework"],
        fields["pid"],
        dropped,
        final,
        memory[0],
        memory[1],
        tuple(steps),
        session=fields["session"],
    )


def s(duration: float, samples: int | None = None, end: float | None = None, **phases: float) -> Step:
    return Step(duration, end, samples, tuple(phases.items()))


def scrape(store: IngestStore) -> dict[tuple[str, frozenset], float]:
    return render(JobCollector(), store.part())


def get(found: dict, name: str, **labels: str) -> float | None:
    hits = [v for (n, ls), v in found.items() if n == name and set(labels.items()) <= ls]
    assert len(hits) <= 1, (name, labels, hits)
    return hits[0] if hits else None


def names(found: dict, prefix: str) -> set[str]:
    return {n for n, _ in found if n.startswith(prefix)}


@pytest.fixture
def clock() -> Clock:
    return Clock()


def test_steps_fold_into_counters_histogram_and_phases(clock):
    store = IngestStore(clock=clock)
    store.accept(batch(steps=[s(0.004, 32, end=clock.now - 2, h2d=0.001, compute=0.002), s(0.2, 32, end=clock.now - 1, h2d=0.01)]))
    store.accept(batch(steps=[s(7.0, 16, compute=5.0, other=1.5)]))
    found = scrape(store)
    key = {"job_name": "job-a", "rank": "0"}
    assert get(found, "npu_job_info", **key) == 1
    assert get(found, "npu_job_info", device="3", world_size="8", framework="pytorch", pid="77") == 1
    assert get(found, "npu_job_iterations_total", **key) == 3
    assert get(found, "npu_job_samples_total", **key) == 80
    assert get(found, "npu_job_iteration_duration_seconds_count", **key) == 3
    assert get(found, "npu_job_iteration_duration_seconds_sum", **key) == pytest.approx(7.204)
    assert {dict(ls)["le"] for n, ls in found if n == "npu_job_iteration_duration_seconds_bucket"} == {"+Inf"}  # warm-up
    assert get(found, "npu_job_iteration_duration_seconds_bucket", le="+Inf", **key) == 3
    assert get(found, "npu_job_phase_seconds_total", phase="h2d", **key) == pytest.approx(0.011)
    assert get(found, "npu_job_phase_seconds_total", phase="compute", **key) == pytest.approx(5.002)
    assert get(found, "npu_job_phase_seconds_total", phase="other", **key) == pytest.approx(1.5)
    assert get(found, "npu_job_phase_seconds_total", phase="d2h", **key) is None  # never reported: absent, not 0
    assert get(found, "npu_job_last_iteration_timestamp_seconds", **key) == clock.now  # no `end`: arrival time
    assert get(found, "cann_exporter_ingest_steps_total") == 3
    assert get(found, "cann_exporter_ingest_requests_total") == 2


def bounds(found: dict) -> list[str]:
    return [dict(ls)["le"] for n, ls in found if n == "npu_job_iteration_duration_seconds_bucket"]


def test_the_bucket_window_is_fixed_around_the_warm_up_median_and_counts_the_warm_up(clock):
    store = IngestStore(clock=clock)
    store.accept(batch(steps=[s(30.0)] + [s(0.012)] * (WARMUP_STEPS - 2)))  # a slow first (compile) step
    assert bounds(scrape(store)) == ["+Inf"]
    store.accept(batch(steps=[s(0.012), s(0.0001), s(100.0)]))
    found = scrape(store)
    les = bounds(found)
    assert len(les) == WINDOW_BOUNDS + 1 and les[-1] == "+Inf"
    assert (les[0], les[WINDOW_BOUNDS - 1]) == ("0.003906", "0.1146")  # 2**-8 s up to 5 octaves: around 12 ms
    assert get(found, "npu_job_iteration_duration_seconds_bucket", le="0.003906") == 1  # 0.1 ms: the first bucket
    assert get(found, "npu_job_iteration_duration_seconds_bucket", le="0.1146") == WARMUP_STEPS
    assert get(found, "npu_job_iteration_duration_seconds_bucket", le="+Inf") == WARMUP_STEPS + 2


def test_bucket_bounds_are_inclusive(clock):
    store = IngestStore(clock=clock)
    store.accept(batch(steps=[s(0.125)] * (WARMUP_STEPS - 1) + [s(0.1250001)]))
    found = scrape(store)
    assert get(found, "npu_job_iteration_duration_seconds_bucket", le="0.125") == WARMUP_STEPS - 1
    assert get(found, "npu_job_iteration_duration_seconds_bucket", le="0.1363") == WARMUP_STEPS


def test_a_run_that_closes_during_warm_up_gets_its_buckets(clock):
    store = IngestStore(clock=clock)
    store.accept(batch(steps=[s(2.5), s(2.6)], final=True))
    found = scrape(store)
    assert len(bounds(found)) == WINDOW_BOUNDS + 1
    assert get(found, "npu_job_iteration_duration_seconds_bucket", le="2.594") == 1


def test_labels_are_the_contract(clock):
    store = IngestStore(clock=clock)
    store.accept(batch(steps=[s(0.1, 1, compute=0.1)], memory=(10, 20)))
    found = scrape(store)
    for (name, labels), _ in found.items():
        assert "job" not in dict(labels), name
        if name.startswith("npu_job_"):
            spec_name = name.removesuffix("_bucket").removesuffix("_sum").removesuffix("_count")
            spec = {x.name: x for x in JOB_METRICS}[spec_name if spec_name in {x.name for x in JOB_METRICS} else name]
            assert set(dict(labels)) - {"le"} == set(spec.labels), name
    assert get(found, "npu_job_memory_allocated_bytes") == 10
    assert get(found, "npu_job_memory_max_allocated_bytes") == 20


def test_no_samples_means_no_samples_series(clock):
    store = IngestStore(clock=clock)
    store.accept(batch(steps=[s(0.1)]))
    found = scrape(store)
    assert get(found, "npu_job_samples_total") is None
    assert get(found, "npu_job_iterations_total") == 1


def test_info_follows_the_latest_batch(clock):
    store = IngestStore(clock=clock)
    store.accept(batch(steps=[s(0.1)], pid="10"))
    store.accept(batch(steps=[s(0.1)], pid="10", device="5"))
    found = scrape(store)
    assert get(found, "npu_job_info") == 1
    assert get(found, "npu_job_info", pid="10", device="5") == 1


# --- identity: one process per job_name and rank --------------------------------------------------


def test_two_live_processes_with_one_job_name_and_rank_are_never_summed(clock):
    """They were: 200 iterations where each sent 100."""
    store = IngestStore(clock=clock)
    store.accept(batch(steps=[s(0.1)] * 100, pid="10", session="aaaaaaaa"))
    with pytest.raises(IngestError) as refused:
        store.accept(batch(steps=[s(0.1)] * 100, pid="10", session="bbbbbbbb"))  # same pid, another process (container)
    assert refused.value.status == 409 and refused.value.reason == "duplicate_rank"
    assert "another live process (pid 10" in refused.value.message and "job_name or rank" in refused.value.message
    clock.now += 60
    with pytest.raises(IngestError):
        store.accept(batch(steps=[], pid="11", session="cccccccc"))  # a heartbeat claims nothing either
    found = scrape(store)
    assert get(found, "npu_job_iterations_total") == 100
    assert get(found, "npu_job_info", pid="10") == 1


def test_a_restart_after_a_finish_starts_fresh_counters(clock):
    store = IngestStore(clock=clock)
    store.accept(batch(steps=[s(0.1)] * 100, pid="10", session="aaaaaaaa", final=True))
    store.accept(batch(steps=[s(0.2)] * 7, pid="12", session="bbbbbbbb"))
    found = scrape(store)
    assert get(found, "npu_job_iterations_total") == 7
    assert get(found, "npu_job_iteration_duration_seconds_sum") == pytest.approx(1.4)
    assert get(found, "npu_job_info", pid="12") == 1


def test_a_restart_after_a_crash_starts_fresh_counters_once_the_old_process_is_silent(clock):
    store = IngestStore(clock=clock, stalled_after=90)
    store.accept(batch(steps=[s(0.1)] * 100, pid="10", session="aaaaaaaa"))  # then killed: no final batch
    clock.now += 89
    with pytest.raises(IngestError):
        store.accept(batch(steps=[s(0.1)] * 3, pid="12", session="bbbbbbbb"))
    clock.now += 2
    store.accept(batch(steps=[s(0.1)] * 3, pid="12", session="bbbbbbbb"))
    assert get(scrape(store), "npu_job_iterations_total") == 3


def test_ttl_expiry_removes_every_series_of_that_rank(clock):
    store = IngestStore(ttl=60, clock=clock)
    store.accept(batch("old", steps=[s(0.1, 1, h2d=0.01)]))
    clock.now += 30
    store.accept(batch("new", steps=[s(0.1)]))
    clock.now += 31  # "old" is 61 s quiet, "new" 31 s
    found = scrape(store)
    assert {dict(ls)["job_name"] for n, ls in found if n.startswith("npu_job_")} == {"new"}
    assert get(found, "cann_exporter_ingest_expired_total") == 1
    assert get(found, "cann_exporter_ingest_ranks") == 1
    # The counters start again from zero if it comes back (a counter reset to Prometheus).
    store.accept(batch("old", steps=[s(0.1)]))
    assert get(scrape(store), "npu_job_iterations_total", job_name="old") == 1


def test_a_heartbeat_keeps_a_quiet_rank_alive(clock):
    store = IngestStore(ttl=60, clock=clock)
    store.accept(batch(steps=[s(0.1)]))
    for _ in range(5):
        clock.now += 50
        store.accept(batch(steps=[]))
    found = scrape(store)
    assert get(found, "npu_job_iterations_total") == 1
    assert get(found, "npu_job_last_iteration_timestamp_seconds") == clock.now - 250  # stall stays visible


def test_a_closed_rank_expires_after_the_finished_ttl(clock):
    store = IngestStore(ttl=600, finished_ttl=30, clock=clock)
    store.accept(batch(steps=[s(0.1)], final=True))
    clock.now += 29
    assert get(scrape(store), "npu_job_iterations_total") == 1
    clock.now += 2
    assert get(scrape(store), "npu_job_iterations_total") is None


def test_a_new_batch_after_final_revives_the_rank(clock):
    store = IngestStore(ttl=600, finished_ttl=30, clock=clock)
    store.accept(batch(steps=[s(0.1)], final=True))
    store.accept(batch(steps=[s(0.1)]))
    clock.now += 100
    assert get(scrape(store), "npu_job_iterations_total") == 2


def test_job_limit_rejects_new_jobs_only(clock):
    store = IngestStore(limits=IngestLimits(max_jobs=2), clock=clock)
    store.accept(batch("a", steps=[s(0.1)]))
    store.accept(batch("b", steps=[s(0.1)]))
    with pytest.raises(IngestError) as info:
        store.accept(batch("c", steps=[s(0.1)]))
    assert (info.value.status, info.value.reason) == (429, "too_many_jobs")
    assert "ingest.max_jobs" in info.value.message
    store.accept(batch("a", rank=1, steps=[s(0.1)]))  # a known job may still add a rank
    store.accept(batch("b", steps=[s(0.1)]))
    found = scrape(store)
    assert get(found, "npu_job_iterations_total", job_name="b") == 2
    assert get(found, "npu_job_iterations_total", job_name="c") is None
    assert get(found, "cann_exporter_ingest_ranks") == 3


def test_rank_limit_per_job(clock):
    store = IngestStore(limits=IngestLimits(max_ranks=2), clock=clock)
    for rank in (0, 1):
        store.accept(batch("a", rank=rank, steps=[s(0.1)]))
    with pytest.raises(IngestError) as info:
        store.accept(batch("a", rank=2, steps=[s(0.1)]))
    assert (info.value.status, info.value.reason) == (429, "too_many_ranks")
    store.accept(batch("other", rank=2, steps=[s(0.1)]))  # the limit is per job


def test_expiry_frees_room_under_the_limits(clock):
    store = IngestStore(ttl=10, limits=IngestLimits(max_jobs=1), clock=clock)
    store.accept(batch("a", steps=[s(0.1)]))
    with pytest.raises(IngestError):
        store.accept(batch("b", steps=[s(0.1)]))
    clock.now += 11
    store.accept(batch("b", steps=[s(0.1)]))


def test_rejections_are_counted_by_reason_from_zero(clock):
    store = IngestStore(clock=clock)
    store.reject("invalid")
    store.reject("invalid")
    store.reject("too_large")
    found = scrape(store)
    assert get(found, "cann_exporter_ingest_rejected_total", reason="invalid") == 2
    assert get(found, "cann_exporter_ingest_rejected_total", reason="too_large") == 1
    assert get(found, "cann_exporter_ingest_rejected_total", reason="bad_label") == 0


def test_client_drops_are_summed(clock):
    store = IngestStore(clock=clock)
    store.accept(batch("a", steps=[s(0.1)], dropped=5))
    store.accept(batch("b", steps=[], dropped=2))
    assert get(scrape(store), "cann_exporter_ingest_client_dropped_steps_total") == 7


def test_describe_matches_the_metric_specs():
    collector = JobCollector()
    assert collector.specs == JOB_METRICS + INGEST_METRICS
    assert {f.name for f in collector.render(IngestStore().part())} == {spec.family_name for spec in collector.specs}


# --- lifecycle: npu_job_state running, finished (the hook closed) or stalled (silent past
# ingest.stalled_after without closing); what a rank produced ends with it ---------------------


def states(store: IngestStore, **labels: str) -> dict[str, float | None]:
    found = scrape(store)
    return {state: get(found, "npu_job_state", state=state, **labels) for state in JOB_STATES}


def test_a_reporting_rank_is_running_a_closed_one_finished_until_the_finished_ttl():
    clock = Clock()
    store = IngestStore(ttl=1800, finished_ttl=60, stalled_after=120, clock=clock)
    store.accept(batch(steps=[s(0.1)]))
    assert states(store, job_name="job-a", rank="0") == {"running": 1, "finished": 0, "stalled": 0}
    clock.now += 10
    store.accept(batch(steps=[s(0.1)], final=True))
    assert states(store) == {"running": 0, "finished": 1, "stalled": 0}
    clock.now += 59  # closed: never stalled, whatever the silence
    assert states(store) == {"running": 0, "finished": 1, "stalled": 0}
    clock.now += 2
    found = scrape(store)
    assert {n for n, _ in found if n.startswith("npu_job_")} == set()  # every npu_job_* series ends together


def test_a_rank_silent_without_closing_is_stalled_until_a_heartbeat_or_the_ttl():
    clock = Clock()
    store = IngestStore(ttl=1800, finished_ttl=60, stalled_after=120, clock=clock)
    store.accept(batch(steps=[s(0.1)]))
    clock.now += 119
    assert states(store)["running"] == 1
    clock.now += 2  # a crash: no final message, heartbeats lost
    assert states(store) == {"running": 0, "finished": 0, "stalled": 1}
    store.accept(batch(steps=[]))  # a heartbeat: alive after all
    assert states(store)["running"] == 1
    clock.now += 1801
    assert states(store)["stalled"] is None  # gone after ingest.ttl


def test_posted_profile_summaries_end_with_their_rank():
    clock = Clock()
    store = IngestStore(ttl=1800, finished_ttl=60, clock=clock)
    posted = PostedProfiles(clock=clock)
    store.on_gone = posted.forget  # as serve wires them
    for rank in (0, 1):
        store.accept(batch(rank=rank, steps=[s(0.1)], final=rank == 0))
        posted.offer(ProfileSummary(job_name="job-a", rank=rank, path="posted", producer="hooks", finished_at=clock.now))
    clock.now += 61
    store.part()
    assert [p.rank for p in posted.summaries()] == [1]  # rank 0 finished a ttl ago: its profile went with it, not a day later
