"""Training-job metrics from the hooks ingest store, plus the ingest's own counters."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import Metric
from prometheus_client.utils import floatToGoString

from exporter import metrics as m
from exporter.collectors import family, field_families
from exporter.ingest import IngestCounters, IngestStore, RankView

_BUCKET_BOUNDS = tuple(floatToGoString(b) for b in m.JOB_DURATION_BUCKETS) + ("+Inf",)
# One series per rank from a RankView field; None (never reported) is absent.
_FIELDS = (
    (m.JOB_ITERATIONS, "iterations"),
    (m.JOB_SAMPLES, "samples"),
    (m.JOB_LAST_ITERATION, "last_iteration_end"),
    (m.JOB_MEMORY_ALLOCATED, "memory_allocated_bytes"),
    (m.JOB_MEMORY_MAX_ALLOCATED, "memory_max_allocated_bytes"),
)


def _key(r: RankView) -> list[str]:
    return [r.job_name, str(r.rank)]


class JobCollector:
    """Renders one set of `npu_job_*` series per live (job_name, rank); expired ones are gone."""

    def __init__(self, store: IngestStore) -> None:
        self.store = store

    def describe(self) -> Iterator[Metric]:
        for spec in m.JOB_METRICS + m.INGEST_METRICS:
            yield family(spec)

    def collect(self) -> Iterator[Metric]:
        ranks, counters = self.store.view()
        yield from self._jobs(ranks)
        yield from self._self(counters)

    def _jobs(self, ranks: tuple[RankView, ...]) -> Iterator[Metric]:
        info, duration, phases = family(m.JOB_INFO), family(m.JOB_ITERATION_DURATION), family(m.JOB_PHASE_SECONDS)
        for r in ranks:
            key = _key(r)
            info.add_metric(key + [r.device, str(r.world_size), r.framework, r.pid], 1)
            duration.add_metric(key, list(zip(_BUCKET_BOUNDS, r.cumulative_buckets, strict=True)), r.duration_sum)
            for phase, seconds in r.phase_seconds:
                phases.add_metric(key + [phase], seconds)
        yield from (info, duration, phases)
        yield from field_families(_FIELDS, ranks, _key)

    def _self(self, c: IngestCounters) -> Iterator[Metric]:
        for spec, value in (
            (m.INGEST_REQUESTS, c.requests),
            (m.INGEST_STEPS, c.steps),
            (m.INGEST_DROPPED, c.client_dropped),
            (m.INGEST_EXPIRED, c.expired),
            (m.INGEST_RANKS, c.ranks),
        ):
            metric = family(spec)
            metric.add_metric([], value)
            yield metric
        # Every known reason from zero, so rate() sees the first rejection of each.
        rejected = dict.fromkeys(m.INGEST_REJECT_REASONS, 0) | dict(c.rejected)
        metric = family(m.INGEST_REJECTED)
        for reason, count in rejected.items():
            metric.add_metric([reason], count)
        yield metric
