"""Serialise the generated rules and dashboards: one place for file names, headers and format.

:func:`render` is pure (table in, ``{relative path: text}`` out); :func:`write` puts the
files under a directory. The drift test compares :func:`render` of the packaged table with
the committed alerts/ and grafana/.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from exporter.generate.common import HEADER, MARKER, with_windows
from exporter.generate.dashboards import dashboards
from exporter.generate.inhibit import inhibit_comment, inhibit_rules
from exporter.generate.recording import recording_rules, recording_specs
from exporter.generate.rules import alerts
from exporter.thresholds.table import Thresholds

ALERTS_FILE = "alerts/cann-exporter.alerts.yml"
RECORDING_FILE = "alerts/cann-exporter.rules.yml"
INHIBIT_FILE = "alertmanager/cann-exporter.inhibit.yml"
DASHBOARD_DIR = "grafana/dashboards"
DATASOURCE_FILE = "grafana/provisioning/datasources/cann-exporter.yml"
PROVIDER_FILE = "grafana/provisioning/dashboards/cann-exporter.yml"
# Where the provisioning provider expects the dashboards inside the Grafana container (the
# docker-compose stack mounts grafana/dashboards there).
GRAFANA_DASHBOARD_PATH = "/var/lib/grafana/dashboards/cann-exporter"
GENERATED_GLOBS = ("alerts/*.yml", "alerts/*.yaml", "alertmanager/*.yml", "grafana/dashboards/*.json", "grafana/provisioning/*/*.yml")


class _Dumper(yaml.SafeDumper):
    """Block scalars for multi-line strings (PromQL reads as written), no anchors."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str)


def dump_yaml(data: Any, comment: str = "") -> str:
    lines = HEADER + "".join(f"# {line}".rstrip() + "\n" for line in comment.splitlines())
    return lines + yaml.dump(data, Dumper=_Dumper, sort_keys=False, default_flow_style=False, width=10_000, allow_unicode=True)


def dump_json(data: Any) -> str:
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def provisioning() -> dict[str, dict[str, Any]]:
    datasource = {
        "apiVersion": 1,
        "datasources": [
            {
                "name": "Prometheus",
                "type": "prometheus",
                "access": "proxy",
                "url": "http://prometheus:9090",
                "isDefault": True,
                "jsonData": {"timeInterval": "15s"},
            }
        ],
    }
    provider = {
        "apiVersion": 1,
        "providers": [
            {
                "name": "cann-exporter",
                "folder": "NPU",
                "type": "file",
                "disableDeletion": False,
                "allowUiUpdates": False,
                "updateIntervalSeconds": 30,
                "options": {"path": GRAFANA_DASHBOARD_PATH, "foldersFromFilesStructure": False},
            }
        ],
    }
    return {DATASOURCE_FILE: datasource, PROVIDER_FILE: provider}


def render(table: Thresholds, *, windows: Mapping[str, str] | None = None) -> dict[str, str]:
    """Every generated file (path relative to the output directory) and its text."""
    files: dict[str, str] = {}
    files[ALERTS_FILE] = dump_yaml(
        alerts(table, windows=windows),
        (
            "Alerting rules of the NPU exporter (the contract alert names are in docs/runbooks.md, with a runbook each).\n"
            "Unit tests: promtool test rules alerts/tests/*.yml"
        ),
    )
    index = [
        f"{r.record}{'{' + ','.join(f'{k}=...' for k, _ in r.labels) + '}' if r.labels else ''}: {r.help}"
        for _, _, records in recording_specs(with_windows(table, windows))
        for r in records
    ]
    unique = list(dict.fromkeys(index))
    files[RECORDING_FILE] = dump_yaml(
        recording_rules(table, windows=windows),
        (
            "Recording rules for capacity planning, named level:metric:operations. Levels: chip (one\n"
            "chip: job, instance, npu, chip, device), instance (a node), namespace (chips the kubelet\n"
            "allocated to the namespace's pods, npu_pod_info), cluster (everything this Prometheus scrapes).\n\n" + "\n".join(unique)
        ),
    )
    files[INHIBIT_FILE] = dump_yaml({"inhibit_rules": inhibit_rules()}, inhibit_comment())
    for name, dashboard in dashboards(table).items():
        files[f"{DASHBOARD_DIR}/{name}.json"] = dump_json(dashboard)
    for path, data in provisioning().items():
        files[path] = dump_yaml(data)
    return files


def write(out: Path, files: Mapping[str, str]) -> list[Path]:
    """Write ``files`` under ``out``; remove generated files (by their marker) no longer produced."""
    written = []
    for rel, text in files.items():
        path = out / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")
        written.append(path)
    for stale in stale_files(out, files):
        stale.unlink()
    return written


def stale_files(out: Path, files: Mapping[str, str]) -> list[Path]:
    """Files under ``out`` that carry the generated marker but are not in ``files``."""
    found = []
    for pattern in GENERATED_GLOBS:
        for path in sorted(out.glob(pattern)):
            rel = path.relative_to(out).as_posix()
            if rel not in files and MARKER in path.read_text(encoding="utf-8", errors="replace"):
                found.append(path)
    return found
