"""The capacity report's energy from Prometheus, over the report's own window and steps.

From the raw series: each chip's ``npu_energy_joules_total`` increase over each step, and the
training jobs on each device (``npu_job_info``, present in the step); the idle share is then
classified per step with the report's utilization and in-use data. On the hourly records
(the report's recorded window): ``chip:npu_energy_kwh:sum1h``, ``chip:npu_energy_idle_kwh:sum1h``
(idle at the 5-minute resolution of the rules) and ``chip:npu_job_info:max1h``, summed or
maxed over steps of several hours as the report's other records are; the per-chip ones in the
report's batches of nodes. No query reads a raw series over the window at a finer step."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from exporter.diagnostics.capacity_queries import RECORDED_STEP
from exporter.diagnostics.capacity_reader import _node_batches, node_batches, node_names
from exporter.diagnostics.energy import ChipKey, EnergyInput, Point
from exporter.diagnostics.promapi import PrometheusClient, Series, promql_duration, selector
from exporter.generate.energy_rules import JOULES_PER_KWH
from exporter.generate.recording import REPORT_JOB
from exporter.jobs.metrics import JOB_INFO
from exporter.npusmi.metrics import ENERGY

ENERGY_QUERIES = 3  # for the progress line: kWh, idle kWh (from the records, else classified here), jobs
CHIP_KWH = "chip:npu_energy_kwh:sum1h"
CHIP_IDLE_KWH = "chip:npu_energy_idle_kwh:sum1h"


def energy_queries(matchers: str, step: float, recorded: bool, extra: str = "") -> tuple[str, str | None, str]:
    """(kWh per chip, idle kWh per chip or None, jobs per device) over steps of ``step``."""
    if not recorded:
        s = promql_duration(step)
        return (
            f"increase({selector(ENERGY.name, matchers)}[{s}]) / {JOULES_PER_KWH:g}",
            None,
            f"group by (instance, device, job_name) (last_over_time({selector(JOB_INFO.name, matchers)}[{s}]))",
        )
    both = ", ".join(m for m in (matchers, extra) if m)

    def over(fn: str, name: str) -> str:
        what = selector(name, both)
        return what if step == RECORDED_STEP else f"{fn}_over_time({what}[{promql_duration(step)}:1h])"

    return over("sum", CHIP_KWH), over("sum", CHIP_IDLE_KWH), f"group by (instance, device, job_name) ({over('max', REPORT_JOB)})"


def read_energy(
    client: PrometheusClient,
    start: float,
    end: float,
    step: float,
    matchers: str,
    recorded: bool,
    price: float | None = None,
    progress: Callable[[str], None] | None = None,
    nodes: Mapping[str, int] | None = None,
) -> EnergyInput:
    """Raises PrometheusError as the report's other reads do. ``nodes``: as read_capacity's."""
    batches = (node_batches(nodes) if nodes else _node_batches(client, matchers, start, end, step)) if recorded else [""]
    queries = [energy_queries(matchers, step, recorded, extra) for extra in batches]

    def each(what: str, pick: Callable[[tuple[str, str | None, str]], str | None]) -> list[Series]:
        if progress:
            progress(what)
        return [s for q in queries if (query := pick(q)) for s in client.range(query, start, end, step)]

    kwh = each("energy", lambda q: q[0])
    idle = each("idle energy", lambda q: q[1]) if recorded else None
    if not recorded and progress:
        progress("idle energy")
    jobs = each("energy per job", lambda q: q[2])
    name = node_names([*kwh, *jobs])

    def key(s: Series) -> ChipKey:
        labels = s.labels
        return (name(labels.get("instance", "")), labels.get("npu", ""), labels.get("chip", ""), labels.get("device", ""))

    def per_chip(series: list[Series]) -> dict[ChipKey, tuple[Point, ...]]:
        return {key(s): s.points for s in series}

    on_device: dict[tuple[str, str], dict[str, frozenset[float]]] = {}
    for s in jobs:
        device = (name(s.labels.get("instance", "")), s.labels.get("device", ""))
        steps = on_device.setdefault(device, {})
        job = s.labels.get("job_name", "")
        steps[job] = steps.get(job, frozenset()) | {t for t, _ in s.points}
    return EnergyInput(per_chip(kwh), None if idle is None else per_chip(idle), on_device, price)
