"""The capacity report's energy from Prometheus, over the report's own window and steps.

From the raw series: each chip's ``npu_energy_joules_total`` increase over each step, and the
training jobs on each device (``npu_job_info``, present in the step); the idle share is then
classified per step with the report's utilization and in-use data. On the hourly records (the
report's recorded window): four node-sized series, ``instance:npu_energy_kwh:sum1h``,
``instance:npu_energy_idle_kwh:sum1h`` (idle at the rules' 5-minute resolution),
``instance_namespace:npu_energy_kwh:sum1h`` and ``instance_job_name:npu_energy_kwh:sum1h``,
summed over steps of several hours as the report's other records are. No per-chip answer, so
the energy adds little to a fleet's report (docs/scaling.md)."""

from __future__ import annotations

from collections.abc import Callable

from exporter.diagnostics.capacity_queries import RECORDED_STEP
from exporter.diagnostics.capacity_reader import node_names
from exporter.diagnostics.energy import ChipKey, EnergyInput, EnergyTotals, Point
from exporter.diagnostics.promapi import PrometheusClient, Series, promql_duration, selector
from exporter.jobs.metrics import JOB_INFO
from exporter.npusmi.metrics import ENERGY
from exporter.thresholds.records import JOULES_PER_KWH, NODE_IDLE_KWH, NODE_JOB_KWH, NODE_KWH, NODE_NAMESPACE_KWH

ENERGY_QUERIES = 4  # for the progress line: (records) per node, idle, per namespace, per job; (raw) per chip, jobs


def raw_queries(matchers: str, step: float) -> tuple[str, str]:
    """(kWh per chip, training jobs per device) over steps of ``step``."""
    s = promql_duration(step)
    return (
        f"increase({selector(ENERGY.name, matchers)}[{s}]) / {JOULES_PER_KWH:g}",
        f"group by (instance, device, job_name) (last_over_time({selector(JOB_INFO.name, matchers)}[{s}]))",
    )


def recorded_queries(matchers: str, step: float) -> dict[str, str]:
    """The node-sized hourly records, summed over steps of ``step`` (whole hours)."""

    def over(name: str) -> str:
        what = selector(name, matchers)
        return what if step == RECORDED_STEP else f"sum_over_time({what}[{promql_duration(step)}:1h])"

    return {
        "energy": over(NODE_KWH),
        "idle energy": over(NODE_IDLE_KWH),
        "energy per namespace": over(NODE_NAMESPACE_KWH),
        "energy per job": over(NODE_JOB_KWH),
    }


def read_energy(
    client: PrometheusClient,
    start: float,
    end: float,
    step: float,
    matchers: str,
    recorded: bool,
    price: float | None = None,
    progress: Callable[[str], None] | None = None,
) -> EnergyInput:
    """Raises PrometheusError as the report's other reads do."""

    def ask(what: str, query: str) -> list[Series]:
        if progress:
            progress(what)
        return client.range(query, start, end, step)

    if recorded:
        queries = recorded_queries(matchers, step)
        with client.ranges(list(queries.values()), start, end, step) as read:
            answers = {}
            for what in queries:
                if progress:
                    progress(what)
                answers[what] = next(read)
        name = node_names(answers["energy"])

        def total(what: str, label: str) -> dict[str, float]:
            out: dict[str, float] = {}
            for s in answers[what]:
                key = name(s.labels.get("instance", "")) if label == "instance" else s.labels.get(label, "")
                out[key] = out.get(key, 0.0) + sum(v for _, v in s.points)
            return out

        totals = EnergyTotals(
            total("energy", "instance"),
            total("idle energy", "instance"),
            total("energy per namespace", "namespace"),
            total("energy per job", "job_name"),
        )
        return EnergyInput(price=price, totals=totals)
    kwh_query, jobs_query = raw_queries(matchers, step)
    kwh = ask("energy", kwh_query)
    for what in ("idle energy", "energy per namespace"):  # from the per-chip answer and the report's data
        if progress:
            progress(what)
    jobs = ask("energy per job", jobs_query)
    name = node_names([*kwh, *jobs])

    def key(s: Series) -> ChipKey:
        labels = s.labels
        return (name(labels.get("instance", "")), labels.get("npu", ""), labels.get("chip", ""), labels.get("device", ""))

    per_chip: dict[ChipKey, tuple[Point, ...]] = {key(s): s.points for s in kwh}
    on_device: dict[tuple[str, str], dict[str, frozenset[float]]] = {}
    for s in jobs:
        device = (name(s.labels.get("instance", "")), s.labels.get("device", ""))
        steps = on_device.setdefault(device, {})
        job = s.labels.get("job_name", "")
        steps[job] = steps.get(job, frozenset()) | {t for t, _ in s.points}
    return EnergyInput(per_chip, on_device, price)
