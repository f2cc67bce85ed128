"""A Grafana dashboard put together: rows of panels (panels.py), the variables the panels filter
by, and the settings every dashboard shares (fixed uids, tags, links, the generated marker),
as plain JSON-ready data."""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field
from typing import Any

from grafana_foundation_sdk.builders import dashboard as db
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models import dashboard as dm

from exporter.generate.common import MARKER
from exporter.generate.panels import DATASOURCE, Panel

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
ANNOTATIONS = {
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
Variable = db.DatasourceVariable | db.QueryVariable | db.TextBoxVariable


@dataclass
class Board:
    key: str
    description: str
    time_from: str = "now-6h"
    refresh: str = "1m"
    variables: list[Variable] = field(default_factory=list)
    items: list[str | Panel] = field(default_factory=list)  # a row's title, or a panel

    def row(self, title: str, *panels: Panel) -> Board:
        """A row and the panels under it."""
        self.items += [title, *panels]
        return self

    def add(self, *panels: Panel) -> Board:
        self.items += panels
        return self

    def build(self) -> dict[str, Any]:
        dash = db.Dashboard(TITLES[self.key])
        dash.uid(UIDS[self.key]).tags(TAGS).description(f"{self.description} ({MARKER})").time(self.time_from, "now")
        dash.refresh(self.refresh).timezone("browser").editable().tooltip(dm.DashboardCursorSync.CROSSHAIR)
        link = db.DashboardLink("NPU dashboards")
        link.type(dm.DashboardLinkType("dashboards")).tags(["cann-exporter"]).as_dropdown(True).include_vars(True).keep_time(True)
        dash.link(link)
        for variable in self.variables:
            dash.with_variable(variable)
        for ident, item in enumerate(self.items, start=1):
            if isinstance(item, str):
                row = db.Row(item)
                row.id(ident)
                dash.with_row(row)
            else:
                item.id(ident)
                dash.with_panel(item)
        data: dict[str, Any] = json.loads(json.dumps(dash.build(), cls=JSONEncoder))
        data["schemaVersion"] = 39  # Grafana 10.4/11; older files are migrated on load anyway
        data["annotations"] = copy.deepcopy(ANNOTATIONS)
        for variable in data.get("templating", {}).get("list", []):
            variable.pop("id", None)
        return data


def datasource_var() -> db.DatasourceVariable:
    variable = db.DatasourceVariable("datasource")
    variable.label("Data source").type("prometheus")
    return variable


def query_var(
    name: str, label: str, query: str, *, multi: bool = True, include_all: bool = True, all_value: str | None = ".*"
) -> db.QueryVariable:
    """A picker filled by ``query``. ``all_value=None``: "All" is the regex of the listed values,
    so a picker whose list follows another one's choice (instance after node) narrows by it."""
    variable = db.QueryVariable(name)
    variable.label(label).datasource(DATASOURCE)
    variable.query({"query": query, "refId": "PrometheusVariableQueryEditor-VariableQuery", "qryType": 1})
    variable.refresh(dm.VariableRefresh.ON_TIME_RANGE_CHANGED).sort(dm.VariableSort.ALPHABETICAL_ASC)
    variable.multi(multi).include_all(include_all)
    if include_all and all_value is not None:
        variable.all_value(all_value)
    return variable


def job_var() -> db.QueryVariable:
    """The Prometheus job of the exporters."""
    return query_var("job", "Job", "label_values(npu_devices, job)")


def node_vars(device: bool = False) -> list[Variable]:
    """Data source, job, node and instance (and chip). `node` is the Kubernetes node name the
    ServiceMonitor's relabeling adds; instance lists the targets on the chosen nodes and its All
    is that list (no `.*`), so every panel, filtering by instance, narrows by the node too (the
    recording rules keep job and instance, not node). Without `node` labels (compose, systemd)
    the node list is empty, its All (`.*`, or nothing selected: empty) matches series without the
    label, and instance lists every target."""
    out: list[Variable] = [
        datasource_var(),
        job_var(),
        query_var("node", "Node", 'label_values(npu_devices{job=~"$job"}, node)'),
        query_var("instance", "Instance", 'label_values(npu_devices{job=~"$job", node=~"$node"}, instance)', all_value=None),
    ]
    if device:
        out.append(query_var("device", "Chip (logic id)", 'label_values(npu_up{job=~"$job", instance=~"$instance"}, device)'))
    return out
