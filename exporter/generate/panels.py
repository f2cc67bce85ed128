"""Grafana panels, one builder per kind of panel (grafana-foundation-sdk's typed builders), with
the look every dashboard shares: units, legends, threshold colours from the table, value names.
board.py puts panels together into a dashboard.

mypy reads the SDK as Python 3.10 (the project's python_version), which has no enum.StrEnum: a
member reads as a plain str and a builder's method (``-> typing.Self``) returns Any. So the
enums are made by calling their class with the value (the member, typed), and each builder is
set up in place and returned itself (the SDK's builders change themselves and return self)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, TypedDict, TypeVar

from grafana_foundation_sdk.builders import bargauge, heatmap, prometheus, stat, statushistory, table, timeseries
from grafana_foundation_sdk.builders import common as cb
from grafana_foundation_sdk.builders import dashboard as db
from grafana_foundation_sdk.cog import builder as cogbuilder
from grafana_foundation_sdk.cog import variants as cogvariants
from grafana_foundation_sdk.models import common as cm
from grafana_foundation_sdk.models import dashboard as dm
from grafana_foundation_sdk.models import heatmap as hm
from grafana_foundation_sdk.models import prometheus as pm

from exporter.thresholds.table import AlertSpec, Indicator

if TYPE_CHECKING:
    from typing_extensions import Unpack  # typing's from 3.11; for mypy only

DATASOURCE = dm.DataSourceRef(type_val="prometheus", uid="${datasource}")

# Label filters the variables provide.
SEL = 'job=~"$job", instance=~"$instance"'
CHIP_SEL = 'job=~"$job", instance=~"$instance", device=~"$device"'
JOB_SEL = 'job=~"$job", job_name=~"$job_name"'
CHIP_LEGEND = "{{instance}} {{device}}"
JOB_LEGEND = "{{job_name}}/{{rank}}"
UTIL = "npu_aicore_utilization_ratio"
INFO_HIDDEN = ("__name__", "job", "Value")  # an info metric's table: its labels only

GREEN, YELLOW, ORANGE, RED, PURPLE, BLUE = "green", "yellow", "orange", "red", "purple", "blue"


def rate(metric: str, by: str, sel: str, window: str = "$__rate_interval", offset: str = "") -> str:
    """Per-second rate of ``metric`` over ``window`` (Grafana's rate interval), summed by ``by``."""
    before = f" offset {offset}" if offset else ""
    return f"sum by ({by}) (rate({metric}{{{sel}}}[{window}]{before}))"


def fires(spec: AlertSpec | None, text: Callable[[AlertSpec], str], otherwise: str = "") -> str:
    """What a panel's description says of the alert on its values: ``text`` of the alert, or
    ``otherwise`` when the table has none."""
    return text(spec) if spec is not None else otherwise


# --- threshold colours -----------------------------------------------------------------------
def indicator_steps(indicator: Indicator) -> list[dm.Threshold]:
    """Colour steps of an indicator: green healthy, orange in between, red abnormal."""
    if indicator.lower_is_better:
        steps = [dm.Threshold(value=None, color=GREEN)]
        if indicator.healthy is not None:
            steps.append(dm.Threshold(value=indicator.healthy, color=ORANGE))
        if indicator.abnormal is not None:
            steps.append(dm.Threshold(value=indicator.abnormal, color=RED))
        return steps
    steps = [dm.Threshold(value=None, color=RED if indicator.abnormal is not None else ORANGE)]
    if indicator.abnormal is not None and indicator.healthy is not None:
        steps.append(dm.Threshold(value=indicator.abnormal, color=ORANGE))
    steps.append(dm.Threshold(value=indicator.healthy if indicator.healthy is not None else indicator.abnormal, color=GREEN))
    return steps


def limit_steps(limit: float | None, above: str = RED, below: str = GREEN) -> list[dm.Threshold]:
    """``below`` up to ``limit``, ``above`` from it (no limit: ``below`` only)."""
    steps = [dm.Threshold(value=None, color=below)]
    if limit is not None:
        steps.append(dm.Threshold(value=limit, color=above))
    return steps


def threshold(spec: AlertSpec | None) -> float | None:
    """The alert's threshold; None when the table has no such alert."""
    return spec.threshold if spec else None


def alert_steps(spec: AlertSpec | None, above: str = RED) -> list[dm.Threshold]:
    """Green below the alert's threshold, ``above`` from it (no alert: green)."""
    return limit_steps(threshold(spec), above)


ANY_RED = limit_steps(1)  # a count: green at 0, red from 1
UP_GREEN = limit_steps(1, GREEN, RED)  # a 0/1 state: red at 0, green at 1


def code_steps(colors: Sequence[str]) -> list[dm.Threshold]:
    """One colour per whole number from 0: the colours of a state drawn as its index."""
    return [dm.Threshold(value=code or None, color=color) for code, color in enumerate(colors)]


def value_names(names: Iterable[tuple[str, str]]) -> list[dm.ValueMapping]:
    """Each whole number from 0 shown as its (text, colour)."""
    options = {str(code): dm.ValueMappingResult(text=text, color=color, index=code) for code, (text, color) in enumerate(names)}
    return [dm.ValueMap(options=options)]


def _thresholds(steps: list[dm.Threshold]) -> db.ThresholdsConfig:
    config = db.ThresholdsConfig()
    config.mode(dm.ThresholdsMode("absolute"))
    config.steps(steps)
    return config


# --- queries ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class Query:
    expr: str
    legend: str = ""
    instant: bool = False
    table: bool = False


def q(expr: str, legend: str = "", *, instant: bool = False, table_format: bool = False) -> Query:
    return Query(expr, legend, instant or table_format, table_format)


def _target(query: Query, index: int) -> prometheus.Dataquery:
    target = prometheus.Dataquery()
    target.expr(query.expr).ref_id(chr(ord("A") + index)).datasource(DATASOURCE).legend_format(query.legend or "__auto")
    if query.table:
        target.format(pm.PromQueryFormat("table"))
    if query.instant:
        target.instant()
    else:
        target.range()
    return target


# --- what every kind of panel has --------------------------------------------------------------
class _Panel(Protocol):
    def title(self, title: str) -> object: ...
    def datasource(self, datasource: dm.DataSourceRef) -> object: ...
    def span(self, w: int) -> object: ...
    def height(self, h: int) -> object: ...
    def unit(self, unit: str) -> object: ...
    def decimals(self, decimals: float) -> object: ...
    def description(self, description: str) -> object: ...
    def min(self, min_val: float) -> object: ...
    def max(self, max_val: float) -> object: ...
    def thresholds(self, thresholds: cogbuilder.Builder[dm.ThresholdsConfig]) -> object: ...
    def with_target(self, target: cogbuilder.Builder[cogvariants.Dataquery]) -> object: ...


P = TypeVar("P", bound=_Panel)
Panel = timeseries.Panel | stat.Panel | table.Panel | statushistory.Panel | bargauge.Panel | heatmap.Panel


class Look(TypedDict, total=False):
    """What a panel shows besides its title and queries: unit (default short), description,
    threshold colours (``steps``; none: the kind's own), the value range (``lo``, ``hi``), whole
    numbers (``decimals=0``) and its size in grid units (``w`` of 24, ``h``: the kind's own)."""

    unit: str
    description: str
    steps: list[dm.Threshold] | None
    lo: float | None
    hi: float | None
    decimals: int | None
    w: int
    h: int


class _Range(TypedDict):
    unit: str
    lo: float
    hi: float


RATIO = _Range(unit="percentunit", lo=0, hi=1)  # a share, 0 to 100%: graph(..., **RATIO)


def _set_up(panel: P, title: str, look: Look, queries: Iterable[Query], default_steps: list[dm.Threshold] | None) -> P:
    panel.title(title)
    panel.datasource(DATASOURCE)
    panel.span(look.get("w", 12))
    panel.height(look.get("h", 8))
    panel.unit(look.get("unit", "short"))
    if (decimals := look.get("decimals")) is not None:
        panel.decimals(decimals)  # counts of chips are whole numbers
    if description := look.get("description"):
        panel.description(description)
    if steps := look.get("steps") or default_steps:
        panel.thresholds(_thresholds(steps))
    if (lo := look.get("lo")) is not None:
        panel.min(lo)
    if (hi := look.get("hi")) is not None:
        panel.max(hi)
    for index, query in enumerate(queries):
        panel.with_target(_target(query, index))
    return panel


def _legend(tooltip: str, order: str) -> tuple[cb.VizLegendOptions, cb.VizTooltipOptions]:
    legend = cb.VizLegendOptions()
    legend.display_mode(cm.LegendDisplayMode("list")).placement(cm.LegendPlacement("bottom")).show_legend(True)
    tip = cb.VizTooltipOptions()
    tip.mode(cm.TooltipDisplayMode(tooltip)).sort(cm.SortOrder(order))
    return legend, tip


def _last_value() -> cb.ReduceDataOptions:
    reduce = cb.ReduceDataOptions()
    reduce.calcs(["lastNotNull"]).values(False)
    return reduce


# --- the kinds -------------------------------------------------------------------------------
def graph(title: str, *queries: Query, stack: bool = False, bars: bool = False, **look: Unpack[Look]) -> timeseries.Panel:
    """A time series; ``steps`` are drawn as dashed lines."""
    panel = timeseries.Panel()
    legend, tip = _legend("multi", "desc")
    panel.legend(legend)
    panel.tooltip(tip)
    panel.fill_opacity(60 if stack or bars else 10).line_width(1)
    if bars:
        panel.draw_style(cm.GraphDrawStyle("bars"))
    if stack:
        stacking = cb.StackingConfig()
        stacking.mode(cm.StackingMode("normal"))
        panel.stacking(stacking)
    if look.get("steps"):
        dashed = cb.GraphThresholdsStyleConfig()
        dashed.mode(cm.GraphTresholdsStyleMode("dashed"))
        panel.thresholds_style(dashed)
    return _set_up(panel, title, look, queries, [dm.Threshold(value=None, color=GREEN)])


def rx_tx(title: str, receive: str, transmit: str, legend: str, description: str) -> timeseries.Panel:
    """Bytes per second of each series both ways: received above the axis, transmitted below zero."""
    return graph(title, q(receive, "rx " + legend), q("-" + transmit, "tx " + legend), unit="Bps", w=8, description=description)


def graphs(rows: Iterable[tuple[str, Sequence[tuple[str, str]], str]], **look: Unpack[Look]) -> list[Panel]:
    """One graph per row of a table (title, the expression and legend of each line, description),
    all with ``look``."""
    return [graph(title, *(q(expr, legend) for expr, legend in lines), **(look | Look(description=text))) for title, lines, text in rows]


def single(title: str, query: Query, **look: Unpack[Look]) -> stat.Panel:
    """One number, coloured by ``steps``, over its sparkline."""
    panel = stat.Panel()
    panel.reduce_options(_last_value())
    panel.color_mode(cm.BigValueColorMode("value")).graph_mode(cm.BigValueGraphMode("area"))
    return _set_up(panel, title, Look(w=4, h=4) | look, [query], [dm.Threshold(value=None, color=BLUE)])


def grid(title: str, *queries: Query, hidden: Iterable[str] = (), sort: str | None = None, **look: Unpack[Look]) -> table.Panel:
    """A table of instant queries (merged when several), ``hidden`` columns left out."""
    panel = table.Panel()
    panel.show_header(True).cell_height(cm.TableCellHeight("sm"))
    if len(queries) > 1:
        panel.with_transformation(dm.DataTransformerConfig(id_val="merge", options={}))
    exclude = {"Time": True, **{name: True for name in hidden}}
    panel.with_transformation(dm.DataTransformerConfig(id_val="organize", options={"excludeByName": exclude}))
    if sort:
        order = cb.TableSortByFieldState()
        order.display_name(sort).desc(False)
        panel.sort_by([order])
    return _set_up(panel, title, look, queries, None)


def info_grid(title: str, expr: str, *, hidden: Iterable[str] = INFO_HIDDEN, **look: Unpack[Look]) -> table.Panel:
    """The series of ``expr`` as a table of their labels (an info metric)."""
    return grid(title, q(expr, table_format=True), hidden=hidden, **look)


def history(title: str, query: Query, *, mappings: list[dm.ValueMapping] | None = None, **look: Unpack[Look]) -> statushistory.Panel:
    """A status history: one band per series, coloured by ``steps``, values named by ``mappings``."""
    panel = statushistory.Panel()
    panel.show_value(cm.VisibilityMode("never"))
    legend, tip = _legend("single", "none")
    panel.legend(legend)
    panel.tooltip(tip)
    panel.row_height(0.9).col_width(0.9).fill_opacity(80).line_width(0)
    color = db.FieldColor()
    color.mode(dm.FieldColorModeId("thresholds"))
    panel.color_scheme(color)
    if mappings:
        panel.mappings(mappings)
    return _set_up(panel, title, Look(w=24, h=9) | look, [query], [dm.Threshold(value=None, color=GREEN)])


def two_states(title: str, query: Query, names: tuple[str, str], **look: Unpack[Look]) -> statushistory.Panel:
    """A 0/1 state over time: red ``names[0]`` at 0, green ``names[1]`` at 1."""
    return history(title, query, mappings=value_names(((names[0], RED), (names[1], GREEN))), **(look | Look(steps=UP_GREEN)))


def bars(title: str, *queries: Query, **look: Unpack[Look]) -> bargauge.Panel:
    """Horizontal bars of the latest values."""
    panel = bargauge.Panel()
    panel.display_mode(cm.BarGaugeDisplayMode("gradient")).orientation(cm.VizOrientation("horizontal"))
    panel.reduce_options(_last_value())
    panel.show_unfilled(True)
    return _set_up(panel, title, look, queries, [dm.Threshold(value=None, color=BLUE)])


def heat(title: str, query: Query, *, unit: str, description: str = "", bucket: str = "0.1") -> heatmap.Panel:
    """How many series sit at each level (0..1, ``bucket`` wide) over time."""
    panel = heatmap.Panel()
    panel.calculate(True)
    buckets = cb.HeatmapCalculationBucketConfig()
    buckets.mode(cm.HeatmapCalculationMode("size")).value(bucket)
    calculation = cb.HeatmapCalculationOptions()
    calculation.y_buckets(buckets)
    panel.calculation(calculation)
    colors = heatmap.HeatmapColorOptions()
    colors.mode(hm.HeatmapColorMode("scheme")).scheme("Oranges").fill("dark-orange")
    colors.scale(hm.HeatmapColorScale("exponential")).exponent(0.5).steps(64).reverse(False)
    panel.color(colors)
    axis = heatmap.YAxisConfig()
    axis.unit(unit).min(0).max(1)
    panel.y_axis(axis).show_legend().show_tooltip().cell_gap(1)
    return _set_up(panel, title, Look(unit=unit, description=description, h=9), [query], None)
