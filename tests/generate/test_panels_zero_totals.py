"""Every panel query of every dashboard, and every recording rule, asked of a real Prometheus
holding one node on which every total reads zero: no NaN and no infinity anywhere.

An Atlas A3 chip reports 0 huge pages of 0 (`npu_hugepages_total_pages` 0), a chip may report a
DDR or HBM total of 0, an idle training job finishes no iteration in a window (every rate 0), an
exporter may read a limit of 0. A ratio of such a total is 0/0 (NaN) or x/0 (infinity) on
Prometheus, where VictoriaMetrics returns nothing: a panel must show nothing on both.

The node is made from the queries themselves: every series a panel or a rule selects (its name,
the labels its matchers fix, a chip's and a rank's labels), sampled every 5 s over the last hour
and every minute a day before (the baselines), every value 0, but for what only gates the
queries (the info series, `up`, a running job's state: 1) and what is used of a zero limit
(resident memory, open files). The records the panels read are such series too; the rules'
own expressions are asked of the raw series.

Only 127.0.0.1; the Prometheus started here is stopped here.
"""

from __future__ import annotations

import json
import math
import re
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator

import promql_parser
import pytest
import yaml

from exporter.generate.writer import DASHBOARD_DIR, RECORDING_FILE
from tests.support.paths import ROOT
from tests.support.prometheus import Prometheus, build_blocks, serving_blocks
from tests.support.promql import GRAFANA_VARIABLES, selectors, substitute

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

NODE = {"job": "cann-exporter", "instance": "zero:9435", "npu": "0", "chip": "0", "device": "0", "job_name": "idle", "rank": "0"}
BUCKETS = ("0.5", "1", "+Inf")
# What gates the queries rather than being measured: 1 (a chip that is up, a job that is running).
ONE = re.compile(r"_info$|^up$|^npu_up$")
# What is used of a zero limit (x/0: infinity without a guard).
USED = {"process_resident_memory_bytes": 1e8, "process_open_fds": 10.0}
FINE, COARSE, DAY, HOUR = 5, 60, 86400, 3600


def panel_queries() -> dict[str, str]:
    """{"board: panel [refId]": the query as Grafana sends it, its variables filled in}."""
    out = {}
    for path in sorted((ROOT / DASHBOARD_DIR).glob("*.json")):
        for panel in json.loads(path.read_text())["panels"]:
            for target in panel.get("targets", []):
                out[f"{path.stem}: {panel['title']} [{target['refId']}]"] = substitute(target["expr"])
    return out


def rule_queries() -> dict[str, str]:
    doc = yaml.safe_load((ROOT / RECORDING_FILE).read_text())
    return {rule["record"]: rule["expr"] for group in doc["groups"] for rule in group["rules"]}


def _pick(value: str) -> str | None:
    """A value a regex matcher accepts: its first alternative when that is a plain word."""
    first = value.split("|")[0]
    return first if re.fullmatch(r"[A-Za-z0-9_.:+-]+", first) else None


def node_series(exprs: list[str]) -> dict[str, list[dict[str, str]]]:
    """{metric: the label sets to write}: NODE's labels and what each selector's matchers fix."""
    series: dict[str, list[dict[str, str]]] = {}
    for expr in exprs:
        for sel in selectors(expr):
            if not sel.name:
                continue
            labels = dict(NODE)
            for matcher in sel.matchers.matchers:
                if matcher.name == "__name__" or not matcher.value:
                    continue
                if matcher.op == promql_parser.MatchOp.Equal:
                    labels[matcher.name] = matcher.value
                elif matcher.op == promql_parser.MatchOp.Re and (picked := _pick(matcher.value)) is not None:
                    labels[matcher.name] = picked
            sets = [{**labels, "le": le} for le in BUCKETS] if sel.name.endswith("_bucket") else [labels]
            known = series.setdefault(sel.name, [])
            known.extend(s for s in sets if s not in known)
    return series


