"""Observations from exposition text: one exporter's /metrics, or the local node's sources run
in-process and rendered through the same collectors.

One scrape gives one moment: chip utilization as read, job means since each process started
(counter totals), no swing and no idle-gap rate. Several scrapes (``--samples N``) give the
spread of utilization and the jobs' rates between the first and the last scrape.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from exporter.diagnostics import hardware, profile_indicators
from exporter.diagnostics.goodput_checks import shares
from exporter.diagnostics.httpclient import Deadline, HttpFailure, MiB, fetch
from exporter.diagnostics.model import (
    CannotDiagnose,
    ChipStats,
    HardwareReadings,
    JobStats,
    Observations,
    PageCount,
)
from exporter.diagnostics.prom_reader import profile_summary
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
from exporter.npusmi.metrics import AICORE, ECC_ISOLATED_PAGES, PROCESS_MEMORY, UP
from exporter.pods.metrics import POD_INFO
from exporter.profiles.indicators import OperatorShare, ProfileSummary
from exporter.profiles.metrics import PROFILE_OPERATOR

Labels = tuple[tuple[str, str], ...]
# One node's exporter serves well under 1 MiB (8 chips with jobs and profiles: about 300 KiB).
# Parsing costs about 20 times the text in memory and a second per MiB, so a larger answer is
# refused rather than parsed: 4 MiB parse in about 100 MB.
MAX_EXPOSITION_BYTES = 4 * MiB
SUM, COUNT = JOB_ITERATION_DURATION.name + "_sum", JOB_ITERATION_DURATION.name + "_count"


@dataclass(frozen=True)
class Scrape:
    at: float  # unix time of the scrape
    samples: tuple[tuple[str, Labels, float], ...]  # (sample name, sorted labels, value)

    def values(self, name: str) -> list[tuple[dict[str, str], float]]:
        return [(dict(labels), value) for sample, labels, value in self.samples if sample == name]


def parse_exposition(text: str, at: float, origin: str) -> Scrape:
    """Prometheus text format (what /metrics serves) into samples; CannotDiagnose if garbled."""
    from prometheus_client.parser import text_string_to_metric_families

    try:
        samples = tuple(
            (s.name, tuple(sorted(s.labels.items())), float(s.value))
            for family in text_string_to_metric_families(text)
            for s in family.samples
        )
    except (ValueError, TypeError, IndexError) as exc:
        raise CannotDiagnose(f"{origin}: not Prometheus exposition text ({exc})") from None
    return Scrape(at, samples)


def fetch_metrics(url: str, timeout: float, deadline: Deadline | None = None) -> str:
    """GET an exporter's /metrics as text: at most ``timeout`` in total (and what is left of the
    command's ``deadline``), at most MAX_EXPOSITION_BYTES."""
    if not url.startswith(("http://", "https://")):
        raise CannotDiagnose(f"--metrics-url: expected an http(s):// URL, got {url!r}")
    try:
        answer = fetch(
            url,
            timeout=timeout,
            max_bytes=MAX_EXPOSITION_BYTES,
            what=url,
            deadline=deadline,
            headers={"Accept": "text/plain;version=0.0.4"},
        )
    except HttpFailure as exc:
        raise CannotDiagnose(str(exc)) from None
    if answer.status >= 400:
        raise CannotDiagnose(f"{url} answered HTTP {answer.status} {answer.reason}")
    return answer.body.decode("utf-8", errors="replace")


# --- scrapes -> observations (pure) -----------------------------------------------------------------


def observations(scrapes: Sequence[Scrape], source: str) -> Observations:
    if not scrapes:
        raise CannotDiagnose(f"{source}: nothing was read")
    last = scrapes[-1]
    chips = chips_from(scrapes)
    jobs = jobs_from(scrapes)
    profiles = profiles_from(last)
    notes = (
        (f"utilization swing: standard deviation of the {len(scrapes)} readings",)
        if len(scrapes) > 1
        else (
            "one reading: utilization swing (saw-tooth), job rates and new HCCS, SIO and PCIe errors (their alerts count new ones; "
            "a count since the driver started is shown undated) need several, e.g. --samples 7 --interval 10s",
        )
    )
    obs = Observations(source, _window(scrapes), chips, jobs, profiles, notes, hardware_readings(scrapes))
    if obs.empty:
        raise CannotDiagnose(
            f"{source}: no NPU data: no {AICORE.name}, npu_job_* or npu_profile_* series (is this a cann-exporter, "
            "and can it read npu-smi?)"
        )
    return obs


