"""Recording rules for capacity planning, from the threshold table: per chip, node, namespace
and cluster, named level:metric:operations (alerts/cann-exporter.rules.yml)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from exporter.generate.common import CHIP, IN_USE_SOURCES, NODE, pct, positive, with_windows
from exporter.generate.energy_rules import energy_1h, energy_5m
from exporter.generate.goodput_rules import goodput_records
from exporter.thresholds import records
from exporter.thresholds.table import Thresholds, duration_seconds, num


@dataclasses.dataclass(frozen=True)
class Record:
    record: str
    expr: str
    help: str
    labels: tuple[tuple[str, str], ...] = ()

    def rule(self) -> dict[str, Any]:
        out: dict[str, Any] = {"record": self.record, "expr": self.expr if "\n" not in self.expr else self.expr + "\n"}
        if self.labels:
            out["labels"] = dict(self.labels)
        return out


UTIL = "npu_aicore_utilization_ratio"
PAGING_STATES = ("Alarm", "Critical")  # NPUUnhealthy's states when its params name none


def _pod_chips(value: str) -> str:
    """``value`` (per chip) once per (chip, namespace) the kubelet allocated it to."""
    return f"{value}\n  * on ({CHIP}) group_right\n  group by ({CHIP}, namespace) (npu_pod_info)"


def _levels(window: str, quantiles: tuple[float, ...]) -> list[Record]:
    """Utilization averages and quantiles over the chips of a node, a namespace, the cluster."""
    chip = f"chip:{UTIL}:avg{window}"
    out = [
        Record(
            f"instance:{UTIL}:avg{window}", f"avg by ({NODE}) ({chip})", f"mean AI Core utilization of a node's chips, {window} averages"
        ),
        Record(
            f"namespace:{UTIL}:avg{window}",
            f"avg by (namespace) (\n  {_pod_chips(chip)}\n)",
            f"mean AI Core utilization of the chips allocated to a namespace (kubelet), {window} averages",
        ),
        Record(f"cluster:{UTIL}:avg{window}", f"avg by () ({chip})", f"mean AI Core utilization of every chip, {window} averages"),
        Record(
            f"cluster:{UTIL}_in_use:avg{window}",
            f"avg by () (\n  {chip}\n  and on ({CHIP}) chip:npu_in_use:bool == 1\n)",
            f"mean AI Core utilization of the chips in use, {window} averages",
        ),
    ]
    for q in quantiles:
        label = (("quantile", num(q)),)
        out += [
            Record(
                f"instance:{UTIL}:quantile_avg{window}",
                f"quantile by ({NODE}) ({num(q)}, {chip})",
                f"quantiles of a node's chip utilization ({window} averages)",
                label,
            ),
            Record(
                f"namespace:{UTIL}:quantile_avg{window}",
                f"quantile by (namespace) (\n  {num(q)},\n  {_pod_chips(chip)}\n)",
                f"quantiles of a namespace's chip utilization ({window} averages)",
                label,
            ),
            Record(
                f"cluster:{UTIL}:quantile_avg{window}",
                f"quantile by () ({num(q)}, {chip})",
                f"quantiles of every chip's utilization ({window} averages)",
                label,
            ),
        ]
    return out


def _duration(seconds: float) -> str:
    """A PromQL duration (``23h59m30s``, ``500ms``) of whole milliseconds."""
    ms = round(seconds * 1000)
    out = ""
    for unit, size in (("h", 3_600_000), ("m", 60_000), ("s", 1000), ("ms", 1)):
        if ms >= size:
            out += f"{ms // size}{unit}"
            ms %= size
    return out or "0s"


def observed(selector: str, interval: str, indent: str = "  ") -> str:
    """The series of ``selector`` observed through the interval ending now: a sample in the last
    ``interval`` and one in the interval before it (left-open windows on Prometheus 2 and 3,
    from sample timestamps). A chip whose first sample is in this interval, or whose samples
    stopped, is not observed through it, so a start, a stop or a scrape gap never adds time."""
    s = duration_seconds(interval)
    return (
        f"(\n{indent}  time() - timestamp({selector}) < {num(s)}\n"
        f"{indent}  and time() - timestamp({selector} offset {interval}) < {num(2 * s)}\n{indent})"
    )


def _chip_hours(interval: str) -> list[Record]:
    """Chip-hours of observed time only, at the rollup group's resolution: each evaluation
    records how many chips were observed, idle and not busy through the interval just ended;
    the daily figures add up a day of evaluations and multiply by the interval in hours.
    The day is half an interval short (``23h59m30s`` for 1m) so that it holds exactly one
    day's evaluations on Prometheus 2 (closed ranges) and 3 (left-open)."""
    seconds = duration_seconds(interval)
    day = _duration(86400 - seconds / 2)
    hours = f"{num(seconds)} / 3600"

    def per_day(series: str) -> str:
        return f"sum_over_time({series}[{day}]) * {hours}"

    up, util = observed("npu_up", interval), observed(UTIL, interval)
    unused = f"(1 - avg_over_time({UTIL}[{interval}]))\n  and on ({CHIP}) {util}"
    return [
        Record(
            "instance:npu_chips_observed:count",
            f"count by ({NODE}) {observed('npu_up', interval, '')}",
            f"chips observed through the last {interval} (a sample in it and in the {interval} before)",
        ),
        Record(
            "instance:npu_chips_idle:sum",
            f"sum by ({NODE}) (\n  (chip:npu_in_use:bool == bool 0)\n  and on ({CHIP}) {up}\n)",
            f"chips observed through the last {interval} with nothing on them (no process, pod or job)",
        ),
        Record(
            "instance:npu_chips_unused:sum",
            f"sum by ({NODE}) (\n  {unused}\n)",
            f"chip-equivalents not busy over the last {interval}: 1 - utilization, summed over the observed chips",
        ),
        Record(
            "namespace:npu_chips_unused:sum",
            f"sum by (namespace) (\n  ({unused})\n  * on ({CHIP}) group_right\n  group by ({CHIP}, namespace) (npu_pod_info)\n)",
            f"chip-equivalents not busy over the last {interval} among the chips allocated to a namespace",
        ),
        Record(
            "instance:npu_chip_hours:sum1d",
            per_day("instance:npu_chips_observed:count"),
            "chip-hours observed over the last day (evaluations x chips observed x interval)",
        ),
        Record("cluster:npu_chip_hours:sum1d", "sum by () (instance:npu_chip_hours:sum1d)", "chip-hours observed in the cluster, last day"),
        Record(
            "instance:npu_idle_chip_hours:sum1d",
            per_day("instance:npu_chips_idle:sum"),
            "observed chip-hours of the last day with nothing on the chip (no process, pod or job)",
        ),
        Record(
            "cluster:npu_idle_chip_hours:sum1d",
            "sum by () (instance:npu_idle_chip_hours:sum1d)",
            "idle chip-hours of the cluster, last day",
        ),
        Record(
            "instance:npu_unused_chip_hours:sum1d",
            per_day("instance:npu_chips_unused:sum"),
            "observed chip-hours of the last day the AI Cores were not busy (idle and underused chips)",
        ),
        Record(
            "namespace:npu_unused_chip_hours:sum1d",
            per_day("namespace:npu_chips_unused:sum"),
            "observed chip-hours of the last day a namespace's allocated chips were not busy",
        ),
        Record(
            "cluster:npu_unused_chip_hours:sum1d",
            "sum by () (instance:npu_unused_chip_hours:sum1d)",
            "unused chip-hours of the cluster, last day",
        ),
    ]


