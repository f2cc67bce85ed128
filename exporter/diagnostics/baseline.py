"""Performance baselines (docs/tuning.md, 'Baselines'): a job's iteration time and throughput saved
to a file, and later runs compared with it.

Verdicts use the NPUIterationTimeRegression entry of the threshold table: a run whose time per
iteration (or per sample) is more than ``threshold`` (10%) above the baseline is a regression
(abnormal, the alert's own rule); a run less than ``params.speedup`` (10%) faster than the
baseline is flagged (warning); anything faster is healthy.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from exporter.core.errors import ReasonError
from exporter.core.inputfile import MiB, read_text_input
from exporter.core.jsontext import parse_json
from exporter.diagnostics.model import (
    BASELINE,
    RATIO,
    CannotDiagnose,
    Finding,
    JobStats,
)
from exporter.profiles.indicators import ProfileSummary
from exporter.thresholds.table import ABNORMAL, HEALTHY, WARNING, Thresholds

KIND, VERSION = "cann-exporter-baseline", 1
ALERT = "NPUIterationTimeRegression"
MAX_BASELINE_BYTES = 16 * MiB  # a baseline holds a few numbers per job


@dataclass(frozen=True)
class JobPerf:
    """A job's speed over all its ranks: mean iteration time and total throughput."""

    job_name: str
    iteration_seconds: float | None = None
    samples_per_second: float | None = None
    ranks: int = 0


# --- current performance from observations (pure) ----------------------------------------------


def job_performance(jobs: Iterable[JobStats], profiles: Iterable[ProfileSummary] = ()) -> dict[str, JobPerf]:
    """Per job name: iteration time weighted by iterations (hooks), else the profiles' mean step."""
    grouped: dict[str, list[JobStats]] = {}
    for job in jobs:
        grouped.setdefault(job.job_name, []).append(job)
    out = {name: _from_hooks(name, ranks) for name, ranks in grouped.items()}
    by_profile: dict[str, list[float]] = {}
    for summary in profiles:
        if summary.step_duration_seconds is not None:
            by_profile.setdefault(summary.job_name, []).append(summary.step_duration_seconds)
    for name, steps in by_profile.items():
        if name not in out or out[name].iteration_seconds is None:
            out[name] = JobPerf(name, sum(steps) / len(steps), None, len(steps))
    return {k: v for k, v in sorted(out.items()) if v.iteration_seconds is not None or (v.samples_per_second or 0) > 0}


def _from_hooks(name: str, ranks: list[JobStats]) -> JobPerf:
    weighted = [
        (j.iteration_seconds, j.iterations_per_second) for j in ranks if j.iteration_seconds is not None and j.iterations_per_second
    ]
    iteration: float | None
    if weighted:
        total = sum(rate for _, rate in weighted)
        iteration = sum(sec * rate for sec, rate in weighted) / total
    else:
        plain = [j.iteration_seconds for j in ranks if j.iteration_seconds is not None]
        iteration = sum(plain) / len(plain) if plain else None
    throughputs = [j.samples_per_second for j in ranks if j.samples_per_second is not None]
    return JobPerf(name, iteration, sum(throughputs) if throughputs else None, len(ranks))


# --- the file ------------------------------------------------------------------------------------


def baseline_document(perf: Mapping[str, JobPerf], source: str, window: str | None, now: float | None = None) -> dict[str, Any]:
    jobs: dict[str, Any] = {}
    for name, item in perf.items():
        entry: dict[str, Any] = {"ranks": item.ranks}
        if item.iteration_seconds is not None:
            entry["iteration_seconds"] = item.iteration_seconds
        if item.samples_per_second is not None:
            entry["samples_per_second"] = item.samples_per_second
        jobs[name] = entry
    created = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() if now is None else now))
    return {"kind": KIND, "version": VERSION, "created": created, "source": source, "window": window, "jobs": jobs}


