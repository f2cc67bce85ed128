"""A diagnosis report as terminal text (tables, colour on a TTY), JSON or Markdown. Pure:
report + table in, text out."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass

from exporter.diagnostics.hardware_advice import ADVICE as HARDWARE_ADVICE
from exporter.diagnostics.hardware_advice import advice_key
from exporter.diagnostics.model import (
    COUNT,
    HARDWARE,
    LEVEL_TITLES,
    LEVELS,
    MACRO,
    MESO,
    MICRO,
    PAGES,
    PER_SECOND,
    SECONDS,
    Finding,
    Report,
    worst,
)
from exporter.thresholds.table import ABNORMAL, HEALTHY, WARNING, Thresholds

# What each level needs, said when a level has nothing to show.
NO_DATA = {
    HARDWARE: "no health, ECC, chip count, link, sensor, read failure or network readings (npu_health, npu_ecc_*, npu_hccs_*, npu_network_*)",
    MACRO: "no chip utilization, job or profile data",
    MESO: "needs training-job phases (hooks, docs/training-hooks.md) or a profile (--profile-dir)",
    MICRO: "needs a profile: --profile-dir, or npu_profile_* metrics (exporter --profile-dir)",
}
MAX_SUBJECTS = 24  # per level; beyond, only subjects with something off are listed (unless show_all)
_COLOURS = {HEALTHY: "32", WARNING: "33", ABNORMAL: "31;1"}


# --- values -------------------------------------------------------------------------------------


def format_value(value: float | None, unit: str) -> str:
    if value is None:
        return "" if unit == COUNT else "n/a"
    if unit == SECONDS:
        return format_seconds(value)
    if unit == PER_SECOND:
        return f"{value:.4g}/s"
    if unit == PAGES:
        return f"{value:g} pages"
    if unit == COUNT:
        return f"{value:g}"
    return f"{value * 100:.1f}%"


def format_seconds(value: float) -> str:
    if value < 1:
        return f"{value * 1000:.4g} ms"
    if value < 120:
        return f"{value:.3g} s"
    if value < 7200:
        return f"{value / 60:.1f} min"
    return f"{value / 3600:.1f} h"


# --- advice: the table's causes and levers for what is off ------------------------------------------


@dataclass(frozen=True)
class Advice:
    key: str  # indicator id, or alert name when the check has no table row (a failing read: alert:tool)
    title: str
    verdict: str
    subjects: tuple[str, ...]
    causes: tuple[str, ...] = ()
    levers: tuple[str, ...] = ()
    alerts: tuple[str, ...] = ()
    runbooks: tuple[str, ...] = ()


def advice(report: Report, table: Thresholds) -> list[Advice]:
    """One entry per indicator that is not healthy somewhere, worst first."""
    groups: dict[str, list[Finding]] = {}
    for f in report.findings:
        if f.verdict in (WARNING, ABNORMAL):
            groups.setdefault(f.indicator or advice_key(f), []).append(f)
    out = []
    for key, findings in groups.items():
        indicator = table[key] if key in table else None
        causes, levers = (indicator.causes, indicator.levers) if indicator else HARDWARE_ADVICE.get(key, ((), ()))
        alerts = tuple(dict.fromkeys(f.alert for f in findings if f.alert))
        subjects = tuple(dict.fromkeys(f.subject for f in findings))
        out.append(
            Advice(
                key,
                indicator.title if indicator else findings[0].title,
                worst(f.verdict for f in findings) or WARNING,
                subjects,
                causes,
                levers,
                alerts,
                tuple(f"{table.alerting.runbook_url}#{alert.lower()}" for alert in alerts),
            )
        )
    return sorted(out, key=lambda a: (a.verdict != ABNORMAL, a.key))


# --- terminal -----------------------------------------------------------------------------------------


class _Style:
    def __init__(self, colour: bool) -> None:
        self.colour = colour

    def __call__(self, text: str, code: str) -> str:
        return f"\x1b[{code}m{text}\x1b[0m" if self.colour and code else text

    def verdict(self, verdict: str | None, width: int = 0) -> str:
        text = (verdict or "-").ljust(width)
        return self(text, _COLOURS.get(verdict or "", "2"))


def render_text(report: Report, table: Thresholds, *, colour: bool = False, show_all: bool = False) -> str:
    style = _Style(colour)
    lines = _header_lines(report, style)
    for level in LEVELS:
        findings = report.at(level)
        if findings:
            lines += ["", style(LEVEL_TITLES[level], "1")] + _table(findings, style, show_all)
        elif level in NO_DATA:
            lines += ["", style(LEVEL_TITLES[level], "1"), style(f"  no data: {NO_DATA[level]}", "2")]
    tips = advice(report, table)
    if tips:
        lines += ["", style("What to try", "1")] + [line for tip in tips for line in _tip_lines(tip, style)]
    if report.notes:
        lines += [""] + [f"note: {note}" for note in report.notes]
    return "\n".join(lines) + "\n"


def _header_lines(report: Report, style: _Style) -> list[str]:
    counts = report.counts()
    summary = ", ".join(f"{counts[v]} {v}" for v in (ABNORMAL, WARNING, HEALTHY))
    lines = [style(f"cann-exporter diagnose: {report.source}", "1")]
    if report.window:
        lines.append(f"window: {report.window}")
    lines.append(f"verdict: {style(report.verdict.upper(), _COLOURS.get(report.verdict, ''))} ({summary})")
    for key, value in report.extra.items():
        lines.append(f"{key}: {value}")
    return lines


def _table(findings: Sequence[Finding], style: _Style, show_all: bool) -> list[str]:
    """Rows grouped under their subject; beyond MAX_SUBJECTS only subjects with something off."""
    shown = list(findings)
    hidden = 0
    subjects = {f.subject for f in findings}
    if not show_all and len(subjects) > MAX_SUBJECTS:
        off = {f.subject for f in findings if f.verdict in (WARNING, ABNORMAL)}
        shown = [f for f in findings if f.subject in off]
        hidden = len(subjects - off)
    cells = [(f.title, format_value(f.value, f.unit), f.bounds or f.detail) for f in shown]
    widths = [min(cap, max([len(c[i]) for c in cells] or [0])) for i, cap in enumerate((40, 10, 52))]
    out: list[str] = []
    subject = None
    for f, (title, value, bounds) in zip(shown, cells):
        if f.subject != subject:
            subject = f.subject
            out.append(f"  {style(subject, '1')}")
        line = f"    {title:<{widths[0]}}  {value:>{widths[1]}}  {bounds:<{widths[2]}}  {style.verdict(f.verdict)}"
        out.append(line.rstrip())
        if f.detail and f.bounds and f.verdict in (WARNING, ABNORMAL):
            out.append(style(f"    {'':<{widths[0]}}  ↳ {f.detail}", "2"))
    if hidden:
        out.append(style(f"  ({hidden} healthy subjects not shown; --all lists them)", "2"))
    return out


def _tip_lines(tip: Advice, style: _Style) -> list[str]:
    subjects = ", ".join(tip.subjects[:4]) + (f" and {len(tip.subjects) - 4} more" if len(tip.subjects) > 4 else "")
    lines = [f"  {style.verdict(tip.verdict)}  {style(tip.title, '1')}: {subjects}"]
    if tip.causes:
        lines.append(f"      likely causes: {'; '.join(tip.causes)}")
    lines += [f"      try: {lever}" for lever in tip.levers]
    for alert, runbook in zip(tip.alerts, tip.runbooks):
        lines.append(style(f"      alert {alert}: runbook {runbook}", "2"))
    return lines


# --- JSON -------------------------------------------------------------------------------------------


def render_json(report: Report, table: Thresholds) -> str:
    doc = {
        "source": report.source,
        "window": report.window,
        "verdict": report.verdict,
        "exit_code": report.exit_code,
        "counts": report.counts(),
        "levels": {level: [asdict(f) for f in report.at(level)] for level in LEVELS if report.at(level)},
        "advice": [asdict(a) for a in advice(report, table)],
        "notes": list(report.notes),
        **{k: v for k, v in report.extra.items()},
    }
    return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"


# --- Markdown ---------------------------------------------------------------------------------------


def _md(text: str) -> str:
    return text.replace("|", "\\|")


def render_markdown(report: Report, table: Thresholds, *, show_all: bool = True) -> str:
    counts = report.counts()
    lines = ["# cann-exporter diagnose", "", f"- source: {_md(report.source)}"]
    if report.window:
        lines.append(f"- window: {report.window}")
    lines.append(f"- verdict: **{report.verdict}** ({', '.join(f'{counts[v]} {v}' for v in (ABNORMAL, WARNING, HEALTHY))})")
    lines += [f"- {k}: {_md(str(v))}" for k, v in report.extra.items()]
    for level in LEVELS:
        findings = report.at(level)
        if not findings:
            continue
        lines += [
            "",
            f"## {LEVEL_TITLES[level]}",
            "",
            "| subject | indicator | value | bounds | verdict | detail |",
            "|---|---|---:|---|---|---|",
        ]
        for f in findings:
            verdict = f"**{f.verdict}**" if f.verdict == ABNORMAL else (f.verdict or "")
            lines.append(
                f"| {_md(f.subject)} | {_md(f.title)} | {format_value(f.value, f.unit)} | {_md(f.bounds)} | {verdict} | {_md(f.detail)} |"
            )
    tips = advice(report, table)
    if tips:
        lines += ["", "## What to try"]
        for tip in tips:
            lines += ["", f"### {tip.title} ({tip.verdict})", "", f"On: {_md(', '.join(tip.subjects))}"]
            if tip.causes:
                lines.append(f"\nLikely causes: {'; '.join(tip.causes)}.")
            if tip.levers:
                lines += [""] + [f"- {lever}" for lever in tip.levers]
            if tip.alerts:
                lines.append("\n" + "; ".join(f"alert `{a}`: {r}" for a, r in zip(tip.alerts, tip.runbooks)))
    if report.notes:
        lines += ["", "## Notes", ""] + [f"- {_md(n)}" for n in report.notes]
    return "\n".join(lines) + "\n"
