"""npu_profile_* metrics from the profile summaries (one set per job_name/rank, latest wins)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

from prometheus_client.core import Metric

from exporter import metrics as m
from exporter.collectors import family, field_families, label
from exporter.parsers.profiles import ProfileSummary
from exporter.sources.profiles import latest_per_rank

# Plain per-rank gauges: (spec, summary field).
_GAUGES = (
    (m.PROFILE_STEP_DURATION, "step_duration_seconds"),
    (m.PROFILE_COMPUTE, "compute_ratio"),
    (m.PROFILE_COMMUNICATION, "communication_ratio"),
    (m.PROFILE_IDLE, "idle_ratio"),
    (m.PROFILE_MEMCPY, "memcpy_ratio"),
    (m.PROFILE_FRAMEWORK, "framework_overhead_ratio"),
    (m.PROFILE_TOP3, "top3_operator_ratio"),
    (m.PROFILE_MAX_OPERATOR, "max_operator_ratio"),
    (m.PROFILE_LAST_UPDATE, "finished_at"),
)


class ProfileCollector:
    """``summaries`` is the source's accessor (e.g. ``ProfileSource.summaries``)."""

    def __init__(self, summaries: Callable[[], Iterable[ProfileSummary]]) -> None:
        self.summaries = summaries

    def describe(self) -> Iterator[Metric]:
        for spec in m.PROFILE_METRICS:
            yield family(spec)

    def collect(self) -> Iterator[Metric]:
        latest = latest_per_rank(self.summaries())
        yield from field_families(_GAUGES, latest, _labels)  # a field the export lacks is absent, never 0 or -1
        yield _memcpy_kinds(latest)
        yield _operators(latest)


def _labels(summary: ProfileSummary) -> list[str]:
    return [summary.job_name, label(summary.rank)]


def _memcpy_kinds(latest: Iterable[ProfileSummary]) -> Metric:
    metric = family(m.PROFILE_MEMCPY_KIND)
    for summary in latest:
        for kind, ratio in summary.memcpy_kind_ratios:
            metric.add_metric(_labels(summary) + [kind], ratio)
    return metric


def _operators(latest: Iterable[ProfileSummary]) -> Metric:
    metric = family(m.PROFILE_OPERATOR)
    for summary in latest:
        for position, share in enumerate(summary.top_operators, start=1):
            metric.add_metric(_labels(summary) + [share.op_type, str(position)], share.ratio)
    return metric
