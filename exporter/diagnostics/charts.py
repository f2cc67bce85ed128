"""PNG charts of the capacity report (matplotlib, Agg backend: no display needed).

Each function draws one chart from the pure CapacityReport and returns the file it wrote;
matplotlib is imported only here, so `diagnose` works without the `report` extra.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from exporter.diagnostics.capacity import CapacityReport
from exporter.diagnostics.forecast import Point

GIB = float(1 << 30)
# Series styles: ten colours (matplotlib's tab10) times four dashes, so no two of the first 40
# lines look alike; a chart draws at most MAX_LINES of them (the lowest, named in its title).
COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf")
DASHES = ("-", "--", ":", "-.")
MAX_LINES = 20


class ChartsUnavailable(Exception):
    """matplotlib is not installed (pip install 'cann-exporter[report]')."""


def require_charts() -> None:
    """ChartsUnavailable now, before minutes of queries, when the charts cannot be drawn."""
    _pyplot()


def _pyplot() -> Any:
    try:
        import matplotlib
    except ImportError:
        raise ChartsUnavailable("the report needs matplotlib: pip install 'cann-exporter[report]'") from None
    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def _dates(points: Sequence[Point]) -> list[datetime]:
    return [datetime.fromtimestamp(t, tz=timezone.utc) for t, _ in points]


def gapped(points: Sequence[Point], step: float) -> list[Point]:
    """``points`` with a NaN after each one followed by a missing step (an outage, a chip
    removed): matplotlib breaks the line there instead of drawing straight across."""
    out: list[Point] = []
    for index, (t, v) in enumerate(points):
        if index and t - points[index - 1][0] > step * 1.5:
            out.append((points[index - 1][0] + step, math.nan))
        out.append((t, v))
    return out


def _figure(plt: Any, title: str, ylabel: str) -> tuple[Any, Any]:
    fig, ax = plt.subplots(figsize=(9, 3.6), dpi=100)
    ax.set_title(title, fontsize=11, loc="left")
    ax.set_ylabel(ylabel)
    ax.grid(True, alpha=0.3)
    return fig, ax


def _save(plt: Any, fig: Any, path: Path, dates: bool = False) -> Path:
    if dates:
        fig.autofmt_xdate()
    fig.tight_layout()
    fig.savefig(path, format="png")
    plt.close(fig)
    return path


def _bands(ax: Any, report: CapacityReport) -> None:
    ax.axhline(
        report.bounds.healthy * 100, color="#2e7d32", linestyle="--", linewidth=1, label=f"healthy > {report.bounds.healthy * 100:g}%"
    )
    ax.axhline(report.bounds.low * 100, color="#c62828", linestyle="--", linewidth=1, label=f"abnormal < {report.bounds.low * 100:g}%")
    ax.set_ylim(0, 105)


def series_style(index: int) -> dict[str, Any]:
    """The colour and dash of the index-th series: distinct for the first len(COLOURS) * len(DASHES)."""
    return {"color": COLOURS[index % len(COLOURS)], "linestyle": DASHES[index // len(COLOURS) % len(DASHES)]}


TOTAL_STYLE = {"color": "#000000", "linestyle": "-", "linewidth": 2.4}  # the cluster line, above the others


def lowest(series: Mapping[str, Sequence[Point]], keep: int = MAX_LINES) -> dict[str, Sequence[Point]]:
    """The ``keep`` series with the lowest mean (the ones a capacity planner looks for), in name order."""
    if len(series) <= keep:
        return dict(series)
    means = {name: sum(v for _, v in points) / len(points) if points else 0.0 for name, points in series.items()}
    chosen = sorted(series, key=lambda name: (means[name], name))[:keep]
    return {name: series[name] for name in sorted(chosen)}


def _shown(title: str, shown: int, total: int, what: str) -> str:
    return title if shown == total else f"{title} ({shown} lowest of {total} {what})"


def _lines(
    plt: Any, report: CapacityReport, series: Mapping[str, Sequence[Point]], title: str, path: Path, total: Sequence[Point] = ()
) -> Path:
    fig, ax = _figure(plt, title, "AI Core utilization (%)")
    for index, (name, raw) in enumerate(series.items()):
        points = gapped(raw, report.step)
        ax.plot(_dates(points), [v * 100 for _, v in points], linewidth=1.2, label=name, **series_style(index))
    if total:
        total = gapped(total, report.step)
        ax.plot(_dates(total), [v * 100 for _, v in total], label="cluster", zorder=3, **TOTAL_STYLE)
    _bands(ax, report)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return _save(plt, fig, path, dates=True)


def utilization_by_node(plt: Any, r: CapacityReport, out: Path) -> Path:
    shown = lowest(r.node_utilization)
    title = _shown("Mean utilization of all chips per node", len(shown), len(r.node_utilization), "nodes")
    return _lines(plt, r, shown, title, out / "utilization_nodes.png", total=r.cluster_utilization)


def utilization_by_namespace(plt: Any, r: CapacityReport, out: Path) -> Path | None:
    if not r.namespace_utilization:
        return None
    shown = lowest(r.namespace_utilization)
    title = _shown("Mean utilization of the chips allocated to each namespace", len(shown), len(r.namespace_utilization), "namespaces")
    return _lines(plt, r, shown, title, out / "utilization_namespaces.png")


def distribution(plt: Any, r: CapacityReport, out: Path) -> Path | None:
    if not r.distribution:
        return None
    fig, ax = _figure(plt, "Distribution of chip utilization (chips in use, one value per chip and step)", "share of chip time (%)")
    values = [v * 100 for v in r.distribution]
    weights = [100.0 / len(values)] * len(values)
    ax.hist(values, bins=20, range=(0, 100), weights=weights, color="#1565c0", edgecolor="white")
    ax.axvline(r.bounds.low * 100, color="#c62828", linestyle="--", linewidth=1)
    ax.axvline(r.bounds.healthy * 100, color="#2e7d32", linestyle="--", linewidth=1)
    ax.set_xlabel("AI Core utilization (%)")
    return _save(plt, fig, out / "utilization_distribution.png")


def idle_hours(plt: Any, r: CapacityReport, out: Path) -> Path:
    fig, ax = _figure(plt, "Chip-hours per node: idle (nothing on the chip) and unused (AI Cores not busy)", "chip-hours")
    names = [n.instance for n in r.nodes]
    x = list(range(len(names)))
    ax.bar([i - 0.2 for i in x], [n.idle_chip_hours for n in r.nodes], width=0.4, label="idle", color="#9e9e9e")
    ax.bar([i + 0.2 for i in x], [n.unused_chip_hours for n in r.nodes], width=0.4, label="unused", color="#ef6c00")
    ax.set_xticks(x, names, rotation=20, ha="right", fontsize=8)
    ax.legend(fontsize=8)
    return _save(plt, fig, out / "idle_chip_hours.png")


def below_threshold(plt: Any, r: CapacityReport, out: Path) -> Path | None:
    if not r.distribution:
        return None
    fig, ax = _figure(plt, f"Share of in-use chip time below {r.bounds.low * 100:g}% utilization", "% of time")
    names = [n.instance for n in r.nodes]
    values = [(n.below_share or 0.0) * 100 for n in r.nodes]
    ax.bar(names, values, color=["#c62828" if v > 50 else "#ef6c00" if v > 0 else "#2e7d32" for v in values])
    ax.set_ylim(0, 105)
    ax.tick_params(axis="x", labelrotation=20, labelsize=8)
    return _save(plt, fig, out / "below_threshold.png")


def hbm_headroom(plt: Any, r: CapacityReport, out: Path) -> Path | None:
    if not r.hbm_headroom:
        return None
    shown = lowest(r.hbm_headroom)
    fig, ax = _figure(plt, _shown("Free HBM per node", len(shown), len(r.hbm_headroom), "nodes"), "GiB free")
    for index, (name, raw) in enumerate(shown.items()):
        points = gapped(raw, r.step)
        ax.plot(_dates(points), [v / GIB for _, v in points], linewidth=1.2, label=name, **series_style(index))
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return _save(plt, fig, out / "hbm_headroom.png", dates=True)


def allocation(plt: Any, r: CapacityReport, out: Path) -> Path:
    fig, ax = _figure(plt, "Allocation vs use: chips, chips in use, busy chip-equivalents", "chips")
    dates = _dates([(t, 0.0) for t, *_ in r.allocation])
    # In use is an area and the chip count a dashed line drawn above it: equal, both still show.
    ax.fill_between(dates, [row[2] for row in r.allocation], color="#90caf9", alpha=0.6, label="in use (allocated)")
    ax.fill_between(dates, [row[3] for row in r.allocation], color="#2e7d32", alpha=0.6, label="busy (sum of utilization)")
    ax.plot(dates, [row[1] for row in r.allocation], label="chips", color="#000000", linestyle="--", linewidth=2, zorder=3)
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return _save(plt, fig, out / "allocation_vs_use.png", dates=True)


def forecasts(plt: Any, r: CapacityReport, out: Path) -> Path | None:
    if not r.forecasts:
        return None
    fig, axes = plt.subplots(len(r.forecasts), 1, figsize=(9, 2.4 * len(r.forecasts)), dpi=100, squeeze=False)
    for ax, f in zip((a[0] for a in axes), r.forecasts):
        scale = 100.0 if f.unit == "ratio" else 1.0
        ax.plot(_dates(f.daily), [v * scale for _, v in f.daily], "o", markersize=3, label="daily")
        t0, t1 = f.daily[0][0], r.end + f.horizon_days * 86400
        ax.plot(_dates([(t0, 0), (t1, 0)]), [f.at(t0) * scale, f.at(t1) * scale], "--", label="linear fit")
        if f.limit is not None:
            ax.axhline(f.limit * scale, color="#c62828", linewidth=1, label="limit")
        ax.set_title(f"Forecast: {f.name}", fontsize=10, loc="left")
        ax.set_ylabel("%" if f.unit == "ratio" else "chips")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7, loc="upper left")
    fig.autofmt_xdate()
    fig.tight_layout()
    path = out / "forecast.png"
    fig.savefig(path, format="png")
    plt.close(fig)
    return path


CHARTS: tuple[tuple[str, Callable[[Any, CapacityReport, Path], Path | None]], ...] = (
    ("utilization_nodes", utilization_by_node),
    ("utilization_namespaces", utilization_by_namespace),
    ("distribution", distribution),
    ("idle_chip_hours", idle_hours),
    ("below_threshold", below_threshold),
    ("hbm_headroom", hbm_headroom),
    ("allocation", allocation),
    ("forecast", forecasts),
)


def draw_all(report: CapacityReport, out: Path) -> dict[str, Path]:
    """Every chart that has data; {name: PNG path}."""
    plt = _pyplot()
    written: dict[str, Path] = {}
    for name, draw in CHARTS:
        path = draw(plt, report, out)
        if path is not None:
            written[name] = path
    return written
