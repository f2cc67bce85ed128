"""`cann-exporter diagnose`: the three-level health report of docs/tuning.md (macro, meso, micro)
with a verdict per indicator from the threshold table, likely causes and tuning levers.

Inputs (one of): a Prometheus server over a window (`--prometheus URL --range 1h
[--selector '{instance="..."}']`), one exporter's /metrics (`--metrics-url`), a profile
export (`--profile-dir`), or by default the local node (its sources run once: npu-smi via
`--npu-smi PATH`, or `--simulate [SCENARIO]`). Baselines: `--save-baseline FILE` writes each
job's iteration time and throughput, `--baseline FILE` compares with them.

Exit status: 0 healthy (warnings allowed), 1 something abnormal, 2 could not diagnose.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from dataclasses import replace
from pathlib import Path
from typing import TextIO

from exporter.commands.cannot import exit_status
from exporter.commands.prometheus_args import OtherInput, PrometheusWindow, RequestBounds
from exporter.core.errors import ReasonError
from exporter.core.inputfile import read_text_input
from exporter.core.selfmetrics import SIMULATED
from exporter.core.yamlfile import MAX_FILE_BYTES
from exporter.diagnostics import argtypes, profile_indicators
from exporter.diagnostics import baseline as bl
from exporter.diagnostics.analysis import analyse
from exporter.diagnostics.model import CannotDiagnose, Observations, Report
from exporter.diagnostics.render import render_json, render_markdown, render_text
from exporter.node.simulate import ALL_SCENARIOS, MODEL_NAMES
from exporter.thresholds.table import Thresholds, load_thresholds

PROG = "cann-exporter diagnose"
MAX_SAMPLES = 360
WINDOW = PrometheusWindow("1h", "length of the window", "now-2d", '{instance="node-1:9435"}', prefix="Prometheus: ")
REQUESTS = RequestBounds(
    "15s",
    "bound on each HTTP request, connection to last byte",
    "--prometheus, --metrics-url: bound on all requests together (default: none beyond --timeout per request)",
)


# --- arguments ------------------------------------------------------------------------------------


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = (__doc__ or "").split("\n\n")[0].replace("\n", " ")
    source = parser.add_argument_group("input (one of; default: the local node)")
    WINDOW.add_arguments(
        source,
        (
            OtherInput("--metrics-url", "URL", "one exporter's /metrics, e.g. http://node-1:9435/metrics"),
            OtherInput("--profile-dir", "DIR", "a torch_npu/msprof/MindSpore profile export or a directory of them"),
        ),
    )
    source.add_argument("--npu-smi", metavar="PATH", default=None, help="local node: the npu-smi binary")
    source.add_argument(
        "--simulate",
        nargs="?",
        const="healthy",
        default=None,
        choices=ALL_SCENARIOS,
        metavar="SCENARIO",
        help=f"local node: the built-in simulator ({', '.join(ALL_SCENARIOS)}; default healthy)",
    )
    source.add_argument("--simulate.model", dest="simulate_model", default=None, choices=MODEL_NAMES, help="simulated node model")
    source.add_argument("--config", metavar="FILE", default=None, help="local node: the exporter's YAML configuration")
    source.add_argument(
        "--samples",
        type=argtypes.bounded_int(1, MAX_SAMPLES),
        default=1,
        metavar="N",
        help=f"local node and --metrics-url: read N times (1..{MAX_SAMPLES}) for spread and rates (default: 1)",
    )
    source.add_argument(
        "--interval", type=argtypes.short_duration, default=10.0, metavar="DURATION", help="time between --samples reads (default: 10s)"
    )
    REQUESTS.add_arguments(source)
    source.add_argument("--job", action="append", default=None, metavar="NAME", help="only these training jobs (repeatable)")
    source.add_argument(
        "--top", type=argtypes.bounded_int(1, 1000), default=5, metavar="K", help="--profile-dir: operator types to list (default: 5)"
    )
    base = parser.add_argument_group("baselines (docs/tuning.md, 'Baselines')")
    base.add_argument("--save-baseline", metavar="FILE", help="write each job's iteration time and throughput to FILE")
    base.add_argument("--baseline", metavar="FILE", help="compare each job with FILE (written by --save-baseline)")
    output = parser.add_argument_group("output")
    output.add_argument("--format", choices=("text", "json", "markdown"), default="text", help="default: text")
    output.add_argument(
        "--color",
        choices=("auto", "always", "never"),
        default="auto",
        help="colour the text output (auto: on a terminal, unless NO_COLOR is set)",
    )
    output.add_argument("--all", action="store_true", help="list every chip and job, also on large clusters")
    output.add_argument("--thresholds", metavar="FILE", default=None, help="threshold table (default: the packaged one)")


# --- run ------------------------------------------------------------------------------------------


def run(args: argparse.Namespace, out: TextIO | None = None, err: TextIO | None = None) -> int:
    stdout, stderr = out or sys.stdout, err or sys.stderr
    return exit_status(PROG, stderr, lambda: diagnose(args, stdout, stderr))


def diagnose(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    table = load_thresholds(getattr(args, "thresholds", None))
    saved = bl.load_baseline(Path(args.baseline)) if getattr(args, "baseline", None) else None  # fail fast
    obs = only_jobs(read(args, table, err), getattr(args, "job", None))
    report = with_baselines(analyse(obs, table), obs, args, table, saved)
    out.write(render(report, table, args, out))
    return report.exit_code


def render(report: Report, table: Thresholds, args: argparse.Namespace, out: TextIO) -> str:
    fmt = getattr(args, "format", "text")
    if fmt == "json":
        return render_json(report, table)
    if fmt == "markdown":
        return render_markdown(report, table)
    return render_text(report, table, colour=use_colour(getattr(args, "color", "auto"), out), show_all=getattr(args, "all", False))


def use_colour(mode: str, stream: TextIO) -> bool:
    if mode != "auto":
        return mode == "always"
    if os.environ.get("NO_COLOR") or os.environ.get("TERM") == "dumb":
        return False
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


def read(args: argparse.Namespace, table: Thresholds, err: TextIO) -> Observations:
    if getattr(args, "prometheus", None):
        return read_prometheus(args, table, err)
    if getattr(args, "metrics_url", None):
        return read_metrics_url(args)
    if getattr(args, "profile_dir", None):
        return read_profile_dir(args.profile_dir, getattr(args, "top", 5))
    return read_local(args)


def read_prometheus(args: argparse.Namespace, table: Thresholds, err: TextIO) -> Observations:
    from exporter.diagnostics.progress import Progress
    from exporter.diagnostics.prom_reader import Window
    from exporter.diagnostics.prom_reader import read_prometheus as query

    client = REQUESTS.client(args)
    window = Window(*WINDOW.read(args))
    with Progress(err, "querying Prometheus") as progress:
        return query(client, window, getattr(args, "selector", ""), table, progress.step)


def read_metrics_url(args: argparse.Namespace) -> Observations:
    import time

    from exporter.diagnostics.scrape_reader import (
        fetch_metrics,
        observations,
        parse_exposition,
    )

    deadline = REQUESTS.deadline(args)
    interval = getattr(args, "interval", 10.0)
    scrapes = []
    for index in range(getattr(args, "samples", 1)):
        if index:
            if deadline.remaining() <= interval:
                raise CannotDiagnose(
                    f"{args.metrics_url}: did not finish within --deadline {deadline.seconds:g}s ({index} of the --samples read)"
                )
            time.sleep(interval)
        text = fetch_metrics(args.metrics_url, REQUESTS.timeout(args), deadline)
        scrapes.append(parse_exposition(text, time.time(), args.metrics_url))
    return observations(scrapes, f"exporter {args.metrics_url}")


def read_profile_dir(path: str, top: int) -> Observations:
    summaries, problems, _ = profile_indicators.load_summaries(path, top)
    if not summaries:
        why = "; ".join(problems) or "looked for *_ascend_pt, *_ascend_ms, PROF_*, cluster_step_trace_time.csv"
        raise CannotDiagnose(f"no readable profile under {path}: {why}")
    return Observations(f"profile {path}", None, profiles=tuple(summaries), notes=tuple(problems))


def read_local(args: argparse.Namespace) -> Observations:
    from exporter.diagnostics.local_reader import local_settings, scrape_local
    from exporter.diagnostics.scrape_reader import observations

    config = getattr(args, "config", None)
    text = None
    if config:
        try:
            text = read_text_input(config, MAX_FILE_BYTES)
        except ReasonError as exc:
            raise CannotDiagnose(exc.message) from None
    # Every `-t` detail `serve` reads (health and error codes, ECC, the per-card reads whose
    # failures the hardware level names) and hccn_tool's network; no board reads (die ids).
    flags = {
        "npu_smi.path": getattr(args, "npu_smi", None),
        "simulator.scenario": getattr(args, "simulate", None),
        "simulator.model": getattr(args, "simulate_model", None),
        "npu_smi.board": False,
    }
    settings = local_settings(text, config or "config", os.environ, flags)
    scrapes = asyncio.run(scrape_local(settings, getattr(args, "samples", 1), getattr(args, "interval", 10.0)))
    if not settings.simulator.scenario:
        return observations(scrapes, "local node")
    obs = observations(scrapes, f"local node (simulator: {settings.simulator.scenario})")
    # asked for: the source says so, and CANNExporterSimulated's warning would only repeat it
    latest = {name: series for name, series in obs.hardware.latest.items() if name != SIMULATED.name}
    return replace(obs, hardware=replace(obs.hardware, latest=latest))


def only_jobs(obs: Observations, names: list[str] | None) -> Observations:
    if not names:
        return obs
    wanted = set(names)
    jobs = tuple(j for j in obs.jobs if j.job_name in wanted)
    profiles = tuple(p for p in obs.profiles if p.job_name in wanted)
    if not (jobs or profiles):
        known = sorted({j.job_name for j in obs.jobs} | {p.job_name for p in obs.profiles})
        raise CannotDiagnose(f"no data for job {', '.join(sorted(wanted))} (jobs found: {', '.join(known) or 'none'})")
    notes = tuple(n for n in obs.notes if not n.startswith(("utilization swing", "one reading")))
    notes += (f"--job {', '.join(sorted(wanted))}: chips not diagnosed",) if obs.chips else ()
    return replace(obs, chips=(), jobs=jobs, profiles=profiles, notes=notes)


# --- baselines --------------------------------------------------------------------------------------


def with_baselines(
    report: Report, obs: Observations, args: argparse.Namespace, table: Thresholds, saved: dict[str, bl.JobPerf] | None = None
) -> Report:
    current = bl.job_performance(obs.jobs, obs.profiles)
    findings, notes, extra = list(report.findings), list(report.notes), dict(report.extra)
    if saved is not None:
        compared, missing = bl.compare(current, saved, table)
        findings += compared
        notes += missing
        extra["baseline"] = args.baseline
    if getattr(args, "save_baseline", None):
        if not current:
            raise CannotDiagnose(
                f"nothing to save as a baseline: no job iteration time or throughput in {obs.source} "
                "(npu_job_iteration_duration_seconds / npu_job_samples_total from the hooks, or a profile's step time)"
            )
        bl.save_baseline(Path(args.save_baseline), bl.baseline_document(current, obs.source, obs.window))
        extra["baseline saved"] = f"{args.save_baseline} (jobs: {', '.join(current)})"
    return replace(report, findings=tuple(findings), notes=tuple(notes), extra=extra)
