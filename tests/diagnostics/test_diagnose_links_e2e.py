"""`diagnose` on the simulator's degraded nodes through a real exporter and a real Prometheus:
a 910B3 node whose (fixture) sysfs shows the 8 chips of which npu-smi lists 7, and an Atlas A3
node configured to have 16 dies of which it serves 14. On both, logic id 3 has an HCCS link NOK
whose CRC errors grow (one a minute).

From one node's /metrics (one read): "7 of 8 chips" with the source of the expectation, the
link NOK (NPUHCCSLinkDown) with the link that lost lanes, the error count shown undated. From
Prometheus, once the errors have grown within the window: the new errors judged (NPUHCCSErrors)
beside the link, and the missing chips. Only 127.0.0.1; every wait a bounded poll; the
processes started here are stopped here.
"""

from __future__ import annotations

import json
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from exporter.simulator.scenarios import DEGRADED_HCCS_LOGIC_ID
from tests.support.cli import run_diagnose
from tests.support.paths import FIXTURES
from tests.support.prometheus import running
from tests.support.serve import Exporter

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

# The interconnect reads every 5 s (hccs-bw sampling 10 ms), no hccn_tool: each simulated call
# is a Python process, and the 2 cores also run Prometheus and the other node.
FAST = [
    "--npu-smi.interval=1s",
    "--npu-smi.detail-interval=5s",
    "--npu-smi.details=health,hccs,hccs-bw,pcie-err,sio-info",
    "--npu-smi.hardware-interval=5s",
    "--npu-smi.hccs-bw-interval=10s",
    "--npu-smi.hccs-bw-time=10ms",
    "--no-npu-smi.board",
    "--no-hccn.enabled",
    "--max-age=60s",
]
B3_HCCS = f"NPU {DEGRADED_HCCS_LOGIC_ID} chip 0 (device {DEGRADED_HCCS_LOGIC_ID})"
A3_HCCS = f"NPU {DEGRADED_HCCS_LOGIC_ID // 2} chip {DEGRADED_HCCS_LOGIC_ID % 2} (device {DEGRADED_HCCS_LOGIC_ID})"


@dataclass(frozen=True)
class Nodes:
    b3: Exporter
    a3: Exporter

    def target(self, node: Exporter) -> str:
        return f"127.0.0.1:{node.port}"


def _hccs_read(found: dict[Any, Any]) -> bool:
    return any(name == "npu_hccs_healthy" for name, *_ in found) and any(name == "npu_expected_devices" for name, *_ in found)


@pytest.fixture(scope="module")
def nodes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Nodes]:
    sysfs = FIXTURES / "sysfs" / "910B3-8card__written"
    b3 = Exporter(["--simulate", "degraded", *FAST, f"--npu-smi.sysfs={sysfs}"], tmp_path_factory.mktemp("b3"))
    a3 = Exporter(
        ["--simulate", "degraded", "--simulate.model", "a3", *FAST, "--npu-smi.expected-devices=16"], tmp_path_factory.mktemp("a3")
    )
    try:
        for node in (b3, a3):
            node.wait_for(_hccs_read, deadline=90)
        yield Nodes(b3, a3)
    finally:
        b3.stop()
        a3.stop()