def hardware_readings(scrapes: Sequence[Scrape]) -> HardwareReadings:
    """The last scrape's hardware series; with several scrapes, the counters' increase between
    the first and the last (a counter that went down was reset: its last value is the increase).
    The chips expected are npu_expected_devices alone: the most listed over a few reads seconds
    apart says nothing of a chip lost before them."""
    last = scrapes[-1]
    latest = {name: tuple(last.values(name)) for name in hardware.LATEST}
    if len(scrapes) < 2:
        return HardwareReadings(latest)
    increases = {}
    for name in hardware.INCREASES:
        before = {tuple(sorted(labels.items())): value for labels, value in scrapes[0].values(name)}
        increases[name] = tuple(
            (labels, value - before[key] if value >= before.get(key, value + 1) else value)
            for labels, value in last.values(name)
            for key in [tuple(sorted(labels.items()))]
            if key in before
        )
    return HardwareReadings(latest, increases, last.at - scrapes[0].at)


def _window(scrapes: Sequence[Scrape]) -> str | None:
    if len(scrapes) < 2:
        return None
    return f"{len(scrapes)} samples over {scrapes[-1].at - scrapes[0].at:.0f}s"


def _chip_id(labels: dict[str, str]) -> tuple[str, str, str]:
    return (labels.get("npu", ""), labels.get("chip", ""), labels.get("device", ""))


def chips_from(scrapes: Sequence[Scrape]) -> tuple[ChipStats, ...]:
    series: dict[tuple[str, str, str], list[float]] = {}
    in_use: set[str] = set()
    for scrape in scrapes:
        for labels, value in scrape.values(AICORE.name):
            series.setdefault(_chip_id(labels), []).append(value)
        in_use |= _in_use(scrape)
    pages = [_pages(scrape) for scrape in scrapes]
    return tuple(
        replace(chip_stats(key, values, key[2] in in_use), isolated_pages=pages[-1].get(key, ()), new_isolated_pages=_new_pages(key, pages))
        for key, values in sorted(series.items(), key=lambda kv: _order(kv[0]))
    )


def _pages(scrape: Scrape) -> dict[tuple[str, str, str], tuple[PageCount, ...]]:
    out: dict[tuple[str, str, str], list[PageCount]] = {}
    for labels, value in scrape.values(ECC_ISOLATED_PAGES.name):
        out.setdefault(_chip_id(labels), []).append(PageCount(labels.get("memory", ""), labels.get("type", ""), value))
    return {key: tuple(sorted(counts, key=lambda p: (p.memory, p.type))) for key, counts in out.items()}


def _new_pages(key: tuple[str, str, str], pages: Sequence[dict[tuple[str, str, str], tuple[PageCount, ...]]]) -> float | None:
    """Pages isolated between the readings: the last total above the lowest (None: one reading)."""
    totals = [sum(p.pages for p in reading[key]) for reading in pages if key in reading]
    return totals[-1] - min(totals) if len(totals) >= 2 else None


def _in_use(scrape: Scrape) -> set[str]:
    """Devices with a process, a pod or a training job."""
    return {labels.get("device", "") for name in (PROCESS_MEMORY.name, POD_INFO.name, JOB_INFO.name) for labels, _ in scrape.values(name)}


def _order(key: tuple[str, str, str]) -> tuple[int, ...]:
    return tuple(int(p) if p.isdigit() else 1 << 30 for p in key)


def chip_stats(key: tuple[str, str, str], values: list[float], in_use: bool) -> ChipStats:
    stddev = statistics.pstdev(values) if len(values) >= 2 else None
    return ChipStats("", key[0], key[1], key[2], statistics.fmean(values), min(values), max(values), stddev, len(values), in_use)


def _job_id(labels: dict[str, str]) -> tuple[str, str]:
    return (labels.get("job_name", ""), labels.get("rank", ""))


@dataclass(frozen=True)
class _JobTotals:
    at: float
    sum: float | None = None
    count: float | None = None
    samples: float | None = None
    last: float | None = None
    phases: tuple[tuple[str, float], ...] = ()


def _spent(scrape: Scrape) -> dict[tuple[str, str], dict[str, float]]:
    """Each rank's goodput (key "") and badput seconds by kind, since the exporter has held it."""
    out: dict[tuple[str, str], dict[str, float]] = {}
    for labels, value in scrape.values(JOB_GOODPUT.name):
        out.setdefault(_job_id(labels), {})[""] = value
    for labels, value in scrape.values(JOB_BADPUT.name):
        out.setdefault(_job_id(labels), {})[labels.get("kind", "other")] = value
    return out


def _goodput(first: dict[str, float] | None, last: dict[str, float]) -> tuple[float | None, tuple[tuple[str, float], ...]]:
    """Shares between two readings, or since the rank was first held when they are one (or
    nothing was accounted between them, or a counter went back: a new exporter)."""
    if first is not None and first is not last:
        grown = {k: v - first.get(k, 0.0) for k, v in last.items()}
        if all(v >= 0 for v in grown.values()) and sum(grown.values()) > 0:
            last = grown
    return shares(last.get(""), {k: v for k, v in last.items() if k})


