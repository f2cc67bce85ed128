"""deploy/prometheus: the scaling examples of docs/scaling.md pass promtool, the federation
rules pass their promtool unit tests, and every metric they name is one the exporter exposes."""

from __future__ import annotations

import re
from fnmatch import fnmatch
from pathlib import Path

import pytest
import yaml

from tests.support.deploy import DEPLOY, promtool_check_config, run, tool
from tests.support.paths import ROOT

PROM = DEPLOY / "prometheus"


def exposed_names() -> set[str]:
    from exporter.app.catalogue import ALL_METRICS
    from exporter.pods.metrics import POD_METRICS

    return {spec.name for spec in (*ALL_METRICS, *POD_METRICS)}


@pytest.mark.parametrize("name", ["remote-write.prometheus.yml", "federation.prometheus.yml", "victoriametrics.prometheus.yml"])
def test_example_configs_pass_promtool(name: str) -> None:
    promtool_check_config(PROM / name)


def test_federation_rules_pass_promtool_and_their_unit_tests() -> None:
    promtool = tool("promtool")
    check = run([promtool, "check", "rules", str(PROM / "federation.rules.yaml")])
    assert check.returncode == 0, check.stdout + check.stderr
    test = run([promtool, "test", "rules", "federation.rules.test.yaml"], cwd=PROM)
    assert test.returncode == 0, test.stdout + test.stderr


def test_rules_use_only_exposed_metrics() -> None:
    exposed = exposed_names()
    rules = yaml.safe_load((PROM / "federation.rules.yaml").read_text())
    used = set()
    for group in rules["groups"]:
        for rule in group["rules"]:
            assert re.fullmatch(r"(instance|namespace|job):npu_[a-z0-9_]+:[a-z0-9_]+", rule["record"]), rule["record"]
            used |= set(re.findall(r"\b(npu_[a-z0-9_]+)\b", rule["expr"]))
    assert used and used <= exposed, used - exposed


def test_remote_write_drops_only_existing_series() -> None:
    config = yaml.safe_load((PROM / "remote-write.prometheus.yml").read_text())
    (target,) = config["remote_write"]
    dropped = [r["regex"] for r in target["write_relabel_configs"] if r["action"] == "drop"]
    assert dropped == ["npu_process_memory_bytes"] and dropped[0] in exposed_names()
    assert set(config["global"]["external_labels"]) == {"cluster", "replica"}


def test_remote_write_loads_every_rule_file_of_the_repo() -> None:
    """The rules directory is where alerts/ is copied: its glob must match those file names."""
    config = yaml.safe_load((PROM / "remote-write.prometheus.yml").read_text())
    globs = [Path(g).name for g in config["rule_files"] if g.startswith("/etc/prometheus/rules/")]
    shipped = sorted(p.name for p in (ROOT / "alerts").glob("*.y*ml"))
    assert shipped and all(any(fnmatch(name, g) for g in globs) for name in shipped), (globs, shipped)


def test_federation_matches_the_recorded_names() -> None:
    config = yaml.safe_load((PROM / "federation.prometheus.yml").read_text())
    (job,) = config["scrape_configs"]
    assert job["honor_labels"] is True and job["metrics_path"] == "/federate"
    selector = re.search(r'__name__=~"([^"]+)"', job["params"]["match[]"][0]).group(1)
    rules = yaml.safe_load((PROM / "federation.rules.yaml").read_text())
    for group in rules["groups"]:
        for rule in group["rules"]:
            assert re.fullmatch(selector, rule["record"]), rule["record"]
