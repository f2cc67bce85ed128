"""npu_profile_* metrics from the profiles part (one set per job_name/rank, latest wins)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from prometheus_client.core import Metric

from exporter.core.metric import family, field_families, label
from exporter.profiles import metrics as m
from exporter.profiles.part import ProfileSample, ProfilesPart


class ProfileCollector:
    specs = m.PROFILE_METRICS

    def render(self, part: ProfilesPart) -> Iterator[Metric]:
        latest = part.samples
        yield from field_families(m.PROFILE_GAUGES, latest, _labels)  # a field the export lacks is absent, never 0 or -1
        yield _memcpy_kinds(latest)
        yield _operators(latest)
        dropped = family(m.PROFILES_DROPPED)
        for reason, count in part.dropped:
            dropped.add_metric([reason], count)
        yield dropped


def _labels(summary: ProfileSample) -> list[str]:
    return [summary.job_name, label(summary.rank)]


def _memcpy_kinds(latest: Iterable[ProfileSample]) -> Metric:
    metric = family(m.PROFILE_MEMCPY_KIND)
    for summary in latest:
        for kind, ratio in summary.memcpy_kind_ratios:
            metric.add_metric(_labels(summary) + [kind], ratio)
    return metric


def _operators(latest: Iterable[ProfileSample]) -> Metric:
    metric = family(m.PROFILE_OPERATOR)
    for summary in latest:
        for position, share in enumerate(summary.top_operators, start=1):
            metric.add_metric(_labels(summary) + [share.op_type, str(position)], share.ratio)
    return metric