def _report_hours(interval: str, states: tuple[str, ...]) -> list[Record]:
    """Per chip and hour: in use, seconds observed, health paging, pod namespace, owner; per node and
    hour: HBM used and total. The observed seconds add up the hour's evaluations (half an
    interval short, as the daily chip-hours: exactly one hour of them on Prometheus 2 and 3)."""
    seconds = duration_seconds(interval)
    hour = _duration(3600 - seconds / 2)
    paging = f'npu_health{{state=~"{"|".join(states)}"}}'
    return [
        Record(
            records.REPORT_IN_USE,
            "max_over_time(chip:npu_in_use:bool[1h])",
            "1 when the chip was in use at any time in the last hour, else 0",
        ),
        Record(
            "chip:npu_observed:bool",
            f"count by ({CHIP}) {observed('npu_up', interval, '')}",
            f"1 for a chip observed through the last {interval} (a sample in it and in the {interval} before)",
        ),
        Record(
            records.REPORT_OBSERVED,
            f"sum_over_time(chip:npu_observed:bool[{hour}]) * {num(seconds)}",
            "seconds of the last hour the chip was observed (evaluations x interval)",
        ),
        Record(
            records.REPORT_UNHEALTHY,
            f"max by ({CHIP}) (max_over_time({paging}[1h]))",
            f"1 when the chip's health paged ({', '.join(states)}) at any time in the last hour, else 0",
        ),
        Record(
            records.REPORT_NAMESPACE,
            f"max by ({CHIP}, namespace) (max_over_time(npu_pod_info[1h]))",
            "1 per namespace a pod of which had the chip allocated in the last hour (kubelet)",
        ),
        Record(
            records.REPORT_OWNER,
            f"max by ({CHIP}, runtime, owner) (max_over_time(npu_chip_owner_info[1h]))",
            "1 per owner (runtime and owner) that held the chip in the last hour (npu_chip_owner_info)",
        ),
        Record(records.REPORT_HBM_USED, f"sum by ({NODE}) (avg_over_time(npu_hbm_used_bytes[1h]))", "HBM used on a node, 1h average"),
        Record(
            records.REPORT_HBM_TOTAL, f"sum by ({NODE}) (avg_over_time(npu_hbm_total_bytes[1h]))", "HBM installed on a node, 1h average"
        ),
    ]


