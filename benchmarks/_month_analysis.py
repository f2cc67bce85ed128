"""The report's analysis (exporter/diagnostics/capacity.py on capacity_grid.py's arrays) on a month of a fleet at
its full shape, whatever history the benchmark was sized down to: every chip with 720 hourly
points (utilization, in use, namespace, observed seconds) and every node's HBM, as the hourly
records give them, analysed as `report --range 30d` does. The queries' share of the report is
measured on Prometheus; this is the rest, which grows with chips x points."""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from exporter.diagnostics.capacity import CapacityInput, ChipHistory, NodeHbm, analyse_capacity
from exporter.thresholds.table import load_thresholds

HOURS = 720  # 30 days at the report's 1 h step


def time_month_analysis(nodes: int, chips: int, end: float, seed: int = 7) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    times = [end - (HOURS - 1 - i) * 3600.0 for i in range(HOURS)]
    start = time.perf_counter()
    histories, hbm = [], []
    for node in range(nodes):
        instance = f"npu-node-{node:04d}:9435"
        busy = rng.random((chips, HOURS)) < 0.7
        util = np.where(busy, rng.uniform(0.2, 0.97, (chips, HOURS)), 0.0).round(3)
        for chip in range(chips):
            used = frozenset(t for t, b in zip(times, busy[chip].tolist(), strict=True) if b)
            histories.append(
                ChipHistory(
                    instance,
                    str(chip),
                    "0",
                    str(chip),
                    tuple(zip(times, util[chip].tolist(), strict=True)),
                    used,
                    tuple((t, f"ns-{node % 16}") for t in times if t in used),
                    tuple((t, 3600.0) for t in times),
                )
            )
        hbm.append(NodeHbm(instance, tuple((t, 2.0e11) for t in times), tuple((t, 5.5e11) for t in times)))
    built = time.perf_counter()
    data = CapacityInput("synthetic", times[0], times[-1], 3600.0, tuple(histories), tuple(hbm), True, True)
    analyse_capacity(data, load_thresholds(), 30.0)
    return {"chips": nodes * chips, "points_per_chip": HOURS, "build_seconds": built - start, "seconds": time.perf_counter() - built}
