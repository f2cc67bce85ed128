"""Training-job metrics from the jobs part, plus the ingest's own counters."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import Metric
from prometheus_client.utils import floatToGoString

from exporter.core.metric import MetricSpec, family, field_families, histogram_family, part_families
from exporter.jobs import metrics as m
from exporter.jobs.mfu import utilization
from exporter.jobs.phases import stage_of
from exporter.jobs.store import IngestCounters, JobsPart, RankView

_GRID_LABELS = tuple(floatToGoString(b) for b in m.DURATION_GRID)


def _bounds(window: int | None) -> tuple[str, ...]:
    return (*(_GRID_LABELS[window : window + m.WINDOW_BOUNDS] if window is not None else ()), "+Inf")


def _key(r: RankView) -> list[str]:
    return [r.job_name, str(r.rank)]


class JobCollector:
    """One set of `npu_job_*` series per live (job_name, rank); expired ones are gone."""

    specs = m.JOB_METRICS + m.INGEST_METRICS

    def render(self, part: JobsPart) -> Iterator[Metric]:
        yield from self._jobs(part.ranks)
        yield self._mfu(part)
        yield from self._self(part.counters)

    def _mfu(self, part: JobsPart) -> Metric:
        metric = family(m.JOB_MFU)
        peaks = {(device, precision): flops for device, precision, flops in part.peaks}
        for r in part.ranks:
            ratio = utilization(r, peaks)
            if ratio is not None:
                metric.add_metric(_key(r), ratio)
        return metric

    def _jobs(self, ranks: tuple[RankView, ...]) -> Iterator[Metric]:
        info, duration, phases = family(m.JOB_INFO), histogram_family(m.JOB_ITERATION_DURATION), family(m.JOB_PHASE_SECONDS)
        state, badput = family(m.JOB_STATE), family(m.JOB_BADPUT)
        for r in ranks:
            key = _key(r)
            process = r.process
            info.add_metric(key + [process.device, str(process.world_size), process.framework, process.pid], 1)
            for name in m.JOB_STATES:
                state.add_metric(key + [name], 1 if name == r.state else 0)
            duration.add_metric(key, list(zip(_bounds(r.window), r.cumulative_buckets, strict=True)), r.duration_sum)
            for phase, seconds in r.phase_seconds:
                phases.add_metric(key + [phase, stage_of(phase)], seconds)
            for kind, seconds in r.badput:  # every kind from zero, so rate() sees the first
                badput.add_metric(key + [kind], seconds)
        yield from (info, state, duration, phases, badput)
        yield from field_families(m.JOB_FIELDS, ranks, _key)  # None (never reported) is absent

    def _self(self, c: IngestCounters) -> Iterator[Metric]:
        yield from part_families(m.INGEST_COUNTS, c)
        yield _by_reason(m.INGEST_REJECTED, m.INGEST_REJECT_REASONS, c.rejected)
        yield _by_reason(m.INGEST_EVICTED, m.ADMISSION_REASONS, c.evicted)
        yield _by_reason(m.INGEST_TAKEOVERS, m.TAKEOVER_REASONS, c.takeovers)
        yield _by_reason(m.INGEST_PROFILES_REJECTED, m.PROFILE_REJECT_REASONS, c.profiles_rejected)


def _by_reason(spec: MetricSpec, reasons: tuple[str, ...], counts: tuple[tuple[str, int], ...]) -> Metric:
    """Every known reason from zero, so rate() sees the first count of each."""
    metric = family(spec)
    for reason, count in (dict.fromkeys(reasons, 0) | dict(counts)).items():
        metric.add_metric([reason], count)
    return metric
