"""Observations from a Prometheus server over a time window (instant queries at the window's
end, each averaging or rating over the window). The PromQL mirrors the generated rules
(exporter/generate/*_rules.py) so the numbers are the ones the alerts look at.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from itertools import pairwise
from typing import Any

from exporter.core.selfmetrics import (
    BUILD_INFO,  # served by every exporter on every scrape
)
from exporter.core.values import format_duration
from exporter.diagnostics import hardware, profile_indicators
from exporter.diagnostics.goodput_checks import shares
from exporter.diagnostics.model import (
    CannotDiagnose,
    ChipStats,
    Gap,
    HardwareReadings,
    JobStats,
    Observations,
    PageCount,
)
from exporter.diagnostics.promapi import (
    PrometheusClient,
    PrometheusError,
    Sample,
    promql_duration,
    selector,
)
from exporter.jobs.metrics import (
    JOB_BADPUT,
    JOB_GOODPUT,
    JOB_INFO,
    JOB_ITERATION_DURATION,
    JOB_LAST_ITERATION,
    JOB_MFU,
    JOB_PHASE_SECONDS,
    JOB_SAMPLES,
)
from exporter.npusmi.metrics import AICORE, DEVICES, ECC_ISOLATED_PAGES, PROCESS_MEMORY
from exporter.pods.metrics import POD_INFO
from exporter.profiles.indicators import OperatorShare, ProfileSummary
from exporter.profiles.metrics import PROFILE_LAST_UPDATE, PROFILE_OPERATOR
from exporter.thresholds.alert_facts import profile_stale
from exporter.thresholds.table import Thresholds, duration_seconds

UTIL = AICORE.name
ChipKey = tuple[str, str, str, str]  # instance, npu, chip, device
JobKey = tuple[str, str, str]  # instance, job_name, rank
Progress = Callable[[str], None]
HELD_POINTS = 60  # resolution of "how much of the window holds data": a sixtieth of it


@dataclass(frozen=True)
class Window:
    end: float  # unix seconds
    seconds: float  # length of the window

    @property
    def range(self) -> str:
        return promql_duration(self.seconds)

    def describe(self) -> str:
        return f"{format_duration(self.seconds)} ending {_when(self.end)}"


def _when(t: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(t))


def read_prometheus(
    client: PrometheusClient, window: Window, matchers: str, table: Thresholds, progress: Progress | None = None
) -> Observations:
    """Raises CannotDiagnose when Prometheus fails or holds no NPU data for the selector."""
    ask = _Asker(client, window, progress)
    try:
        chips = read_chips(ask, matchers, table)
        jobs = read_jobs(ask, matchers)
        profiles, stale = read_profiles(ask, matchers, table)
        held = held_since(client, window, matchers, progress) if (chips or jobs or profiles) else None
        readings = (
            read_hardware(ask, matchers, client, window, _missing_lookback(table)) if (chips or jobs or profiles) else HardwareReadings()
        )
    except PrometheusError as exc:
        raise CannotDiagnose(str(exc)) from None
    where = f" matching {{{matchers}}}" if matchers else ""
    if not (chips or jobs or profiles):
        old = f" (only profiles older than the {table.alerting.profile_max_age} the alerts accept)" if stale else ""
        raise CannotDiagnose(
            f"Prometheus at {client.url} has no NPU data{where} in the {window.describe()}: no "
            f"{UTIL}, npu_job_iteration_duration_seconds or npu_profile_* series{old}. Check --selector and --range, "
            "and that Prometheus scrapes cann-exporter"
        )
    swing = promql_duration(min(_unstable_range(table), window.seconds))
    notes = (
        [f"utilization swing: standard deviation over {swing} windows, averaged over the window (as NPUUtilizationUnstable)"]
        if chips
        else [f"no {UTIL} series{where}: chips not diagnosed"]
    )
    notes += stale
    described = window.describe()
    if held is not None:
        covered = window.end - held
        described += f" (data for the last {format_duration(covered)} only)"
        notes.insert(
            0,
            f"less data than asked: --range {format_duration(window.seconds)}, but Prometheus holds NPU "
            f"data{where} only from about {_when(held)}, the last {format_duration(covered)}: averages "
            "and rates cover that time, and the verdicts judge it",
        )
    return Observations(
        f"Prometheus {client.url}" + (f" {{{matchers}}}" if matchers else ""), described, chips, jobs, profiles, tuple(notes), readings
    )


def held_since(client: PrometheusClient, window: Window, matchers: str, progress: Progress | None = None) -> float | None:
    """When the window holds NPU data (chips, jobs or profiles) only from some time on: about
    when (the start of the sixtieth of the window where it begins); None when it is all held."""
    if progress:
        progress("history held")
    step = max(1.0, round(window.seconds / HELD_POINTS))
    # count_over_time drops the names, so each metric is counted on its own; any of them is data
    query = " or ".join(
        f"count(count_over_time({selector(name, matchers)}[{promql_duration(step)}]))"
        for name in (UTIL, JOB_ITERATION_DURATION.name + "_count", PROFILE_LAST_UPDATE.name)
    )
    start = window.end - window.seconds + step
    held = client.range(query, start, window.end, step)
    if not held:
        return None
    begins = min(t for t, _ in held[0].points) - step
    return begins if begins > start else None


def read_hardware(ask: _Asker, matchers: str, client: PrometheusClient, window: Window, lookback: float = 86400.0) -> HardwareReadings:
    """The hardware series at their latest value in the window, the counters' increase over
    it, the most chips each exporter listed within ``lookback`` before the window's end
    (NPUMissing's fallback), and the gaps in the exporter's own samples."""
    r = window.range
    latest = {name: _series(ask(f"last_over_time({selector(name, matchers)}[{r}])")) for name in hardware.LATEST}
    peak = f"max_over_time({selector(DEVICES.name, matchers)}[{promql_duration(lookback)}])"
    latest[hardware.PEAK_DEVICES] = _series(ask(peak))
    increases = {
        name: _series(ask(f"increase({selector(name, matchers, hardware.ONLY.get(name, ''))}[{r}])")) for name in hardware.INCREASES
    }
    return HardwareReadings(latest, increases, window.seconds, exporter_gaps(client, window, matchers))


def _series(samples: list[Sample]) -> tuple[tuple[dict[str, str], float], ...]:
    return tuple((s.labels, s.value) for s in samples)


GAP_STEP = 60.0  # seconds: longer than any sane scrape interval, so a step without a sample is an outage


def exporter_gaps(client: PrometheusClient, window: Window, matchers: str) -> tuple[Gap, ...]:
    """Stretches of the window (after each exporter's first sample) with no sample of the
    exporter's build info: a down exporter or node, or scrapes that failed."""
    step = max(GAP_STEP, round(window.seconds / 240))
    query = f"count by (instance) (count_over_time({selector(BUILD_INFO.name, matchers)}[{promql_duration(step)}]))"
    start = window.end - window.seconds + step
    out = []
    for series in client.range(query, start, window.end, step):
        times = sorted(t for t, _ in series.points)
        instance = series.labels.get("instance", "")
        for before, after in pairwise(times):
            if after - before > step * 1.5:
                out.append(Gap(instance, before, after - before - step))
        if window.end - times[-1] > step * 1.5:
            out.append(Gap(instance, times[-1], window.end - times[-1], trailing=True))
    return tuple(out)


class _Asker:
    def __init__(self, client: PrometheusClient, window: Window, progress: Progress | None) -> None:
        self.client, self.window, self.progress = client, window, progress

    def __call__(self, query: str) -> list[Sample]:
        if self.progress:
            names = re.findall(r"\bnpu_[a-z0-9_]+", query)
            self.progress(names[0] if names else query[:40])
        return self.client.instant(query, self.window.end)


# --- chips ---------------------------------------------------------------------------------------


def _chip_key(labels: dict[str, str]) -> ChipKey:
    return (labels.get("instance", ""), labels.get("npu", ""), labels.get("chip", ""), labels.get("device", ""))


def _by_chip(samples: list[Sample]) -> dict[ChipKey, float]:
    return {_chip_key(s.labels): s.value for s in samples}


def read_chips(ask: _Asker, matchers: str, table: Thresholds) -> tuple[ChipStats, ...]:
    r = ask.window.range
    util = selector(UTIL, matchers)
    means = _by_chip(ask(f"avg_over_time({util}[{r}])"))
    if not means:
        return ()
    mins = _by_chip(ask(f"min_over_time({util}[{r}])"))
    maxs = _by_chip(ask(f"max_over_time({util}[{r}])"))
    counts = _by_chip(ask(f"count_over_time({util}[{r}])"))
    swing = promql_duration(min(_unstable_range(table), ask.window.seconds))
    stddevs = _by_chip(ask(f"avg_over_time(stddev_over_time({util}[{swing}])[{r}:{swing}])"))
    in_use = read_in_use(ask, matchers)
    pages, new_pages = read_isolated_pages(ask, matchers)
    return tuple(
        ChipStats(
            key[0],
            key[1],
            key[2],
            key[3],
            mean,
            mins.get(key),
            maxs.get(key),
            stddevs.get(key) if counts.get(key, 0) >= 2 else None,
            int(counts.get(key, 1)),
            (key[0], key[3]) in in_use,
            pages.get(key, ()),
            new_pages.get(key),
        )
        for key, mean in sorted(means.items(), key=lambda kv: _sort_key(kv[0]))
    )


def read_isolated_pages(ask: _Asker, matchers: str) -> tuple[dict[ChipKey, tuple[PageCount, ...]], dict[ChipKey, float]]:
    """Each chip's isolated pages at the window's end, and how many it isolated within the
    window (above its lowest count, as NPUMemoryPagesIsolated's warning counts them)."""
    r, pages = ask.window.range, selector(ECC_ISOLATED_PAGES.name, matchers)
    out: dict[ChipKey, list[PageCount]] = {}
    for s in ask(f"last_over_time({pages}[{r}])"):
        out.setdefault(_chip_key(s.labels), []).append(PageCount(s.labels.get("memory", ""), s.labels.get("type", ""), s.value))
    if not out:
        return {}, {}
    new = _by_chip(ask(f"sum without (memory, type) (last_over_time({pages}[{r}]) - min_over_time({pages}[{r}]))"))
    return {k: tuple(sorted(v, key=lambda p: (p.memory, p.type))) for k, v in out.items()}, new


def _missing_lookback(table: Thresholds) -> float:
    spec = table.find("NPUMissing")
    return duration_seconds(str(spec.param("lookback", "1d"))) if spec is not None else 86400.0


def _unstable_range(table: Thresholds) -> float:
    spec = table.find("NPUUtilizationUnstable")
    return duration_seconds(spec.range) if spec is not None and spec.range else 600.0


def read_in_use(ask: _Asker, matchers: str) -> set[tuple[str, str]]:
    """(instance, device) of chips that had a process, a pod or a training job in the window."""
    r = ask.window.range
    out: set[tuple[str, str]] = set()
    for metric in (PROCESS_MEMORY.name, POD_INFO.name, JOB_INFO.name):
        for s in ask(f"count by (instance, device) (count_over_time({selector(metric, matchers)}[{r}]))"):
            out.add((s.labels.get("instance", ""), s.labels.get("device", "")))
    return out


def _sort_key(key: ChipKey) -> tuple[object, ...]:
    return (key[0], *(int(p) if p.isdigit() else 1 << 30 for p in key[1:]), key)


# --- training jobs (hooks) -----------------------------------------------------------------------


def _job_key(labels: dict[str, str]) -> JobKey:
    return (labels.get("instance", ""), labels.get("job_name", ""), labels.get("rank", ""))


def _by_job(samples: list[Sample]) -> dict[JobKey, float]:
    return {_job_key(s.labels): s.value for s in samples}


def read_jobs(ask: _Asker, matchers: str) -> tuple[JobStats, ...]:
    r = ask.window.range
    busy = _by_job(ask(f"rate({selector(JOB_ITERATION_DURATION.name + '_sum', matchers)}[{r}])"))
    rate = _by_job(ask(f"rate({selector(JOB_ITERATION_DURATION.name + '_count', matchers)}[{r}])"))
    if not (busy or rate):
        ages = _by_job(ask(f"time() - {selector(JOB_LAST_ITERATION.name, matchers)}"))
        return tuple(JobStats(k[0], k[1], k[2], seconds_since_last_iteration=v) for k, v in sorted(ages.items()))
    samples = _by_job(ask(f"rate({selector(JOB_SAMPLES.name, matchers)}[{r}])"))
    ages = _by_job(ask(f"time() - {selector(JOB_LAST_ITERATION.name, matchers)}"))
    phases: dict[JobKey, dict[str, float]] = {}
    query = f"sum by (instance, job_name, rank, phase) (rate({selector(JOB_PHASE_SECONDS.name, matchers)}[{r}]))"
    for s in ask(query):
        phases.setdefault(_job_key(s.labels), {})[s.labels.get("phase", "other")] = s.value
    lifetimes = read_lifetimes(ask, matchers)
    devices = {_job_key(s.labels): s.labels.get("device", "") for s in ask(f"last_over_time({selector(JOB_INFO.name, matchers)}[{r}])")}
    mfu = _by_job(ask(f"avg_over_time({selector(JOB_MFU.name, matchers)}[{r}])"))
    spent = read_goodput(ask, matchers)
    return tuple(
        replace(
            job_stats(
                key,
                busy.get(key),
                rate.get(key),
                samples.get(key),
                phases.get(key, {}),
                ages.get(key),
                lifetimes.get(key),
                ask.window.seconds,
            ),
            device=devices.get(key),
            mfu=mfu.get(key),
            goodput=spent.get(key, (None, ()))[0],
            badput=spent.get(key, (None, ()))[1],
        )
        for key in sorted(set(busy) | set(rate))
    )


def read_goodput(ask: _Asker, matchers: str) -> dict[JobKey, tuple[float | None, tuple[tuple[str, float], ...]]]:
    """Each rank's goodput share and badput shares over the window, from the counters' rates."""
    r = ask.window.range
    good = _by_job(ask(f"rate({selector(JOB_GOODPUT.name, matchers)}[{r}])"))
    bad: dict[JobKey, dict[str, float]] = {}
    for s in ask(f"rate({selector(JOB_BADPUT.name, matchers)}[{r}])"):
        kinds = bad.setdefault(_job_key(s.labels), {})
        kinds[s.labels.get("kind", "other")] = kinds.get(s.labels.get("kind", "other"), 0.0) + s.value
    return {key: shares(good.get(key), bad.get(key, {})) for key in set(good) | set(bad)}


def read_lifetimes(ask: _Asker, matchers: str) -> dict[JobKey, float]:
    """How long each rank iterated within the window: its last iteration's end at the window's
    end minus the earliest it held in the window (a job older than the window: about the window)."""
    last = selector(JOB_LAST_ITERATION.name, matchers)
    r = ask.window.range
    return _by_job(ask(f"last_over_time({last}[{r}]) - min_over_time({last}[{r}])"))


def job_stats(
    key: JobKey,
    busy: float | None,
    rate: float | None,
    samples: float | None,
    phases: dict[str, float],
    age: float | None,
    lifetime: float | None = None,
    window: float | None = None,
) -> JobStats:
    """A rank's numbers from its rates over the window: seconds in iterations per second,
    iterations per second, samples per second, phase seconds per second. A rank that reported
    for only part of the window is judged over that part: rate() spreads its increase over the
    whole window, so the rates are scaled back to its lifetime."""
    if lifetime is not None and window:
        lifetime = min(max(lifetime, 0.0), window)
        scale = window / lifetime if lifetime > 0 else 1.0
        busy, rate, samples = (v * scale if v is not None else None for v in (busy, rate, samples))
        phases = {phase: seconds * scale for phase, seconds in phases.items()}  # shares against the scaled busy time
    iteration = busy / rate if busy is not None and rate else None
    shares = tuple((p, v / busy) for p, v in sorted(phases.items())) if busy else ()
    return JobStats(key[0], key[1], key[2], iteration, rate, samples, busy, shares, age, lifetime, window)


# --- profiles (npu_profile_* gauges) -------------------------------------------------------------


def read_profiles(ask: _Asker, matchers: str, table: Thresholds) -> tuple[tuple[ProfileSummary, ...], list[str]]:
    """The latest profile of each job and rank in the window, and a note for each one left out
    because it is older than the profile alerts accept (their freshness rule, at the window's end)."""
    r = ask.window.range
    values: dict[JobKey, dict[str, float]] = {}
    for row in profile_indicators.ROWS:
        if row.spec is None:
            continue
        for s in ask(f"last_over_time({selector(row.spec.name, matchers)}[{r}])"):
            values.setdefault(_job_key(s.labels), {})[row.field] = s.value
    if not values:
        return (), []
    max_age = table.alerting.profile_max_age
    updated = f"last_over_time({selector(PROFILE_LAST_UPDATE.name, matchers)}[{r}])"
    ages = {_job_key(s.labels): s.value for s in ask(profile_stale(max_age, updated))}
    notes = [
        f"profile of job {key[1]} rank {key[2] or '?'}"
        + (f" ({key[0]})" if key[0] else "")
        + f" not judged: {format_duration(ages[key])} old at the window's end, older than the {max_age} "
        "the profile alerts accept (alerting.profile_max_age)"
        for key in sorted(ages)
        if key in values
    ]
    values = {k: v for k, v in values.items() if k not in ages}
    if not values:
        return (), notes
    operators = _operators(
        ask(selector(PROFILE_OPERATOR.name, matchers)) or ask(f"last_over_time({selector(PROFILE_OPERATOR.name, matchers)}[{r}])")
    )
    return tuple(profile_summary(key, values[key], operators.get(key, ())) for key in sorted(values)), notes


def _operators(samples: list[Sample]) -> dict[JobKey, tuple[OperatorShare, ...]]:
    by_key: dict[JobKey, dict[int, OperatorShare]] = {}
    for s in samples:
        position = s.labels.get("position", "")
        if not position.isdigit():
            continue
        slot = by_key.setdefault(_job_key(s.labels), {})
        if int(position) not in slot:
            slot[int(position)] = OperatorShare(s.labels.get("op_type", "?"), 0.0, 0, s.value)
    return {k: tuple(v[p] for p in sorted(v)) for k, v in by_key.items()}


def profile_summary(key: JobKey, values: Mapping[str, Any], operators: tuple[OperatorShare, ...]) -> ProfileSummary:
    """A summary from the npu_profile_* gauges (``values``: ProfileSummary field -> value)."""
    rank = int(key[2]) if key[2].isdigit() else None
    summary = ProfileSummary(job_name=key[1], rank=rank, path=key[0], producer="metrics", top_operators=operators)
    return replace(summary, **values)