def value(metric: str, labels: dict[str, str]) -> float:
    if ONE.search(metric) or (metric == "npu_job_state" and labels.get("state") == "running"):
        return 1.0
    return USED.get(metric, 0.0)


def openmetrics(series: dict[str, list[dict[str, str]]], now: int) -> Iterator[str]:
    times = [*range(now - DAY - HOUR, now - HOUR, COARSE), *range(now - HOUR, now + 1, FINE)]
    for metric, sets in sorted(series.items()):
        yield f"# TYPE {metric} gauge"
        for labels in sets:
            text = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
            number = value(metric, labels)
            yield from (f"{metric}{{{text}}} {number} {t}" for t in times)
    yield "# EOF"


@pytest.fixture(scope="module")
def zero_node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Prometheus]:
    now = int(time.time()) // 60 * 60 - 53
    root = tmp_path_factory.mktemp("zero-totals")
    series = node_series([*panel_queries().values(), *rule_queries().values()])
    with serving_blocks(build_blocks(openmetrics(series, now), root), root, now) as served:
        yield served


def query(prometheus: Prometheus, expr: str) -> list[dict]:
    params = urllib.parse.urlencode({"query": expr, "time": str(prometheus.now)})
    with urllib.request.urlopen(f"{prometheus.url}/api/v1/query?{params}", timeout=30) as response:
        doc = json.loads(response.read())
    assert doc["status"] == "success", (expr, doc)
    result: list[dict] = doc["data"]["result"] if doc["data"]["resultType"] == "vector" else [{"value": doc["data"]["result"]}]
    return result


def not_finite(prometheus: Prometheus, queries: dict[str, str]) -> tuple[list[str], int]:
    """What returned NaN or an infinity, and how many queries returned something."""
    bad, answered = [], 0
    for where, expr in queries.items():
        result = query(prometheus, expr)
        answered += bool(result)
        values = [(r.get("metric", {}), float(r["value"][1])) for r in result]
        bad += [f"{where}: {v} for {labels}\n  {expr}" for labels, v in values if not math.isfinite(v)]
    return bad, answered


def test_the_node_fixes_every_total_at_zero() -> None:
    series = node_series([*panel_queries().values(), *rule_queries().values()])
    for total in ("npu_hugepages_total_pages", "npu_memory_total_bytes", "npu_hbm_total_bytes", "cann_exporter_memory_limit_bytes"):
        assert total in series and all(value(total, labels) == 0 for labels in series[total]), total
    assert GRAFANA_VARIABLES["$__rate_interval"] == "10s"  # two samples 5 s apart in every rate


def test_no_panel_query_divides_by_a_zero_total(zero_node: Prometheus) -> None:
    queries = panel_queries()
    bad, answered = not_finite(zero_node, queries)
    assert not bad, "\n".join(bad)
    assert answered > len(queries) // 2, f"only {answered} of {len(queries)} panel queries returned data: the node is too thin"


def test_no_recording_rule_divides_by_a_zero_total(zero_node: Prometheus) -> None:
    rules = rule_queries()
    bad, answered = not_finite(zero_node, rules)
    assert not bad, "\n".join(bad)
    assert answered > len(rules) // 2, f"only {answered} of {len(rules)} rules returned data"


def test_a_ratio_of_zero_totals_is_what_the_guard_removes(zero_node: Prometheus) -> None:
    """The node does divide by zero where unguarded: Prometheus answers NaN (0/0) and +Inf (x/0)."""
    labels = '{instance="zero:9435"}'
    nan = query(zero_node, f"npu_hugepages_used_pages{labels} / npu_hugepages_total_pages{labels}")
    inf = query(zero_node, f"process_resident_memory_bytes{labels} / cann_exporter_memory_limit_bytes{labels}")
    assert [r["value"][1] for r in nan] == ["NaN"] and [r["value"][1] for r in inf] == ["+Inf"]
