"""The capacity report as one self-contained HTML page (inline CSS, no scripts) that links the
PNG charts beside it, and the same numbers as JSON. Pure: report in, text out."""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import asdict
from html import escape
from pathlib import Path
from typing import Any

from exporter.core.values import format_duration
from exporter.diagnostics.capacity import CapacityReport
from exporter.diagnostics.capacity_owners import IDLE_UTILIZATION
from exporter.diagnostics.capacity_text import cost_text, hours_text, kwh_text, pct_text
from exporter.diagnostics.energy import EnergyReport, EnergyRow, energy_findings
from exporter.diagnostics.goodput import NO_NAMESPACE, GoodputReport, goodput_cells, goodput_findings, goodput_json
from exporter.thresholds.table import ABNORMAL, HEALTHY, WARNING

GIB = float(1 << 30)
_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2rem auto;max-width:1000px;color:#212121;padding:0 1rem}
h1{font-size:1.6rem;margin-bottom:.2rem}h2{font-size:1.2rem;margin-top:2rem;border-bottom:1px solid #ddd;padding-bottom:.2rem}
.meta{color:#616161;font-size:.9rem}table{border-collapse:collapse;margin:.5rem 0;font-size:.9rem}
th,td{border:1px solid #ddd;padding:.25rem .6rem;text-align:right}th{background:#f5f5f5}td:first-child,th:first-child{text-align:left}
img{max-width:100%;border:1px solid #eee;margin:.5rem 0}.v{font-weight:600;padding:0 .3rem;border-radius:3px}
.healthy{color:#1b5e20;background:#e8f5e9}.warning{color:#e65100;background:#fff3e0}.abnormal{color:#b71c1c;background:#ffebee}
ul.findings li{margin:.3rem 0}.note{color:#616161;font-size:.85rem}
"""
SECTIONS = (
    ("utilization_nodes", "Utilization over time per node"),
    ("utilization_namespaces", "Utilization over time per namespace"),
    ("distribution", "Distribution of chip utilization"),
    ("idle_chip_hours", "Idle chip-hours"),
    ("owners", "Chip-hours per owner"),
    ("below_threshold", "Time below the low-utilization bound"),
    ("chips_below", "Chips below the low-utilization bound"),
    ("hbm_headroom", "HBM headroom"),
    ("allocation", "Allocation vs use"),
    ("forecast", "Forecast"),
)


_pct = pct_text


def _gib(value: float | None) -> str:
    return "n/a" if value is None else f"{value / GIB:,.1f} GiB"


def _verdict(value: str | None) -> str:
    if value not in (HEALTHY, WARNING, ABNORMAL):
        return ""
    return f'<span class="v {value}">{value}</span>'


def _when(t: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(t))


def _table(head: list[str], rows: list[list[str]]) -> str:
    th = "".join(f"<th>{escape(h)}</th>" for h in head)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table>"


def render_html(
    report: CapacityReport, charts: Mapping[str, Path], energy: EnergyReport | None = None, goodput: GoodputReport | None = None
) -> str:
    t = report.totals
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        "<title>NPU capacity report</title>",
        f"<style>{_CSS}</style></head><body>",
        "<h1>NPU capacity report</h1>",
        (
            f'<p class="meta">{escape(report.source)} · {_when(report.start - report.step)} to {_when(report.end)} '
            f"({escape(_span(report))}) · step {format_duration(report.step)} · written {_when(time.time())}</p>"
        ),
        f"<h2>Summary {_verdict(report.verdict)}</h2>",
        '<ul class="findings">' + "".join(f"<li>{escape(f)}</li>" for f in _findings(report, energy, goodput)) + "</ul>",
        _table(
            ["", "value"],
            [
                ["chips / nodes", f"{int(t['chips'] or 0)} / {int(t['nodes'] or 0)}"],
                ["chip time in use (allocated)", _pct(t["allocation"])],
                ["mean utilization, chips in use", _pct(t["mean_utilization_in_use"])],
                ["mean utilization, all chips", _pct(t["mean_utilization_all"])],
                [f"in-use time below {report.bounds.low * 100:g}%", _pct(t["below_share"])],
                ["idle chip-hours", f"{hours_text(t['idle_chip_hours'])} of {hours_text(t['chip_hours'])}"],
                ["unused chip-hours", hours_text(t["unused_chip_hours"])],
            ],
        ),
    ]
    for name, title in SECTIONS:
        parts.append(f"<h2>{escape(title)}</h2>")
        if name in charts:
            parts.append(f'<img src="{escape(charts[name].name)}" alt="{escape(title)}">')
        elif name in report.empty:
            parts.append(f'<p class="note">{escape(report.empty[name])}</p>')
        parts.append(_section_table(name, report))
    parts += _energy_section(energy)
    parts += _goodput_section(goodput)
    if report.notes:
        parts.append("<h2>Notes</h2><ul>" + "".join(f'<li class="note">{escape(n)}</li>' for n in report.notes) + "</ul>")
    parts.append("</body></html>")
    return "\n".join(p for p in parts if p) + "\n"


def _span(r: CapacityReport) -> str:
    if r.requested is None:
        return format_duration(r.covered)
    return f"{format_duration(r.covered)} of data; {format_duration(r.requested)} asked for"


def _count(value: int | None) -> str:
    return "?" if value is None else str(value)


def _section_table(name: str, r: CapacityReport) -> str:
    if name == "utilization_nodes":
        return _table(
            [
                "node",
                "installed",
                "seen",
                "unhealthy",
                "unread",
                "chips with data",
                "mean (in use)",
                "verdict",
                "allocated",
                f"< {r.bounds.low * 100:g}%",
            ],
            [
                [
                    escape(n.instance),
                    _count(n.inventory.expected),
                    _count(n.inventory.seen),
                    str(n.inventory.unhealthy),
                    str(n.inventory.unread),
                    str(n.chips),
                    _pct(n.mean_utilization),
                    _verdict(n.verdict),
                    _pct(n.allocation),
                    _pct(n.below_share),
                ]
                for n in r.nodes
            ],
        )
    if name == "utilization_namespaces" and r.namespaces:
        return _table(
            ["namespace", "chips (max)", "chip-hours", "mean", "verdict", f"< {r.bounds.low * 100:g}%"],
            [
                [
                    escape(n.namespace),
                    str(n.chips),
                    hours_text(n.chip_hours),
                    _pct(n.mean_utilization),
                    _verdict(n.verdict),
                    _pct(n.below_share),
                ]
                for n in r.namespaces
            ],
        )
    if name == "idle_chip_hours":
        return _table(
            ["node", "chip-hours", "idle", "unused"],
            [
                [escape(n.instance), hours_text(n.chip_hours), hours_text(n.idle_chip_hours), hours_text(n.unused_chip_hours)]
                for n in r.nodes
            ],
        )
    if name == "owners" and r.owners:
        return _owner_table(r)
    if name == "chips_below":
        if not r.chips_below:
            return (
                f'<p class="note">No chip in use averaged below {r.bounds.low * 100:g}% AI Core utilization '
                "over the time it was in use.</p>"
            )
        return _table(
            ["chip", "mean (in use)", f"time < {r.bounds.low * 100:g}%", "chip-hours in use"],
            [[escape(c.subject), _pct(c.mean_utilization), _pct(c.below_share), hours_text(c.in_use_hours)] for c in r.chips_below],
        )
    if name == "hbm_headroom" and r.hbm_headroom:
        return _table(
            ["node", "peak used", "least free"],
            [[escape(n.instance), _pct(n.hbm_peak_ratio), _gib(n.hbm_min_headroom_bytes)] for n in r.nodes if n.hbm_peak_ratio is not None],
        )
    if name == "forecast" and r.forecasts:
        return _table(
            ["quantity", "trend per week", "limit", "days to limit"],
            [
                [
                    escape(f.name),
                    f"{f.slope_per_day * 7:+.2f}" if f.unit == "count" else f"{f.slope_per_day * 700:+.1f} pts",
                    "" if f.limit is None else (f"{f.limit:g}" if f.unit == "count" else _pct(f.limit)),
                    "" if f.limit is None else ("not on this trend" if f.days_to_limit is None else f"{f.days_to_limit:.1f}"),
                ]
                for f in r.forecasts
            ],
        )
    return ""


def _owner_table(r: CapacityReport) -> str:
    note = (
        '<p class="note">Who held each chip (npu_chip_owner_info, on any runtime), as runtime · owner: a chip-step counts '
        "for every owner holding the chip in it, none without an owner series. Allocated but idle: held, health not "
        f"paging, AI Cores below {IDLE_UTILIZATION * 100:g}% over the step.</p>"
    )
    return note + _table(
        [
            "owner",
            "chips (max)",
            "chip-hours",
            "allocated but idle",
            "idle share",
            "unused",
            "mean",
            "verdict",
            f"< {r.bounds.low * 100:g}%",
        ],
        [
            [
                escape(o.name),
                str(o.chips),
                hours_text(o.chip_hours),
                hours_text(o.idle_chip_hours),
                _pct(o.idle_share),
                hours_text(o.unused_chip_hours),
                _pct(o.mean_utilization),
                _verdict(o.verdict),
                _pct(o.below_share),
            ]
            for o in r.owners
        ],
    )


NO_ENERGY = (
    "Prometheus has no npu_energy_joules_total series (or, on the hourly records, no chip:npu_energy_kwh:sum1h) for "
    "these chips: exporters before the energy counter, or chips whose npu-smi reports no power."
)


def _energy_section(r: EnergyReport | None) -> list[str]:
    """kWh per node (with idle kWh), namespace and training job; a cost column only with a price."""
    out = ["<h2>Energy</h2>"]
    if r is None:
        return [*out, f'<p class="note">{escape(NO_ENERGY)}</p>']
    priced = r.price is not None

    def cells(kwh: float | None, cost: float | None) -> list[str]:
        return [kwh_text(kwh), cost_text(cost)] if priced else [kwh_text(kwh)]

    def head(*names: str) -> list[str]:
        return [h for n in names for h in ((n, f"{n.replace('kWh', 'cost')}") if priced else (n,))]

    def rows(items: tuple[EnergyRow, ...]) -> list[list[str]]:
        return [[escape(i.name), *cells(i.kwh, i.cost)] for i in items]

    idle = f"idle or < {r.low * 100:g}% kWh"
    price = f" at {r.price:g} per kWh" if priced else ""
    out.append(
        f'<p class="note">kWh from npu_energy_joules_total{escape(price)}; idle energy: chips with nothing on them, '
        f"or in use below {r.low * 100:g}% AI Core utilization.</p>"
    )
    out.append(
        _table(
            ["node", *head("kWh", idle)],
            [[escape(n.name), *cells(n.kwh, n.cost), *cells(n.idle_kwh, n.idle_cost)] for n in r.nodes]
            + [["all nodes", *cells(r.total_kwh, r.total_cost), *cells(r.idle_kwh, r.idle_cost)]],
        )
    )
    if r.namespaces:
        out.append(_table(["namespace", *head("kWh")], rows(r.namespaces)))
    if r.jobs:
        out.append(_table(["training job", *head("kWh")], rows(r.jobs)))
    return out


def _energy_json(r: EnergyReport | None) -> dict[str, Any] | None:
    if r is None:
        return None

    def row(i: EnergyRow) -> dict[str, Any]:
        return {k: v for k, v in asdict(i).items() if v is not None}  # no cost without a price, no idle figure but per node

    return {
        "kwh": r.total_kwh,
        "idle_kwh": r.idle_kwh,
        "idle_share": r.idle_share,
        "low": r.low,
        **({"price_per_kwh": r.price, "cost": r.total_cost, "idle_cost": r.idle_cost} if r.price is not None else {}),
        "nodes": [row(n) for n in r.nodes],
        "namespaces": [row(n) for n in r.namespaces],
        "jobs": [row(j) for j in r.jobs],
    }


def _findings(report: CapacityReport, energy: EnergyReport | None, goodput: GoodputReport | None) -> list[str]:
    return [*report.findings, *energy_findings(energy), *goodput_findings(goodput)]


NO_GOODPUT = (
    "Prometheus has no npu_job_goodput_seconds_total series in the window: no training job reported through the hooks, "
    "or exporters before the goodput counters."
)


def _goodput_section(r: GoodputReport | None) -> list[str]:
    """NPU-hours (rank-hours) per training job and namespace, split into goodput and each badput kind."""
    out = ["<h2>Goodput</h2>"]
    if r is None:
        return [*out, f'<p class="note">{escape(NO_GOODPUT)}</p>']
    out.append(
        '<p class="note">NPU-hours: the hours of every rank of the training jobs (one rank, one NPU), from '
        "npu_job_goodput_seconds_total and npu_job_badput_seconds_total by kind, with each part's share; restarts from "
        "npu_job_disruptions_total. A rank counts for the namespace of the pod on its chip in each step "
        f"({escape(NO_NAMESPACE)}: no pod on it).</p>"
    )
    parts = r.parts
    head = ["NPU-hours", *parts, "restarts"]
    out.append(
        _table(
            ["training job", *head],
            [[escape(j.name), *goodput_cells(j, parts)] for j in r.jobs] + [["all jobs", *goodput_cells(r.total, parts)]],
        )
    )
    if r.namespaces:
        out.append(_table(["namespace", *head], [[escape(n.name), *goodput_cells(n, parts)] for n in r.namespaces]))
    return out


def report_json(
    report: CapacityReport, charts: Mapping[str, Path], energy: EnergyReport | None = None, goodput: GoodputReport | None = None
) -> str:
    doc: dict[str, Any] = {
        "source": report.source,
        "start": report.start - report.step,
        "end": report.end,
        "step": report.step,
        "covered": report.covered,
        "requested": report.requested,
        "verdict": report.verdict,
        "bounds": asdict(report.bounds),
        "totals": dict(report.totals),
        "nodes": [asdict(n) for n in report.nodes],
        "namespaces": [asdict(n) for n in report.namespaces],
        "owners": [{**asdict(o), "name": o.name, "idle_share": o.idle_share} for o in report.owners],
        "chips_below": [{**asdict(c), "subject": c.subject} for c in report.chips_below],
        "empty": dict(report.empty),
        "forecasts": [{k: v for k, v in asdict(f).items() if k != "daily"} for f in report.forecasts],
        "findings": _findings(report, energy, goodput),
        "energy": _energy_json(energy),
        "goodput": goodput_json(goodput),
        "notes": list(report.notes),
        "charts": {k: v.name for k, v in charts.items()},
    }
    return json.dumps(doc, indent=2) + "\n"
