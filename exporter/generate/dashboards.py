"""Grafana dashboards from the threshold table, built with Grafana's typed builders
(grafana-foundation-sdk) and returned as plain JSON-ready dicts.

Every panel queries the `${datasource}` variable (no datasource uid is hard-coded), carries
a unit, and the panels of an indicator of the health table draw its bounds as threshold
lines/colours. Dashboard uids are fixed (UIDS) so links and bookmarks survive regeneration.
"""

from __future__ import annotations

from typing import Any

from exporter.generate.capacity_board import capacity
from exporter.generate.exporter_board import exporter_health
from exporter.generate.fleet_board import fleet
from exporter.generate.jobs_board import jobs
from exporter.generate.node_board import node
from exporter.thresholds.table import Thresholds

BOARDS = (fleet, node, jobs, capacity, exporter_health)


def dashboards(table_: Thresholds) -> dict[str, dict[str, Any]]:
    """``{file stem: dashboard JSON model}`` of the five dashboards."""
    out = {}
    for make in BOARDS:
        board = make(table_)
        out[board.key] = board.build()
    return out
