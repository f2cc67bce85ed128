"""The capacity report's goodput from Prometheus, over the report's own window and steps: each
rank's growth of npu_job_goodput_seconds_total, of npu_job_badput_seconds_total by kind and of
npu_job_disruptions_total in each step, the devices npu_job_info named and the namespaces of
the pods on them (npu_pod_info) in each step. Per-series answers, one point per step: a month at
1-hour steps is 720 points a series, whatever the scrape interval.

The growth is the difference of each counter's last value in consecutive steps (a drop is a
reset: the new value is the growth), not increase() per step: that loses what a counter gained
between one step's last sample and the next step's first, which for a restart counter (a step
of 1) is the whole restart. From the step before the window (the baseline, not counted); a
counter that first appears within the window counts from zero, so a rank's first start-up, in
its first sample, is not lost."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from exporter.diagnostics.goodput import GOODPUT, GoodputInput, RankKey
from exporter.diagnostics.promapi import PrometheusClient, Series, promql_duration, selector
from exporter.jobs.metrics import JOB_BADPUT, JOB_DISRUPTIONS, JOB_GOODPUT, JOB_INFO
from exporter.pods.metrics import POD_INFO

RANK = "instance, job_name, rank"
GOODPUT_QUERIES = 5  # for the progress line: goodput, badput, restarts, the ranks' chips, the chips' pods


def goodput_queries(matchers: str, step: float) -> dict[str, str]:
    s = promql_duration(step)
    return {
        "goodput": f"last_over_time({selector(JOB_GOODPUT.name, matchers)}[{s}])",
        "badput": f"last_over_time({selector(JOB_BADPUT.name, matchers)}[{s}])",
        "restarts": f"last_over_time({selector(JOB_DISRUPTIONS.name, matchers)}[{s}])",
        "ranks' chips": f"group by ({RANK}, device) (last_over_time({selector(JOB_INFO.name, matchers)}[{s}]))",
        "chips' pods": f"group by (instance, device, namespace) (last_over_time({selector(POD_INFO.name, matchers)}[{s}]))",
    }


def read_goodput(
    client: PrometheusClient, start: float, end: float, step: float, matchers: str, progress: Callable[[str], None] | None = None
) -> GoodputInput:
    """Raises PrometheusError as the report's other reads do."""
    queries = goodput_queries(matchers, step)
    answers: dict[str, list[Series]] = {}
    baseline = start - step
    with client.ranges(list(queries.values()), baseline, end, step) as read:
        for what in queries:
            if progress:
                progress(what)
            answers[what] = next(read)

    def rank(s: Series) -> RankKey:
        return (s.labels.get("instance", ""), s.labels.get("job_name", ""), s.labels.get("rank", ""))

    parts: dict[RankKey, dict[str, dict[float, float]]] = {}
    for what in ("goodput", "badput"):
        for s in answers[what]:
            part = GOODPUT if what == "goodput" else s.labels.get("kind", "")
            steps = parts.setdefault(rank(s), {}).setdefault(part, {})
            for t, v in growth(s.points, baseline):
                steps[t] = steps.get(t, 0.0) + v
    restarts: dict[RankKey, float] = {}
    for s in answers["restarts"]:
        restarts[rank(s)] = restarts.get(rank(s), 0.0) + sum(v for _, v in growth(s.points, baseline))
    devices: dict[RankKey, dict[float, frozenset[str]]] = {}
    for s in answers["ranks' chips"]:
        by_step = devices.setdefault(rank(s), {})
        for t, _ in s.points:
            if t > baseline:
                by_step[t] = by_step.get(t, frozenset()) | {s.labels.get("device", "")}
    pods: dict[tuple[str, str], dict[float, frozenset[str]]] = {}
    for s in answers["chips' pods"]:
        by_step = pods.setdefault((s.labels.get("instance", ""), s.labels.get("device", "")), {})
        for t, _ in s.points:
            if t > baseline:
                by_step[t] = by_step.get(t, frozenset()) | {s.labels.get("namespace", "")}
    return GoodputInput(parts, restarts, devices, pods)


def growth(points: Iterable[tuple[float, float]], baseline: float) -> list[tuple[float, float]]:
    """(step end, what a counter gained in that step) from its last value per step: the difference
    to its previous value (a drop: a reset, the new value), or its value where it has none
    before (it appeared within the window); the point at ``baseline`` only sets where it starts."""
    out: list[tuple[float, float]] = []
    previous: float | None = None
    for t, v in points:
        if t > baseline:
            gained = v if previous is None or v < previous else v - previous
            if gained > 0:
                out.append((t, gained))
        previous = v
    return out