def recording_specs(table: Thresholds) -> list[tuple[str, str | None, list[Record]]]:
    """(group name, interval, records) of the recording rules."""
    low, unhealthy = table.find("NPULowUtilization"), table.find("NPUUnhealthy")
    threshold = low.threshold if low and low.threshold is not None else 0.6
    sources = tuple(low.param("in_use", IN_USE_SOURCES)) if low else IN_USE_SOURCES
    states = tuple(unhealthy.param("states", PAGING_STATES)) if unhealthy else PAGING_STATES
    interval, quantiles = table.recording.rollup_interval, table.recording.quantiles
    return [
        ("cann-exporter-capacity-5m", None, _five_minutes(threshold, sources, quantiles)),
        ("cann-exporter-capacity-rollups", interval, _rollups(interval, states, quantiles)),
        ("cann-exporter-goodput", None, [Record(*rule) for rule in goodput_records()]),
    ]


def _in_use(sources: tuple[str, ...]) -> str:
    """1 for a chip in use by one of ``sources``, else 0."""
    in_use = {
        "process": f"group by ({CHIP}) (npu_process_memory_bytes)",
        "pod": f"group by ({CHIP}) (npu_pod_info)",
        "job": (
            f"group by (job, instance, device) (npu_job_info)\n"
            f"  * on (job, instance, device) group_left (npu, chip)\n  group by ({CHIP}) (npu_up)"
        ),
    }
    return "\nor\n".join(in_use[s] for s in sources) + f"\nor\n0 * group by ({CHIP}) (npu_up)"


