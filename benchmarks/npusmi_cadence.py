"""The utilization read's cadence with every npu-smi query on, at npu-smi's real latency.

npu-smi takes about a second a call on real hosts. Here it is a replay of the simulator's
answers (benchmarks/_replay.py) behind a wrapper that sleeps ``BENCH_NPU_SMI_LATENCY``
seconds (default 1) before every call, and another ``hccs_bw_time`` in `-t hccs-bw`, which
blocks for its sampling time. `cann-exporter serve` runs with its defaults (overview every
10 s; per-card details and per-chip volt, pcie-err, sensors, sio-info, hccs every 60 s;
hccs-bw every 120 s, one chip at a time; board and spod-info at inventory time), on 8 chips
(910B3) and 16 dies (Atlas A3), for ``BENCH_CADENCE_SECONDS`` (default 130: the start, when
every group runs at once, then the 60 s round and the 120 s hccs-bw round).

Measured:
- the gap between the starts of successive `npu-smi info` calls (the wrapper logs each):
  the sampler asks every 10 s, so a gap above 10 s is a slip;
- the age of the utilization served, polled on /metrics every 0.5 s: now minus
  cann_exporter_source_last_success_timestamp_seconds{source="npu_smi_info"};
- npu-smi calls per minute per chip, counted by the wrapper over the run.

Goal: no gap longer than the interval plus 0.5 s (scheduler jitter; a call waiting for a
slot behind a one-second query would add a second).

    python -m benchmarks.npusmi_cadence   (env BENCH_CADENCE_SECONDS, BENCH_NPU_SMI_LATENCY)
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from benchmarks import _common as c
from benchmarks._replay import _script
from exporter.node.simulate import simulated_tool

SECONDS = float(os.environ.get("BENCH_CADENCE_SECONDS", "130"))
LATENCY = float(os.environ.get("BENCH_NPU_SMI_LATENCY", "1"))
INTERVAL = 10.0  # npu_smi.interval's default
HCCS_BW_TIME = 1.0  # npu_smi.hccs_bw_time's default
SLIP_GOAL = 0.5
NODES = {"910b3": 8, "a3": 16}

WRAPPER = """#!/bin/sh
echo "$(date +%s.%N) $*" >> {log}
sleep {latency}
case "$*" in *hccs-bw*) sleep {sample} ;; esac
exec {replay} "$@"
"""


def _slow_npu_smi(root: Path, model: str) -> tuple[str, Path]:
    sim = (*simulated_tool("npusmi"), "--model", model, "--scenario", "healthy", "--")
    replay = _script(root, "npu-smi-replay", sim)
    log = root / "calls.log"
    path = root / "npu-smi"
    path.write_text(WRAPPER.format(log=shlex.quote(str(log)), latency=LATENCY, sample=HCCS_BW_TIME, replay=shlex.quote(replay)))
    path.chmod(0o755)
    return str(path), log


def _warm(npu_smi_replay: str) -> None:
    """Every answer but hccs-bw captured once (`once` asks the same argv), so the timed run pays
    the wrapper's latency, not the simulator's start."""
    import subprocess

    subprocess.run(
        [sys.executable, "-m", "exporter", "once", "--npu-smi", npu_smi_replay, "--no-hccn.enabled", "--log.level", "error"],
        check=False,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        timeout=600,
        cwd=c.REPO,
    )


def measure(model: str, chips: int) -> dict[str, Any]:
    root = Path(tempfile.mkdtemp(prefix=f"cann-bench-cadence-{model}-"))
    try:
        npu_smi, log = _slow_npu_smi(root, model)
        _warm(str(root / "npu-smi-replay"))
        port = c.free_port()
        argv = [sys.executable, "-m", "exporter", "serve", "--npu-smi", npu_smi, "--no-hccn.enabled", "--listen", f"{c.HOST}:{port}"]
        ages: list[float] = []
        with c.started("cann-exporter", argv, c.exporter_env()) as proc:
            client = c.Client(port)
            try:
                c.wait_until("/readyz", lambda: client.get("/readyz")[0] == 200, 60, procs=[proc])
                start = time.time()
                while time.time() - start < SECONDS:
                    last = c.sample_value(
                        client.text("/metrics"), "cann_exporter_source_last_success_timestamp_seconds", source="npu_smi_info"
                    )
                    if last is not None:
                        ages.append(time.time() - last)
                    time.sleep(0.5)
                proc.check_alive()
                text = client.text("/metrics")
            finally:
                client.close()
        calls = [line.split(" ", 1) for line in log.read_text().splitlines()]
        window = [(float(t), args) for t, args in calls if float(t) >= start]
        info = [t for t, args in window if args == "info"]
        gaps = [b - a for a, b in zip(info, info[1:])]
        kinds = Counter(args.split()[2] if args.startswith("info -t") else args for _, args in window)
        minutes = SECONDS / 60
        hardware_runs = c.sample_value(text, "cann_exporter_source_runs_total", source="npu_smi_hardware")
        bw_runs = c.sample_value(text, "cann_exporter_source_runs_total", source="npu_smi_hccs_bw")
        return {
            "chips": chips,
            "info_calls": len(info),
            "max_gap_s": max(gaps) if gaps else None,
            "p50_gap_s": c.percentile(gaps, 50) if gaps else None,
            "max_age_s": max(ages) if ages else None,
            "p99_age_s": c.percentile(ages, 99) if ages else None,
            "calls_per_minute_per_chip": len(window) / minutes / chips,
            "calls_by_type_per_minute": {k: round(n / minutes, 2) for k, n in sorted(kinds.items())},
            "hardware_runs": hardware_runs,
            "hccs_bw_runs": bw_runs,
        }
    finally:
        shutil.rmtree(root, ignore_errors=True)


def run() -> dict[str, Any]:
    results = {model: measure(model, chips) for model, chips in NODES.items()}
    figures, rows = [], []
    for model, r in results.items():
        slip = None if r["max_gap_s"] is None else r["max_gap_s"] - INTERVAL
        figures.append(
            c.figure(
                f"{r['chips']} chips ({model}): longest gap between utilization reads, npu-smi at {LATENCY:g} s a call",
                r["max_gap_s"],
                "s",
                baseline_name="npu_smi.interval",
                baseline=INTERVAL,
                goal=f"<= interval + {SLIP_GOAL:g} s",
                meets_goal=slip is not None and slip <= SLIP_GOAL,
            )
        )
        figures.append(
            c.figure(
                f"{r['chips']} chips ({model}): oldest utilization served (age of the npu-smi info read)",
                r["max_age_s"],
                "s",
                baseline_name="npu_smi.interval + one call",
                baseline=INTERVAL + LATENCY,
            )
        )
        rows.append(
            {
                "chips": f"{r['chips']} ({model})",
                "info calls": r["info_calls"],
                "median gap (s)": r["p50_gap_s"],
                "longest gap (s)": r["max_gap_s"],
                "p99 age (s)": r["p99_age_s"],
                "max age (s)": r["max_age_s"],
                "npu-smi calls/min/chip": r["calls_per_minute_per_chip"],
                "hardware rounds": r["hardware_runs"],
                "hccs-bw rounds": r["hccs_bw_runs"],
            }
        )
    return c.rounded(
        {
            "title": f"Utilization cadence with every npu-smi query on ({LATENCY:g} s a call, {SECONDS:g} s)",
            "summary": "The overview keeps its 10 s cadence while the per-card, per-chip and hccs-bw queries run.",
            "figures": figures,
            "tables": {"npu-smi info cadence and call load": rows},
            "raw": results,
            "notes": [
                "Calls per minute per chip count every call of the run, the start's inventory included (board, spod-info, -m).",
                "npu-smi is a replay of the simulator's answers behind a sleep: the latency is real time, not CPU.",
            ],
        }
    )


if __name__ == "__main__":
    c.main(run)
