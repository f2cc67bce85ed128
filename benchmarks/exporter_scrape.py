"""Figure 1: /metrics latency, 16 chips and 64 processes, side by side with node_exporter.

Both exporters run as real processes on 127.0.0.1: ours on the simulator (model a3,
4 processes per die, default 10 s / 60 s sampling intervals), node_exporter with its Debian
package's default collectors. One http.client keep-alive connection per target, same
client code; scrapes alternate between the two targets (which goes first flips every
round) so both share the machine's noise. Two header sets, 1,000 timed scrapes each per
target after 50 warm-up scrapes:

- ``plain``: no Accept header, no compression: both serve text format 0.0.4;
- ``prometheus``: Prometheus 2.x's Accept header (OpenMetrics preferred) and gzip.

Latency is from sending the request to the last body byte. Goal: ours at or below
node_exporter's (ratio <= 1) at p50 and p99.

    python -m benchmarks.exporter_scrape     (env BENCH_SCRAPES to change the 1,000)
"""

from __future__ import annotations

import gzip
import os
import statistics
from contextlib import ExitStack
from typing import Any

from benchmarks import _common as c

SCRAPES = int(os.environ.get("BENCH_SCRAPES", "1000"))
WARMUP = 50
MODES = {"plain": c.PLAIN_HEADERS, "prometheus": c.PROMETHEUS_HEADERS}


def _measure(clients: dict[str, c.Client], headers: dict[str, str], scrapes: int) -> dict[str, dict[str, Any]]:
    latencies: dict[str, list[float]] = {name: [] for name in clients}
    info: dict[str, dict[str, Any]] = {name: {} for name in clients}
    names = list(clients)
    for index in range(WARMUP + scrapes):
        order = names if index % 2 == 0 else names[::-1]
        for name in order:
            status, got_headers, body, seconds = clients[name].get("/metrics", headers)
            if status != 200:
                raise c.BenchError(f"{name} /metrics answered HTTP {status}")
            if index >= WARMUP:
                latencies[name].append(seconds)
            elif index == 0:
                text = gzip.decompress(body) if got_headers.get("content-encoding") == "gzip" else body
                info[name] = {
                    "bytes_on_wire": len(body),
                    "bytes_uncompressed": len(text),
                    "samples": c.count_samples(text.decode("utf-8", errors="replace")),
                    "content_type": got_headers.get("content-type", ""),
                    "content_encoding": got_headers.get("content-encoding", "identity"),
                }
    out = {}
    for name, values in latencies.items():
        ms = [v * 1000 for v in values]
        out[name] = {
            "scrapes": len(ms),
            "p50_ms": c.percentile(ms, 50),
            "p90_ms": c.percentile(ms, 90),
            "p99_ms": c.percentile(ms, 99),
            "mean_ms": statistics.fmean(ms),
            "min_ms": min(ms),
            "max_ms": max(ms),
            **info[name],
        }
    return out


def run() -> dict[str, Any]:
    notes: list[str] = []
    binary = c.node_exporter_binary(notes)
    version = c.node_exporter_version(binary)
    ours_port, node_port = c.free_port(), c.free_port()
    with ExitStack() as stack:
        ours = stack.enter_context(c.started("cann-exporter", c.exporter_argv(ours_port), c.exporter_env()))
        node = stack.enter_context(c.started("node_exporter", c.node_exporter_argv(binary, node_port)))
        clients = {"cann_exporter": c.Client(ours_port), "node_exporter": c.Client(node_port)}
        for client in clients.values():
            stack.callback(client.close)
        startup = c.wait_exporter_complete(ours, clients["cann_exporter"])
        c.wait_until("node_exporter /metrics", lambda: clients["node_exporter"].get("/metrics")[0] == 200, 30, procs=[node])

        before = clients["cann_exporter"].text("/metrics")
        modes = {mode: _measure(clients, headers, SCRAPES) for mode, headers in MODES.items()}
        after = clients["cann_exporter"].text("/metrics")
        for proc in (ours, node):
            proc.check_alive()
        runs = {}
        for source in ("npu_smi_info", "npu_smi_details", "npu_smi_inventory"):
            start = c.sample_value(before, "cann_exporter_source_runs_total", source=source) or 0
            end = c.sample_value(after, "cann_exporter_source_runs_total", source=source) or 0
            runs[source] = end - start
        reconnects = {name: client.reconnects for name, client in clients.items()}

    figures = []
    for mode, result in modes.items():
        ours_r, node_r = result["cann_exporter"], result["node_exporter"]
        for q in ("p50", "p99"):
            value, base = ours_r[f"{q}_ms"], node_r[f"{q}_ms"]
            r = c.ratio(value, base)
            figures.append(
                c.figure(
                    f"/metrics {q} latency ({mode} headers)",
                    value,
                    "ms",
                    baseline_name=f"node_exporter {q}",
                    baseline=base,
                    goal="ratio <= 1 (at or below node_exporter)",
                    meets_goal=r is not None and r <= 1.0,
                )
            )
    notes += [
        f"node_exporter: {version}, the package's default collectors, started as "
        f"`{os.path.basename(binary)} --web.listen-address=127.0.0.1:PORT`.",
        "cann-exporter: `python -m exporter serve` on replayed npu-smi and hccn_tool (benchmarks/_replay.py: the simulator's a3 answers, healthy, captured once) with "
        "CANN_SIM_PROCESSES=4 (16 dies, 64 processes), default intervals (info 10 s, details 60 s); "
        "timing started once /readyz was 200 and all 16 chips' details and 64 processes were served.",
        f"Sample cycles of cann-exporter that overlapped the timed scrapes: {runs['npu_smi_info']:g} info, "
        f"{runs['npu_smi_details']:g} details (their replayed npu-smi children share the same cores).",
        f"{SCRAPES} timed scrapes per target and header set after {WARMUP} warm-up scrapes; "
        "targets alternated, the first of each pair flipping every round; one keep-alive connection each.",
    ]
    return {
        "title": "/metrics latency: cann-exporter (16 chips, 64 processes) vs node_exporter",
        "summary": "Ratio = cann-exporter / node_exporter, same client, interleaved scrapes, same run.",
        "figures": c.rounded(figures),
        "raw": c.rounded(
            {
                "modes": modes,
                "startup": startup,
                "sample_runs_during_scrapes": runs,
                "reconnects": reconnects,
                "node_exporter_version": version,
            }
        ),
        "notes": notes,
        "command": ".venv/bin/python -m benchmarks exporter_scrape",
    }


if __name__ == "__main__":
    c.main(run)