def save_baseline(path: Path, document: Mapping[str, Any]) -> None:
    """Write atomically (a temp file renamed over the target)."""
    tmp = path.with_name(path.name + ".tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(json.dumps(document, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        tmp.replace(path)
    except OSError as exc:
        raise CannotDiagnose(f"baseline {path}: cannot write: {exc.strerror or exc}") from None


def load_baseline(path: Path) -> dict[str, JobPerf]:
    try:
        data = parse_json(read_text_input(path, MAX_BASELINE_BYTES), str(path))
    except ReasonError as exc:
        raise CannotDiagnose(f"baseline {exc.message}; write one with --save-baseline") from None
    return parse_baseline(data, str(path))


def parse_baseline(data: Any, origin: str) -> dict[str, JobPerf]:
    """Validate a baseline document; CannotDiagnose names every problem."""
    if not isinstance(data, dict):
        raise CannotDiagnose(f"baseline {origin}: expected a JSON object written by --save-baseline")
    problems = []
    if data.get("kind") != KIND or data.get("version") != VERSION:
        problems.append(f"kind/version: expected {KIND!r} version {VERSION}, got {data.get('kind')!r} version {data.get('version')!r}")
    jobs = data.get("jobs")
    if not isinstance(jobs, dict) or not jobs:
        problems.append("jobs: missing or empty (no job to compare with)")
        jobs = {}
    out: dict[str, JobPerf] = {}
    for name, entry in jobs.items():
        perf = _entry(str(name), entry, problems)
        if perf is not None:
            out[str(name)] = perf
    if problems:
        raise CannotDiagnose(f"baseline {origin}: " + "; ".join(problems))
    return out


def _entry(name: str, entry: Any, problems: list[str]) -> JobPerf | None:
    if not isinstance(entry, dict):
        problems.append(f"jobs.{name}: expected an object")
        return None
    values: dict[str, float | None] = {}
    for key in ("iteration_seconds", "samples_per_second"):
        value = entry.get(key)
        if value is None:
            values[key] = None
        elif isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
            problems.append(f"jobs.{name}.{key}: expected a positive number, got {value!r}")
            return None
        else:
            values[key] = float(value)
    if values["iteration_seconds"] is None and values["samples_per_second"] is None:
        problems.append(f"jobs.{name}: has neither iteration_seconds nor samples_per_second")
        return None
    ranks = entry.get("ranks", 0)
    return JobPerf(name, values["iteration_seconds"], values["samples_per_second"], ranks if isinstance(ranks, int) else 0)


# --- comparison (pure) ---------------------------------------------------------------------------


def speedup_verdict(speedup: float, regression: float, target: float) -> str:
    """``speedup`` = baseline time / current time - 1 (per iteration or per sample)."""
    slowdown = 1.0 / (1.0 + speedup) - 1.0 if speedup > -1.0 else math.inf
    if slowdown > regression:
        return ABNORMAL
    if speedup < target:
        return WARNING
    return HEALTHY


def compare(current: Mapping[str, JobPerf], baseline: Mapping[str, JobPerf], table: Thresholds) -> tuple[list[Finding], list[str]]:
    """Findings for every job in both, and notes on jobs only in one. Raises CannotDiagnose
    when no job can be compared."""
    regression, target = regression_bounds(table)
    findings: list[Finding] = []
    for name in sorted(set(current) & set(baseline)):
        findings += _compare_job(current[name], baseline[name], regression, target)
    if not findings:
        have = ", ".join(sorted(current)) or "none"
        raise CannotDiagnose(
            f"baseline: none of its jobs ({', '.join(sorted(baseline))}) has iteration time or throughput in "
            f"this data (jobs found: {have}); npu_job_iteration_duration_seconds / npu_job_samples_total or a "
            "profile of the same job name is needed"
        )
    notes = [f"baseline: job {name} has no data here" for name in sorted(set(baseline) - set(current))]
    return findings, notes


def regression_bounds(table: Thresholds) -> tuple[float, float]:
    try:
        spec = table.alert(ALERT)
    except KeyError:
        raise CannotDiagnose(f"the threshold table has no {ALERT} entry (its threshold is the regression bound)") from None
    regression = spec.threshold if spec.threshold is not None else 0.10
    return float(regression), float(spec.param("speedup", 0.10))


def _compare_job(now: JobPerf, base: JobPerf, regression: float, target: float) -> list[Finding]:
    bounds = f"healthy: ≥ {target * 100:g}% faster; abnormal: > {regression * 100:g}% slower ({ALERT})"

    def finding(check: str, title: str, speedup: float, detail: str) -> Finding:
        verdict = speedup_verdict(speedup, regression, target)
        return Finding(BASELINE, check, title, f"job {now.job_name}", speedup, RATIO, verdict, None, ALERT, bounds, detail)

    out = []
    if now.iteration_seconds and base.iteration_seconds:
        speedup = base.iteration_seconds / now.iteration_seconds - 1.0
        detail = f"{_ms(now.iteration_seconds)} now, {_ms(base.iteration_seconds)} in the baseline"
        out.append(finding("speedup.iteration_time", "Speed-up of the iteration time", speedup, detail))
    if now.samples_per_second and base.samples_per_second:
        speedup = now.samples_per_second / base.samples_per_second - 1.0
        detail = f"{now.samples_per_second:.4g} samples/s now, {base.samples_per_second:.4g} in the baseline"
        out.append(finding("speedup.throughput", "Speed-up of the throughput", speedup, detail))
    return out


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.4g} ms"
