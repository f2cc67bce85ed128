"""`cann-exporter report --prometheus URL --range 30d --out DIR`: a capacity-planning report from
Prometheus history, as DIR/index.html with PNG charts beside it and DIR/capacity.json.

It shows utilization over time per node and per namespace (namespaces from npu_pod_info),
chip-hours and allocated-but-idle chip-hours per owner on any runtime (npu_chip_owner_info: a
pod, a container, a Slurm job, a unit), the distribution of chip utilization, idle chip-hours, the share of time below the
low-utilization bound, every chip below it, HBM headroom, allocation vs use, linear forecasts,
energy (kWh per node, namespace and training job, idle energy, cost with --price-per-kwh),
goodput (the training jobs' NPU-hours per job and namespace split into goodput and each kind
of badput) and a written summary. A --range longer than the history Prometheus holds reports on what
exists and says how much that is. Needs matplotlib (`pip install 'cann-exporter[report]'`).

Exit status: 0 report written, 2 could not (Prometheus unreachable or failing, no data in the
window, output directory not writable, matplotlib missing).
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path
from typing import TextIO

from exporter.commands.cannot import exit_status
from exporter.commands.prometheus_args import PrometheusWindow, RequestBounds
from exporter.diagnostics import argtypes
from exporter.diagnostics.capacity import Bounds, analyse_capacity
from exporter.diagnostics.capacity_reader import QUERIES, fit_window, read_capacity, unhealthy_states
from exporter.diagnostics.energy import analyse_energy
from exporter.diagnostics.energy_reader import ENERGY_QUERIES, read_energy
from exporter.diagnostics.goodput import analyse_goodput
from exporter.diagnostics.goodput_reader import GOODPUT_QUERIES, read_goodput
from exporter.diagnostics.html import render_html, report_json
from exporter.diagnostics.model import EXIT_HEALTHY, CannotDiagnose
from exporter.diagnostics.progress import Progress
from exporter.diagnostics.promapi import PrometheusError, parse_duration
from exporter.thresholds.table import load_thresholds

PROG = "cann-exporter report"
WINDOW = PrometheusWindow("30d", "history to report on", "now-1d", '{cluster="prod"}', required=True)
REQUESTS = RequestBounds(
    "30s", "bound on each query, connection to last byte", "bound on all queries together (default: none beyond --timeout per query)"
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = (__doc__ or "").split("\n\n")[0].replace("\n", " ")
    WINDOW.add_arguments(parser)
    parser.add_argument(
        "--step",
        type=argtypes.duration,
        default=None,
        metavar="DURATION",
        help="resolution of the range queries (default: sized to the range, 30d -> 1h, or to the data when Prometheus holds less)",
    )
    parser.add_argument(
        "--horizon",
        type=argtypes.duration,
        default=parse_duration("30d"),
        metavar="DURATION",
        help="how far the forecasts look ahead (default: 30d)",
    )
    parser.add_argument("--out", metavar="DIR", required=True, help="directory for index.html, the PNG charts and capacity.json")
    REQUESTS.add_arguments(parser)
    parser.add_argument("--thresholds", metavar="FILE", default=None, help="threshold table (default: the packaged one)")
    parser.add_argument(
        "--price-per-kwh",
        type=price_per_kwh,
        default=None,
        metavar="PRICE",
        help="price of one kWh, in any currency: a cost beside each energy figure (default: no cost)",
    )


def price_per_kwh(text: str) -> float:
    """A positive, finite number (argparse type)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}") from None
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"expected a positive, finite number, got {text!r}")
    return value


def run(args: argparse.Namespace, out: TextIO | None = None, err: TextIO | None = None) -> int:
    stdout, stderr = out or sys.stdout, err or sys.stderr

    def report() -> int:
        print(f"{write_report(args, stderr)}", file=stdout)
        return EXIT_HEALTHY

    return exit_status(PROG, stderr, report)


def write_report(args: argparse.Namespace, err: TextIO) -> Path:
    from exporter.diagnostics.charts import ChartsUnavailable, draw_all, require_charts

    table = load_thresholds(getattr(args, "thresholds", None))
    directory = Path(args.out)
    try:  # what the report needs is checked before any query: those can take minutes
        require_charts()
        directory.mkdir(parents=True, exist_ok=True)
    except ChartsUnavailable as exc:
        raise CannotDiagnose(str(exc)) from None
    except OSError as exc:
        raise _unwritable(directory, exc) from None
    client = REQUESTS.client(args)
    end, seconds = WINDOW.read(args)
    matchers = getattr(args, "selector", "")
    with Progress(err, "querying Prometheus", total=QUERIES + ENERGY_QUERIES + GOODPUT_QUERIES) as progress:
        window = fit_window(client, end, seconds, getattr(args, "step", None), matchers, progress.step)
        data = read_capacity(
            client,
            window.first,
            window.last,
            window.step,
            matchers,
            progress.step,
            window.requested,
            unhealthy_states(table),
            recorded=window.recorded,
            nodes=dict(window.nodes),
        )
        try:
            joules = read_energy(
                client,
                window.first,
                window.last,
                window.step,
                matchers,
                window.recorded,
                getattr(args, "price_per_kwh", None),
                progress.step,
            )
            spent = read_goodput(client, window.first, window.last, window.step, matchers, progress.step)
        except PrometheusError as exc:
            raise CannotDiagnose(str(exc)) from None
    report = analyse_capacity(data, table, getattr(args, "horizon", 30 * 86400.0) / 86400.0)
    energy = analyse_energy(joules, data, Bounds.from_table(table).low)
    goodput = analyse_goodput(spent)
    try:
        charts = draw_all(report, directory)
        (directory / "capacity.json").write_text(report_json(report, charts, energy, goodput), encoding="utf-8")
        index = directory / "index.html"
        index.write_text(render_html(report, charts, energy, goodput), encoding="utf-8")
    except OSError as exc:
        raise _unwritable(directory, exc) from None
    return index


def _unwritable(directory: Path, exc: OSError) -> CannotDiagnose:
    return CannotDiagnose(f"{directory}: cannot write the report: {exc.strerror or exc}")
