"""/metrics latency on the a3 node with its network metrics, against node_exporter and against
the static-bytes floor.

Three real processes on 127.0.0.1, side by side in one run:

- ours: an Atlas A3 node (4 processes per die) on npu-smi and hccn_tool replaying the
  simulator's captured answers (benchmarks/_replay.py), *with* the network source (about 1,800
  samples); timing starts once every chip's details and the network's fast and slow reads
  have been served;
- node_exporter with its Debian package's default collectors;
- static: a bare aiohttp app (benchmarks/_static_server.py) answering with our exporter's own
  body, captured once per header set just before timing, and the same response headers, from
  memory: no encoding, no compression, no middleware. What a scrape of it costs is HTTP over
  loopback plus aiohttp's request handling, the floor an exporter serving pre-encoded bytes
  approaches.

One http.client keep-alive connection per target, the same client code; each round scrapes
every target once and the order rotates every round (each target first, middle and last
equally often), so all share the machine's noise. Two header sets, BENCH_SCRAPES timed rounds
each after 50 warm-up rounds:

- ``plain``: no Accept header, no compression: text format 0.0.4;
- ``prometheus``: Prometheus 2.x's Accept header (OpenMetrics preferred) and gzip.

Latency is from sending the request to the last body byte. Goals, at p99 in both header
sets: ours <= 0.25x node_exporter's, and <= 2x the static floor.

    python -m benchmarks.exporter_scrape_a3     (env BENCH_SCRAPES, default 1000)
"""

from __future__ import annotations

import os
from contextlib import ExitStack
from typing import Any

from benchmarks import _common as c

SCRAPES = int(os.environ.get("BENCH_SCRAPES", "1000"))
WARMUP = 50
MODES = {"plain": c.PLAIN_HEADERS, "prometheus": c.PROMETHEUS_HEADERS}
GOAL_VS_NODE = 0.25
GOAL_VS_STATIC = 2.0


def run() -> dict[str, Any]:
    notes: list[str] = []
    binary = c.node_exporter_binary(notes)
    version = c.node_exporter_version(binary)
    ours_port, node_port = c.free_port(), c.free_port()
    with ExitStack() as stack:
        ours = stack.enter_context(c.started("cann-exporter", c.exporter_argv(ours_port, network=True), c.exporter_env()))
        node = stack.enter_context(c.started("node_exporter", c.node_exporter_argv(binary, node_port)))
        ours_client = c.Client(ours_port)
        stack.callback(ours_client.close)
        node_client = c.Client(node_port)
        stack.callback(node_client.close)
        startup = c.wait_network_complete(ours, ours_client)
        c.wait_until("node_exporter /metrics", lambda: node_client.get("/metrics")[0] == 200, 30, procs=[node])

        modes: dict[str, dict[str, Any]] = {}
        for mode, headers in MODES.items():
            # The floor serves exactly what ours served a moment before, for this header set.
            response_headers, body = c.capture(ours_client, headers)
            with c.static_server({mode: (headers, response_headers, body)}) as static_port:
                static_client = c.Client(static_port)
                try:
                    clients = {"cann_exporter": ours_client, "node_exporter": node_client, "static": static_client}
                    modes[mode] = c.scrape_interleaved(clients, headers, SCRAPES, WARMUP)
                finally:
                    static_client.close()
            modes[mode]["static"]["captured_from_cann_exporter_bytes"] = len(body)
        for proc in (ours, node):
            proc.check_alive()
        reconnects = {"cann_exporter": ours_client.reconnects, "node_exporter": node_client.reconnects}

    figures = []
    for mode, result in modes.items():
        ours_r, node_r, static_r = result["cann_exporter"], result["node_exporter"], result["static"]
        for q in ("p50", "p99"):
            value = ours_r[f"{q}_ms"]
            vs_node, vs_static = c.ratio(value, node_r[f"{q}_ms"]), c.ratio(value, static_r[f"{q}_ms"])
            goals = q == "p99"
            figures.append(
                c.figure(
                    f"a3 + network /metrics {q} ({mode} headers) vs node_exporter",
                    value,
                    "ms",
                    baseline_name=f"node_exporter {q}",
                    baseline=node_r[f"{q}_ms"],
                    **(
                        {"goal": f"ratio <= {GOAL_VS_NODE:g}", "meets_goal": vs_node is not None and vs_node <= GOAL_VS_NODE}
                        if goals
                        else {}
                    ),
                )
            )
            figures.append(
                c.figure(
                    f"a3 + network /metrics {q} ({mode} headers) vs static bytes",
                    value,
                    "ms",
                    baseline_name=f"static-bytes aiohttp {q}",
                    baseline=static_r[f"{q}_ms"],
                    **(
                        {"goal": f"ratio <= {GOAL_VS_STATIC:g}", "meets_goal": vs_static is not None and vs_static <= GOAL_VS_STATIC}
                        if goals
                        else {}
                    ),
                )
            )
    rows = []
    for mode, result in modes.items():
        for target, r in result.items():
            rows.append(
                {
                    "headers": mode,
                    "target": target,
                    "samples": r.get("samples"),
                    "bytes on wire": r.get("bytes_on_wire"),
                    "p50 ms": r["p50_ms"],
                    "p90 ms": r["p90_ms"],
                    "p99 ms": r["p99_ms"],
                    "max ms": r["max_ms"],
                }
            )
    ours_samples = modes["plain"]["cann_exporter"].get("samples")
    notes += [
        f"node_exporter: {version}, the package's default collectors.",
        f"cann-exporter: `python -m exporter serve` on replayed npu-smi and hccn_tool (benchmarks/_replay.py: the simulator's a3 answers, healthy, captured once) (network on) with "
        f"CANN_SIM_PROCESSES=4: {ours_samples} samples in the text format; timing started "
        f"{startup['network_complete_seconds']:.0f} s after start, once the hccn_tool fast and slow reads had been served. "
        "Its sampler keeps running meanwhile (npu-smi every 10 s, hccn_tool every 30 s / 60 s, as replayed children "
        "on the same cores); a scrape after a change re-encodes the changed part.",
        "static: benchmarks/_static_server.py, aiohttp defaults, our body and response headers captured just "
        "before the header set's rounds, served from memory.",
        f"{SCRAPES} timed rounds per header set after {WARMUP} warm-up rounds; each round scrapes the three "
        "targets once in a rotating order; one keep-alive connection each.",
    ]
    return {
        "title": "/metrics latency, a3 with network metrics: cann-exporter vs node_exporter vs static bytes",
        "summary": (
            f"Ratios = cann-exporter / node_exporter and cann-exporter / a static-bytes aiohttp server serving "
            f"the same body, same client, rotating order, same run. Goals at p99: <= {GOAL_VS_NODE:g}x "
            f"node_exporter, <= {GOAL_VS_STATIC:g}x the static floor."
        ),
        "figures": c.rounded(figures),
        "tables": {"Latency by target": c.rounded(rows)},
        "raw": c.rounded({"modes": modes, "startup": startup, "reconnects": reconnects, "node_exporter_version": version}),
        "notes": notes,
        "command": ".venv/bin/python -m benchmarks exporter_scrape_a3",
    }


if __name__ == "__main__":
    c.main(run)