def _totals(scrape: Scrape) -> dict[tuple[str, str], _JobTotals]:
    sums, counts, samples, last = (
        {_job_id(labels): value for labels, value in scrape.values(name)}
        for name in (SUM, COUNT, JOB_SAMPLES.name, JOB_LAST_ITERATION.name)
    )
    phases: dict[tuple[str, str], dict[str, float]] = {}
    for labels, value in scrape.values(JOB_PHASE_SECONDS.name):
        phases.setdefault(_job_id(labels), {})[labels.get("phase", "other")] = value
    return {
        key: _JobTotals(
            scrape.at, sums.get(key), counts.get(key), samples.get(key), last.get(key), tuple(sorted(phases.get(key, {}).items()))
        )
        for key in dict.fromkeys([*sums, *counts, *samples, *last])
    }


def jobs_from(scrapes: Sequence[Scrape]) -> tuple[JobStats, ...]:
    """Rates between the first scrape that shows each rank and the last (its own lifetime in
    the readings); a rank in one scrape only: its means since it started reporting."""
    totals = [_totals(scrape) for scrape in scrapes]
    spent = [_spent(scrape) for scrape in scrapes]
    last, window = totals[-1], scrapes[-1].at - scrapes[0].at
    devices = {_job_id(labels): labels.get("device", "") for labels, _ in scrapes[-1].values(JOB_INFO.name)}
    mfu: dict[tuple[str, str], list[float]] = {}  # each reading is the exporter's last 60 s: their mean
    for scrape in scrapes:
        for labels, value in scrape.values(JOB_MFU.name):
            mfu.setdefault(_job_id(labels), []).append(value)
    out = []
    for key in sorted(last):
        now = last[key]
        before = next(t[key] for t in totals if key in t)
        if now.at > before.at and _grew(before, now):
            stats = replace(_rates(key, before, now), lifetime=now.at - before.at, window=window)
        else:
            stats = _since_start(key, now)
        readings = mfu.get(key)
        stats = replace(stats, device=devices.get(key), mfu=sum(readings) / len(readings) if readings else None)
        if key in spent[-1]:
            good, bad = _goodput(next((s[key] for s in spent if key in s), None), spent[-1][key])
            stats = replace(stats, goodput=good, badput=bad)
        out.append(stats)
    return tuple(out)


def _grew(before: _JobTotals, now: _JobTotals) -> bool:
    return before.count is not None and now.count is not None and now.count > before.count


def _age(totals: _JobTotals) -> float | None:
    return max(0.0, totals.at - totals.last) if totals.last is not None else None


def _since_start(key: tuple[str, str], t: _JobTotals) -> JobStats:
    """One scrape: means since the process started reporting (no rates)."""
    iteration = t.sum / t.count if t.sum is not None and t.count else None
    shares = tuple((p, v / t.sum) for p, v in t.phases) if t.sum else ()
    return JobStats("", key[0], key[1], iteration, None, None, None, shares, _age(t))


def _rates(key: tuple[str, str], a: _JobTotals, b: _JobTotals) -> JobStats:
    dt = b.at - a.at
    d_sum = (b.sum or 0.0) - (a.sum or 0.0)
    d_count = (b.count or 0.0) - (a.count or 0.0)
    d_samples = (b.samples - a.samples) if b.samples is not None and a.samples is not None else None
    before = dict(a.phases)
    shares = tuple((p, (v - before.get(p, 0.0)) / d_sum) for p, v in b.phases) if d_sum > 0 else ()
    return JobStats(
        "",
        key[0],
        key[1],
        d_sum / d_count if d_count else None,
        d_count / dt,
        d_samples / dt if d_samples is not None else None,
        d_sum / dt,
        shares,
        _age(b),
    )


def profiles_from(scrape: Scrape) -> tuple[ProfileSummary, ...]:
    values: dict[tuple[str, str, str], dict[str, float]] = {}
    for row in profile_indicators.ROWS:
        if row.spec is None:
            continue
        for labels, value in scrape.values(row.spec.name):
            values.setdefault(("", *_job_id(labels)), {})[row.field] = value
    operators: dict[tuple[str, str, str], dict[int, OperatorShare]] = {}
    for labels, value in scrape.values(PROFILE_OPERATOR.name):
        position = labels.get("position", "")
        if position.isdigit() and math.isfinite(value):
            operators.setdefault(("", *_job_id(labels)), {})[int(position)] = OperatorShare(labels.get("op_type", "?"), 0.0, 0, value)
    return tuple(
        profile_summary(key, values[key], tuple(operators.get(key, {})[p] for p in sorted(operators.get(key, {}))))
        for key in sorted(values)
    )


def any_chip_read(scrapes: Iterable[Scrape]) -> bool:
    return any(value == 1 for scrape in scrapes for _, value in scrape.values(UP.name))