@pytest.fixture(scope="module")
def prometheus(nodes: Nodes, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    root = tmp_path_factory.mktemp("prometheus-links")
    targets = [nodes.target(nodes.b3), nodes.target(nodes.a3)]
    config = root / "prometheus.yml"
    config.write_text(
        json.dumps(
            {
                "global": {"scrape_interval": "1s", "scrape_timeout": "1s"},
                "scrape_configs": [{"job_name": "cann-exporter", "static_configs": [{"targets": targets}]}],
            }
        )
    )
    with running(config, root / "data", root) as url:
        yield url


def _query(url: str, expr: str) -> list[dict[str, Any]]:
    with urllib.request.urlopen(f"{url}/api/v1/query?" + urllib.parse.urlencode({"query": expr}), timeout=10) as answer:
        result: list[dict[str, Any]] = json.loads(answer.read())["data"]["result"]
    return result


def _off(doc: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(f["subject"], f["check"]): f for f in doc["levels"]["hardware"]}


def test_one_nodes_metrics_name_the_missing_chips_and_the_hccs_link(nodes: Nodes) -> None:
    for node, missing, hccs, basis in (
        (nodes.b3, "7 of 8 chips", B3_HCCS, 'npu_expected_devices{source="pci"} (the Ascend PCI functions in sysfs)'),
        (nodes.a3, "14 of 16 chips", A3_HCCS, 'npu_expected_devices{source="config"} (npu_smi.expected_devices)'),
    ):
        result = run_diagnose("--metrics-url", f"http://{nodes.target(node)}/metrics", "--format", "json")
        assert result.code == 1, result.err
        doc = json.loads(result.out)
        found = _off(doc)
        chips = found[("this node: chips", "missing")]
        assert (chips["verdict"], chips["alert"]) == ("abnormal", "NPUMissing")
        assert chips["detail"] == f"{missing} listed by npu-smi; expected from {basis}"
        link = found[(hccs, "hccs_link")]
        assert (link["title"], link["verdict"], link["alert"]) == ("HCCS links NOK", "abnormal", "NPUHCCSLinkDown")
        assert "link 2: 2 of 4 lanes (1100, 112 Gbit/s)" in link["detail"] and "CRC errors" in link["detail"]
        healthy = [f for (s, check), f in found.items() if check == "hccs_link" and s != hccs]
        assert healthy and {f["verdict"] for f in healthy} == {"healthy"}
        # one read cannot date the link's errors: shown, not judged
        count = found[(hccs, "hccs_errors")]
        assert count["verdict"] is None and count["value"] > 0 and "one reading cannot date them" in count["detail"]
        advice = {a["key"]: a for a in doc["advice"]}
        assert any("npu-smi info -t hccs" in lever for lever in advice["NPUHCCSLinkDown"]["levers"])


def test_prometheus_judges_the_new_hccs_errors_beside_the_link(nodes: Nodes, prometheus: str) -> None:
    b3, a3 = nodes.target(nodes.b3), nodes.target(nodes.a3)
    end = time.monotonic() + 150
    while not all(_query(prometheus, f'increase(npu_hccs_errors_total{{instance="{t}"}}[3m]) > 0') for t in (b3, a3)):
        assert time.monotonic() < end, "the failing links' CRC errors did not grow within 150 s"
        time.sleep(2)
    for target, missing, hccs in ((b3, "7 of 8 chips", B3_HCCS), (a3, "14 of 16 chips", A3_HCCS)):
        result = run_diagnose("--prometheus", prometheus, "--range", "3m", "--selector", f'{{instance="{target}"}}', "--format", "json")
        assert result.code == 1, result.err
        doc = json.loads(result.out)
        found = _off(doc)
        assert found[(f"{target}: chips", "missing")]["detail"].startswith(
            f"{missing} listed by npu-smi; expected from npu_expected_devices"
        )
        link = found[(f"{target} {hccs}", "hccs_link")]
        assert (link["verdict"], link["alert"]) == ("abnormal", "NPUHCCSLinkDown")
        new = found[(f"{target} {hccs}", "hccs_errors")]
        assert (new["title"], new["verdict"], new["alert"]) == ("New HCCS CRC errors", "warning", "NPUHCCSErrors")
        assert new["value"] > 0 and new["detail"].startswith("link 2: ")
        # the other chips' links count none: no error finding for them
        assert [s for (s, check) in found if check == "hccs_errors"] == [f"{target} {hccs}"]
        tips = {a["key"]: a for a in doc["advice"]}
        assert tips["NPUHCCSErrors"]["verdict"] == "warning" and tips["NPUHCCSErrors"]["levers"]


def test_a_node_without_an_expected_count_is_unknown_never_healthy(tmp_path: Path) -> None:
    """Prometheus-free: one read of a node with neither sysfs nor npu_smi.expected_devices."""
    node = Exporter(["--simulate", "healthy", *FAST, f"--npu-smi.sysfs={tmp_path / 'no-sysfs'}"], tmp_path)
    try:
        node.wait_for(lambda found: any(name == "npu_hccs_healthy" for name, *_ in found), deadline=90)
        result = run_diagnose("--metrics-url", f"http://127.0.0.1:{node.port}/metrics", "--format", "json")
    finally:
        node.stop()
    assert result.code == 0, result.err
    chips = _off(json.loads(result.out))[("this node: chips", "missing")]
    assert (chips["value"], chips["verdict"]) == (None, None)
    assert chips["detail"].startswith("unknown: no expected count (8 chips listed")
