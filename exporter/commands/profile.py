"""`cann-exporter profile PATH`: the profile indicators of one export (or a directory of them)
with the health table's verdict per indicator (docs/tuning.md), as a terminal table or `--json`.

Exit codes: 0 when at least one profile was reported, 2 when PATH holds no readable profile.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, TextIO

from exporter.core.errors import EXIT_OK, EXIT_USAGE
from exporter.diagnostics.profile_indicators import ROWS, indicator_for, load_summaries
from exporter.profiles.indicators import ProfileSummary
from exporter.profiles.state import summary_to_dict
from exporter.thresholds.table import (
    Indicator,
    ThresholdError,
    Thresholds,
    load_thresholds,
)

EXIT_NO_PROFILE = EXIT_USAGE


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("path", metavar="PATH", help="a profiler export (*_ascend_pt, *_ascend_ms, PROF_*) or a directory of them")
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    parser.add_argument("--top", type=_positive_int, default=5, metavar="K", help="operator types to list (default: 5)")
    parser.add_argument("--per-step", action="store_true", help="also report every step on its own")
    parser.add_argument("--thresholds", metavar="FILE", default=None, help="threshold table (default: the packaged one)")


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def run(args: argparse.Namespace, out: TextIO | None = None, err: TextIO | None = None) -> int:
    out, err = out or sys.stdout, err or sys.stderr
    try:
        table = load_thresholds(getattr(args, "thresholds", None))
    except ThresholdError as exc:
        print(f"cann-exporter profile: bad threshold table: {exc}", file=err)
        return EXIT_NO_PROFILE
    summaries, problems, found_any = load_summaries(args.path, getattr(args, "top", 5), getattr(args, "per_step", False))
    for problem in problems:
        print(f"cann-exporter profile: {problem}", file=err)
    if not summaries:
        if not problems or found_any:
            print(
                f"cann-exporter profile: no readable profile under {args.path} "
                "(looked for *_ascend_pt, *_ascend_ms, PROF_*, cluster_step_trace_time.csv)",
                file=err,
            )
        return EXIT_NO_PROFILE
    if getattr(args, "json", False):
        json.dump(_json(summaries, problems, table), out, indent=2)
        out.write("\n")
    else:
        out.write(render(summaries, table))
    return EXIT_OK


# --- terminal table ---------------------------------------------------------------------------


def render(summaries: list[ProfileSummary], table: Thresholds) -> str:
    return "\n".join(_render_one(s, table) for s in summaries)


def _render_one(summary: ProfileSummary, table: Thresholds) -> str:
    lines = [_heading(summary), f"{'indicator':<32}{'value':>10}  {'healthy':<9}{'abnormal':<10}verdict"]
    for row in ROWS:
        value = getattr(summary, row.field)
        indicator = indicator_for(row, table)
        lines.append(_line(row.title, value, row.field, indicator))
        if row.field == "memcpy_ratio":
            lines += [f"  {kind:<30}{_percent(ratio):>10}" for kind, ratio in summary.memcpy_kind_ratios]
    lines += _operators(summary)
    lines += [f"note: {issue}" for issue in summary.issues]
    return "\n".join(lines) + "\n"


def _heading(summary: ProfileSummary) -> str:
    rank = "?" if summary.rank is None else str(summary.rank)
    steps = ", ".join(map(str, summary.steps)) if summary.steps else "whole capture"
    parts = [f"job {summary.job_name}", f"rank {rank}", summary.producer] + ([summary.level] if summary.level else [])
    return f"== {' · '.join(parts)} · steps {steps} ({summary.step_count})\n   {summary.path}"


def _line(title: str, value: float | None, field: str, indicator: Indicator | None) -> str:
    text = "n/a" if value is None else (f"{value * 1000:.2f} ms" if field.endswith("_seconds") else _percent(value))
    healthy = indicator.healthy_text() if indicator else ""
    abnormal = indicator.abnormal_text() if indicator else ""
    verdict = indicator.verdict(value) if indicator and value is not None else ""
    return f"{title:<32}{text:>10}  {healthy:<9}{abnormal:<10}{verdict}".rstrip()


def _percent(value: float) -> str:
    return f"{value * 100:.1f}%"


def _operators(summary: ProfileSummary) -> list[str]:
    if not summary.top_operators:
        return []
    lines = [f"top operator types (share of device kernel time, communication excluded; from {summary.operator_source}):"]
    for position, op in enumerate(summary.top_operators, start=1):
        lines.append(f"  {position:>2}  {op.op_type:<40}{_percent(op.ratio):>8}  {op.time_us:>12.1f} us  x{op.count}")
    if summary.longest_kernel and summary.longest_kernel_seconds is not None:
        lines.append(f"longest kernel: {summary.longest_kernel} ({summary.longest_kernel_seconds * 1e6:.1f} us)")
    return lines


# --- JSON -------------------------------------------------------------------------------------------


def _json(summaries: list[ProfileSummary], problems: list[str], table: Thresholds) -> dict[str, Any]:
    profiles = []
    for summary in summaries:
        item = summary_to_dict(summary)
        verdicts = {}
        for row in ROWS:
            indicator, value = indicator_for(row, table), getattr(summary, row.field)
            if indicator is not None and value is not None:
                verdicts[row.field] = {
                    "indicator": indicator.id,
                    "verdict": indicator.verdict(value),
                    "healthy": indicator.healthy,
                    "abnormal": indicator.abnormal,
                    "direction": indicator.direction,
                }
        item["verdicts"] = verdicts
        profiles.append(item)
    return {"profiles": profiles, "problems": problems}