def _five_minutes(threshold: float, sources: tuple[str, ...], quantiles: tuple[float, ...]) -> list[Record]:
    """Per chip, node, namespace and cluster, from the raw series: use, HBM, energy."""
    chips = [
        Record(f"chip:{UTIL}:avg5m", f"avg_over_time({UTIL}[5m])", "AI Core utilization of each chip, 5m average"),
        Record(
            "chip:npu_in_use:bool",
            _in_use(sources),
            f"1 when the chip is in use ({', '.join(sources)}: a process holds memory on it, a pod has it "
            "allocated, a training job reports on it), else 0",
        ),
        Record("chip:npu_hbm_usage:ratio", f"npu_hbm_used_bytes / {positive('npu_hbm_total_bytes')}", "HBM used / total of each chip"),
        Record("instance:npu_chips:count", f"count by ({NODE}) (npu_up)", "chips a node reports"),
        Record("instance:npu_chips_in_use:sum", f"sum by ({NODE}) (chip:npu_in_use:bool)", "chips in use on a node"),
        Record(
            "instance:npu_chips_low_utilization:sum",
            f"sum by ({NODE}) (\n  (chip:{UTIL}:avg5m < bool {num(threshold)})\n  * on ({CHIP}) chip:npu_in_use:bool\n)",
            f"chips in use whose 5m utilization is below {pct(threshold)} (NPULowUtilization's bound)",
        ),
        Record("instance:npu_hbm_headroom_bytes:sum", f"sum by ({NODE}) (npu_hbm_total_bytes - npu_hbm_used_bytes)", "free HBM on a node"),
        Record(
            "instance:npu_hbm_usage:ratio",
            f"sum by ({NODE}) (npu_hbm_used_bytes) / {positive(f'sum by ({NODE}) (npu_hbm_total_bytes)')}",
            "HBM used / total of a node",
        ),
        Record(
            "namespace:npu_chips:count",
            f"count by (namespace) (group by ({CHIP}, namespace) (npu_pod_info))",
            "chips allocated to a namespace (kubelet)",
        ),
        Record("cluster:npu_chips:count", "count by () (npu_up)", "chips in the cluster"),
        Record("cluster:npu_chips_in_use:sum", "sum by () (chip:npu_in_use:bool)", "chips in use in the cluster"),
        Record(
            "cluster:npu_chips_low_utilization:sum",
            "sum by () (instance:npu_chips_low_utilization:sum)",
            f"chips in use below {pct(threshold)} in the cluster",
        ),
        Record(
            "cluster:npu_allocation:ratio",
            f"cluster:npu_chips_in_use:sum / {positive('cluster:npu_chips:count')}",
            "share of the cluster's chips in use",
        ),
        Record("cluster:npu_hbm_headroom_bytes:sum", "sum by () (instance:npu_hbm_headroom_bytes:sum)", "free HBM in the cluster"),
    ] + _levels("5m", quantiles)
    return chips + [Record(*rule) for rule in energy_5m(threshold)]


def _rollups(interval: str, states: tuple[str, ...], quantiles: tuple[float, ...]) -> list[Record]:
    """Hourly and daily figures from the 5m records, and the hourly records `report` reads."""
    return (
        [
            Record(records.REPORT_UTIL, f"avg_over_time({UTIL}[1h])", "AI Core utilization of each chip, 1h average"),
            Record(f"chip:{UTIL}:avg1d", f"avg_over_time(chip:{UTIL}:avg1h[1d])", "AI Core utilization of each chip, daily average"),
            Record("chip:npu_in_use:avg1d", "avg_over_time(chip:npu_in_use:bool[1d])", "share of the last day each chip was in use"),
            Record(
                "chip:npu_hbm_usage:max1d",
                "max_over_time(chip:npu_hbm_usage:ratio[1d])",
                "peak HBM used / total of each chip over the last day",
            ),
            Record(f"instance:{UTIL}:avg1d", f"avg by ({NODE}) (chip:{UTIL}:avg1d)", "mean chip utilization of a node, daily"),
            Record(
                f"namespace:{UTIL}:avg1d",
                f"avg by (namespace) (\n  {_pod_chips(f'chip:{UTIL}:avg1d')}\n)",
                "mean utilization of a namespace's chips, daily",
            ),
            Record(f"cluster:{UTIL}:avg1d", f"avg by () (chip:{UTIL}:avg1d)", "mean chip utilization of the cluster, daily"),
        ]
        + _chip_hours(interval)
        + _report_hours(interval, states)
        + [
            Record(
                "cluster:npu_chips_in_use:avg1d", "avg_over_time(cluster:npu_chips_in_use:sum[1d])", "mean chips in use over the last day"
            ),
            Record(
                "instance:npu_hbm_usage:max1d",
                f"max by ({NODE}) (chip:npu_hbm_usage:max1d)",
                "peak HBM used / total of a node's busiest chip over the last day",
            ),
            Record("cluster:npu_hbm_usage:max1d", "max by () (instance:npu_hbm_usage:max1d)", "peak HBM use of any chip over the last day"),
        ]
        + [r for r in _levels("1h", quantiles) if "in_use" not in r.record]
        + [Record(*rule) for rule in energy_1h()]
    )


def recording_rules(table: Thresholds, *, windows: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The recording rule file: capacity-planning aggregates per chip, node, namespace, cluster."""
    table = with_windows(table, windows)
    groups = []
    for name, interval, rules in recording_specs(table):
        group: dict[str, Any] = {"name": name}
        if interval:
            group["interval"] = interval
        group["rules"] = [r.rule() for r in rules]
        groups.append(group)
    return {"groups": groups}


def record_names(table: Thresholds) -> list[str]:
    return sorted({r.record for _, _, rules in recording_specs(table) for r in rules})
