"""Grafana panels and dashboards built with Grafana's typed builders (grafana-foundation-sdk):
the look shared by every dashboard (units, threshold colours from the table, variables, the
fixed uids) and the Board that assembles one into plain JSON-ready data."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from grafana_foundation_sdk.builders import (
    bargauge,
    heatmap,
    prometheus,
    stat,
    statushistory,
    table,
    timeseries,
)
from grafana_foundation_sdk.builders import common as cb
from grafana_foundation_sdk.builders import dashboard as db
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models import common as cm
from grafana_foundation_sdk.models import dashboard as dm
from grafana_foundation_sdk.models import prometheus as pm

from exporter.generate.common import MARKER
from exporter.thresholds.table import Indicator

DATASOURCE = dm.DataSourceRef(type_val="prometheus", uid="${datasource}")
TAGS = ["cann-exporter", "npu"]
UIDS = {
    "fleet-overview": "cann-npu-fleet",
    "node-chip-detail": "cann-npu-node",
    "training-jobs": "cann-npu-jobs",
    "capacity-planning": "cann-npu-capacity",
    "exporter-health": "cann-exporter-health",
}
TITLES = {
    "fleet-overview": "NPU / Fleet overview",
    "node-chip-detail": "NPU / Node and chip detail",
    "training-jobs": "NPU / Training jobs",
    "capacity-planning": "NPU / Capacity planning",
    "exporter-health": "NPU / Exporter health",
}

# Label filters the variables provide.
SEL = 'job=~"$job", instance=~"$instance"'
CHIP_SEL = 'job=~"$job", instance=~"$instance", device=~"$device"'
JOB_SEL = 'job=~"$job", job_name=~"$job_name"'
CHIP_LEGEND = "{{instance}} {{device}}"
JOB_LEGEND = "{{job_name}}/{{rank}}"
UTIL = "npu_aicore_utilization_ratio"

GREEN, ORANGE, RED, BLUE, GREY = "green", "orange", "red", "blue", "text"


# --- thresholds from the table ------------------------------------------------------------------
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


def limit_steps(limit: float | None, above: str = RED) -> list[dm.Threshold]:
    steps = [dm.Threshold(value=None, color=GREEN)]
    if limit is not None:
        steps.append(dm.Threshold(value=limit, color=above))
    return steps


def _thresholds(steps: list[dm.Threshold]) -> db.ThresholdsConfig:
    return db.ThresholdsConfig().mode(dm.ThresholdsMode.ABSOLUTE).steps(steps)


# --- panels ----------------------------------------------------------------------------------
@dataclass
class Query:
    expr: str
    legend: str = ""
    instant: bool = False
    table: bool = False


def q(expr: str, legend: str = "", *, instant: bool = False, table_format: bool = False) -> Query:
    return Query(expr, legend, instant or table_format, table_format)


def _targets(builder: Any, queries: Iterable[Query]) -> Any:
    for index, query in enumerate(queries):
        target = prometheus.Dataquery().expr(query.expr).ref_id(chr(ord("A") + index)).datasource(DATASOURCE)
        target = target.legend_format(query.legend or "__auto")
        if query.table:
            target = target.format(pm.PromQueryFormat.TABLE).instant()
        elif query.instant:
            target = target.instant()
        else:
            target = target.range()
        builder = builder.with_target(target)
    return builder


def _common(builder: Any, title: str, description: str, unit: str, w: int, h: int, decimals: int | None = None) -> Any:
    builder = builder.title(title).datasource(DATASOURCE).span(w).height(h).unit(unit)
    if decimals is not None:
        builder = builder.decimals(decimals)  # counts of chips are whole numbers
    return builder.description(description) if description else builder


def graph(
    title: str,
    *queries: Query,
    unit: str = "short",
    description: str = "",
    steps: list[dm.Threshold] | None = None,
    lo: float | None = None,
    hi: float | None = None,
    stack: bool = False,
    w: int = 12,
    h: int = 8,
    bars: bool = False,
    decimals: int | None = None,
) -> timeseries.Panel:
    panel = _common(timeseries.Panel(), title, description, unit, w, h, decimals)
    panel = panel.legend(
        cb.VizLegendOptions().display_mode(cm.LegendDisplayMode.LIST).placement(cm.LegendPlacement.BOTTOM).show_legend(True)
    )
    panel = panel.tooltip(cb.VizTooltipOptions().mode(cm.TooltipDisplayMode.MULTI).sort(cm.SortOrder.DESCENDING))
    panel = panel.fill_opacity(60 if stack or bars else 10).line_width(1)
    if bars:
        panel = panel.draw_style(cm.GraphDrawStyle.BARS)
    if stack:
        panel = panel.stacking(cb.StackingConfig().mode(cm.StackingMode.NORMAL))
    if steps:
        panel = panel.thresholds(_thresholds(steps)).thresholds_style(
            cb.GraphThresholdsStyleConfig().mode(cm.GraphTresholdsStyleMode.DASHED)
        )
    else:
        panel = panel.thresholds(_thresholds([dm.Threshold(value=None, color=GREEN)]))
    if lo is not None:
        panel = panel.min(lo)
    if hi is not None:
        panel = panel.max(hi)
    return _targets(panel, queries)


def single(
    title: str,
    query: Query,
    *,
    unit: str = "short",
    description: str = "",
    steps: list[dm.Threshold] | None = None,
    w: int = 4,
    h: int = 4,
    lo: float | None = None,
    hi: float | None = None,
    decimals: int | None = None,
) -> stat.Panel:
    panel = _common(stat.Panel(), title, description, unit, w, h, decimals)
    panel = panel.reduce_options(cb.ReduceDataOptions().calcs(["lastNotNull"]).values(False))
    panel = panel.color_mode(cm.BigValueColorMode.VALUE).graph_mode(cm.BigValueGraphMode.AREA)
    panel = panel.thresholds(_thresholds(steps or [dm.Threshold(value=None, color=BLUE)]))
    if lo is not None:
        panel = panel.min(lo)
    if hi is not None:
        panel = panel.max(hi)
    return _targets(panel, [query])


def grid(
    title: str,
    *queries: Query,
    unit: str = "short",
    description: str = "",
    steps: list[dm.Threshold] | None = None,
    hidden: Iterable[str] = (),
    w: int = 12,
    h: int = 8,
    sort: str | None = None,
) -> table.Panel:
    panel = _common(table.Panel(), title, description, unit, w, h).show_header(True)
    panel = panel.cell_height(cm.TableCellHeight.SM)
    if steps:
        panel = panel.thresholds(_thresholds(steps))
    if len(queries) > 1:
        panel = panel.with_transformation(dm.DataTransformerConfig(id_val="merge", options={}))
    exclude = {"Time": True, **{name: True for name in hidden}}
    panel = panel.with_transformation(dm.DataTransformerConfig(id_val="organize", options={"excludeByName": exclude}))
    if sort:
        panel = panel.sort_by([cb.TableSortByFieldState().display_name(sort).desc(False)])
    return _targets(panel, queries)


def history(
    title: str,
    query: Query,
    *,
    unit: str = "short",
    description: str = "",
    steps: list[dm.Threshold] | None = None,
    mappings: list[Any] | None = None,
    w: int = 24,
    h: int = 9,
    lo: float | None = None,
    hi: float | None = None,
) -> statushistory.Panel:
    panel = _common(statushistory.Panel(), title, description, unit, w, h).show_value(cm.VisibilityMode.NEVER)
    panel = panel.legend(
        cb.VizLegendOptions().display_mode(cm.LegendDisplayMode.LIST).placement(cm.LegendPlacement.BOTTOM).show_legend(True)
    )
    panel = panel.tooltip(cb.VizTooltipOptions().mode(cm.TooltipDisplayMode.SINGLE).sort(cm.SortOrder.NONE))
    panel = panel.row_height(0.9).col_width(0.9).fill_opacity(80).line_width(0)
    panel = panel.thresholds(_thresholds(steps or [dm.Threshold(value=None, color=GREEN)]))
    panel = panel.color_scheme(db.FieldColor().mode(dm.FieldColorModeId.THRESHOLDS))
    if mappings:
        panel = panel.mappings(mappings)
    if lo is not None:
        panel = panel.min(lo)
    if hi is not None:
        panel = panel.max(hi)
    return _targets(panel, [query])


def bars(
    title: str,
    *queries: Query,
    unit: str = "short",
    description: str = "",
    steps: list[dm.Threshold] | None = None,
    w: int = 12,
    h: int = 8,
    lo: float | None = None,
    hi: float | None = None,
    decimals: int | None = None,
) -> bargauge.Panel:
    panel = _common(bargauge.Panel(), title, description, unit, w, h, decimals)
    panel = panel.display_mode(cm.BarGaugeDisplayMode.GRADIENT).orientation(cm.VizOrientation.HORIZONTAL)
    panel = panel.reduce_options(cb.ReduceDataOptions().calcs(["lastNotNull"]).values(False)).show_unfilled(True)
    panel = panel.thresholds(_thresholds(steps or [dm.Threshold(value=None, color=BLUE)]))
    if lo is not None:
        panel = panel.min(lo)
    if hi is not None:
        panel = panel.max(hi)
    return _targets(panel, queries)


def heat(title: str, query: Query, *, unit: str, description: str = "", bucket: str = "0.1", w: int = 12, h: int = 9) -> heatmap.Panel:
    panel = _common(heatmap.Panel(), title, description, unit, w, h).calculate(True)
    panel = panel.calculation(
        cb.HeatmapCalculationOptions().y_buckets(cb.HeatmapCalculationBucketConfig().mode(cm.HeatmapCalculationMode.SIZE).value(bucket))
    )
    panel = panel.color(
        heatmap.HeatmapColorOptions()
        .mode("scheme")
        .scheme("Oranges")
        .fill("dark-orange")
        .scale("exponential")
        .exponent(0.5)
        .steps(64)
        .reverse(False)
    )
    panel = panel.y_axis(heatmap.YAxisConfig().unit(unit).min(0).max(1)).show_legend().show_tooltip().cell_gap(1)
    return _targets(panel, [query])


HEALTH_MAPPINGS = [
    dm.ValueMap(
        options={
            "0": dm.ValueMappingResult(text="OK", color=GREEN, index=0),
            "1": dm.ValueMappingResult(text="Warning", color="yellow", index=1),
            "2": dm.ValueMappingResult(text="Alarm", color=ORANGE, index=2),
            "3": dm.ValueMappingResult(text="Critical", color=RED, index=3),
            "4": dm.ValueMappingResult(text="Unknown", color="purple", index=4),
        }
    )
]
HEALTH_CODE = " or ".join(
    f'{code} * npu_health{{{SEL}, state="{state}"}}' for code, state in enumerate(("OK", "Warning", "Alarm", "Critical", "Unknown"))
)


# --- dashboard assembly ------------------------------------------------------------------------
@dataclass
class Board:
    key: str
    description: str
    time_from: str = "now-6h"
    refresh: str = "1m"
    variables: list[Any] = field(default_factory=list)
    items: list[tuple[str, Any]] = field(default_factory=list)  # ("row", title) | ("panel", builder)

    def row(self, title: str) -> Board:
        self.items.append(("row", title))
        return self

    def add(self, *panels: Any) -> Board:
        self.items.extend(("panel", p) for p in panels)
        return self

    def build(self) -> dict[str, Any]:
        dash = (
            db.Dashboard(TITLES[self.key])
            .uid(UIDS[self.key])
            .tags(TAGS)
            .description(f"{self.description} ({MARKER})")
            .time(self.time_from, "now")
            .refresh(self.refresh)
            .timezone("browser")
            .editable()
            .tooltip(dm.DashboardCursorSync.CROSSHAIR)
            .link(
                db.DashboardLink("NPU dashboards")
                .type(dm.DashboardLinkType.DASHBOARDS)
                .tags(["cann-exporter"])
                .as_dropdown(True)
                .include_vars(True)
                .keep_time(True)
            )
        )
        for variable in self.variables:
            dash = dash.with_variable(variable)
        for ident, (kind, item) in enumerate(self.items, start=1):
            if kind == "row":
                dash = dash.with_row(db.Row(item).id(ident))
            else:
                dash = dash.with_panel(item.id(ident))
        data = json.loads(json.dumps(dash.build(), cls=JSONEncoder))
        data["schemaVersion"] = 39  # Grafana 10.4/11; older files are migrated on load anyway
        data["annotations"] = {
            "list": [
                {
                    "builtIn": 1,
                    "datasource": {"type": "grafana", "uid": "-- Grafana --"},
                    "enable": True,
                    "hide": True,
                    "iconColor": "rgba(0, 211, 255, 1)",
                    "name": "Annotations & Alerts",
                    "type": "dashboard",
                }
            ]
        }
        for variable in data.get("templating", {}).get("list", []):
            variable.pop("id", None)
        return data


def datasource_var() -> db.DatasourceVariable:
    return db.DatasourceVariable("datasource").label("Data source").type("prometheus")


def query_var(
    name: str, label: str, query: str, *, multi: bool = True, include_all: bool = True, all_value: str | None = ".*"
) -> db.QueryVariable:
    """A picker filled by ``query``. ``all_value=None``: "All" is the regex of the listed values,
    so a picker whose list follows another one's choice (instance after node) narrows by it."""
    var = (
        db.QueryVariable(name)
        .label(label)
        .datasource(DATASOURCE)
        .query({"query": query, "refId": "PrometheusVariableQueryEditor-VariableQuery", "qryType": 1})
        .refresh(dm.VariableRefresh.ON_TIME_RANGE_CHANGED)
        .sort(dm.VariableSort.ALPHABETICAL_ASC)
        .multi(multi)
        .include_all(include_all)
    )
    if include_all and all_value is not None:
        var = var.all_value(all_value)
    return var


def node_vars(device: bool = False) -> list[Any]:
    """Data source, job, node and instance (and chip). `node` is the Kubernetes node name the
    ServiceMonitor's relabeling adds; instance lists the targets on the chosen nodes and its All
    is that list (no `.*`), so every panel, filtering by instance, narrows by the node too (the
    recording rules keep job and instance, not node). Without `node` labels (compose, systemd)
    the node list is empty, its All (`.*`, or nothing selected: empty) matches series without the
    label, and instance lists every target."""
    out = [
        datasource_var(),
        query_var("job", "Job", "label_values(npu_devices, job)"),
        query_var("node", "Node", 'label_values(npu_devices{job=~"$job"}, node)'),
        query_var("instance", "Instance", 'label_values(npu_devices{job=~"$job", node=~"$node"}, instance)', all_value=None),
    ]
    if device:
        out.append(query_var("device", "Chip (logic id)", 'label_values(npu_up{job=~"$job", instance=~"$instance"}, device)'))
    return out
