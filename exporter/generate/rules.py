"""Prometheus alerting and recording rules from the threshold table: pure functions, plain data.

Every number an expression compares with, and every window, comes from the table
(exporter/generate/thresholds.yaml); the PromQL shapes live here, one builder per contract alert.
Label conventions: the exporter's series carry `npu`, `chip`, `device` (chips) or
`job_name`, `rank` (training jobs); Prometheus adds the target labels `job` and `instance`.
Joins and aggregations name `job` and `instance` explicitly so that any further target
labels (a ServiceMonitor's `pod`, `service`, ...) never split a node or a cluster.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from exporter.generate import fault_alerts, interconnect_rules
from exporter.generate.common import (
    IN_USE_SOURCES,
    JOB,
    GenerateError,
    dbm,
    in_use_chips,
    num,
    pct,
    profile_fresh,
    with_windows,
)
from exporter.generate.handover import HANDS_OVER_TO, exporter_down_alert, handover_problem
from exporter.generate.job_alerts import not_finished, stalled, straggler
from exporter.generate.source_failing import source_failing_description
from exporter.generate.texts import (
    CHIP_SHORT,
    CHIP_TEXT,
    ISOLATED_NOW,
    JOB_SHORT,
    JOB_TEXT,
    PORT_SHORT,
    PORT_TEXT,
)
from exporter.generate.thresholds import AlertSpec, Thresholds, duration_seconds


# --- expression pieces of the alerts -------------------------------------------------------
def job_phase_share(stages: str, range_: str, offset: str = "") -> str:
    """Share of iteration time spent in ``stages`` (regex), from the hooks' counters (whatever word each phase was given)."""
    off = f" offset {offset}" if offset else ""
    return (
        f'sum without (phase, stage) (rate(npu_job_phase_seconds_total{{stage=~"{stages}"}}[{range_}]{off}))\n'
        f"  / rate(npu_job_iteration_duration_seconds_sum[{range_}]{off})"
    )


def mean_iteration(range_: str, offset: str = "") -> str:
    off = f" offset {offset}" if offset else ""
    return f"rate(npu_job_iteration_duration_seconds_sum[{range_}]{off})\n  / rate(npu_job_iteration_duration_seconds_count[{range_}]{off})"


def _indent(expr: str, by: str = "  ") -> str:
    return "\n".join(by + line for line in expr.splitlines())


def on_device(expr: str) -> str:
    """``expr`` (per rank) with the `device` of the rank's npu_job_info on the same exporter (two
    nodes may run the same job_name and rank); unchanged without one (a profile-only job)."""
    return (
        f"(\n{_indent(expr)}\n)\n* on ({JOB}) group_left (device)\n  topk by ({JOB}) (1, npu_job_info)\n"
        f"or on ({JOB})\n(\n{_indent(expr)}\n)"
    )


# --- alert builders: spec + table -> (expr, summary, description) ------------------------------
Built = tuple[str, str, str]


@dataclass(frozen=True)
class Tier:
    """One rule of an alert that pages at two severities under one name: the expressions
    exclude each other, so a chip is in one tier at a time and pages once."""

    severity: str
    built: Built


def _low_utilization(spec: AlertSpec, table: Thresholds) -> Built:
    ind = table[spec.indicator] if spec.indicator else None
    sources = spec.param("in_use", IN_USE_SOURCES)
    expr = (
        f"avg_over_time(npu_aicore_utilization_ratio[{spec.range}]) < {num(spec.threshold)}\n"
        f"and on (job, instance, device)\n(\n  {in_use_chips(tuple(sources))}\n)"
    )
    healthy = f" (healthy: {ind.healthy_text()})" if ind and ind.healthy is not None else ""
    return (
        expr,
        f"NPU {CHIP_SHORT} is in use but below {pct(spec.threshold)} utilization",
        (
            f"The AI Core utilization of {CHIP_TEXT} averaged {{{{ $value | humanizePercentage }}}} over "
            f"{spec.range}, below {pct(spec.threshold)} for {spec.window}{healthy}, while a process, pod or "
            f"training job uses the chip."
        ),
    )


def _unstable(spec: AlertSpec, table: Thresholds) -> Built:
    mean_below = spec.param("mean_below", table[spec.indicator].healthy if spec.indicator else 0.85)
    sources = spec.param("in_use", IN_USE_SOURCES)
    expr = (
        f"stddev_over_time(npu_aicore_utilization_ratio[{spec.range}]) > {num(spec.threshold)}\n"
        f"and\navg_over_time(npu_aicore_utilization_ratio[{spec.range}]) < {num(mean_below)}\n"
        f"and on (job, instance, device)\n(\n  {in_use_chips(tuple(sources), spec.alert)}\n)"
    )
    return (
        expr,
        f"NPU {CHIP_SHORT} utilization swings in a saw-tooth",
        (
            f"The AI Core utilization of {CHIP_TEXT} swings by a standard deviation of "
            f"{{{{ $value | humanizePercentage }}}} over {spec.range} (above {pct(spec.threshold)}) around a mean "
            f"below {pct(mean_below)}, for {spec.window}, while a process, pod or training job uses the chip: the "
            f"task stream stops and restarts."
        ),
    )


def _hot_operator(spec: AlertSpec, table: Thresholds) -> Built:
    hot = profile_fresh(f"npu_profile_max_operator_ratio > {num(spec.threshold)}", table.alerting.profile_max_age)
    expr = (
        f"(\n{_indent(hot)}\n)\n* on ({JOB}) group_left (op_type)\n"
        f'  (0 * npu_profile_operator_time_ratio{{position="1"}} + 1)\n'
        f"or on ({JOB})\n(\n{_indent(hot)}\n)"
    )
    return (
        expr,
        f"One operator type dominates the device time of {JOB_SHORT}",
        (
            f"In the latest profile of {JOB_TEXT}, operator type {{{{ $labels.op_type }}}} takes "
            f"{{{{ $value | humanizePercentage }}}} of device kernel time (above {pct(spec.threshold)})."
        ),
    )


def _top_operators(spec: AlertSpec, table: Thresholds) -> Built:
    expr = profile_fresh(f"npu_profile_top3_operator_ratio > {num(spec.threshold)}", table.alerting.profile_max_age)
    return (
        expr,
        f"Three operator types dominate the device time of {JOB_SHORT}",
        (
            f"In the latest profile of {JOB_TEXT}, the three most expensive operator types take "
            f"{{{{ $value | humanizePercentage }}}} of device kernel time (healthy: < {pct(spec.threshold)})."
        ),
    )


def _memcpy(spec: AlertSpec, table: Thresholds) -> Built:
    ind = table[spec.indicator] if spec.indicator else None
    hooks = f"(\n{_indent(job_phase_share('h2d|d2h', spec.range))}\n) > {num(spec.threshold)}"
    profile = profile_fresh(f"npu_profile_memcpy_ratio > {num(spec.threshold)}", table.alerting.profile_max_age)
    expr = f"{hooks}\nor on ({JOB})\n(\n{_indent(profile)}\n)"
    healthy = f" (healthy: {ind.healthy_text()})" if ind and ind.healthy is not None else ""
    return (
        expr,
        f"Memory copies take a large share of the steps of {JOB_SHORT}",
        (
            f"{JOB_TEXT[0].upper()}{JOB_TEXT[1:]} spends {{{{ $value | humanizePercentage }}}} of its step time in "
            f"host-device memory copies (H2D + D2H), above {pct(spec.threshold)}{healthy}."
        ),
    )


def _framework(spec: AlertSpec, table: Thresholds) -> Built:
    baseline = spec.param("baseline", "1d")
    factor = 1 + float(spec.param("increase", 0.5))
    now, before = job_phase_share("framework", spec.range), job_phase_share("framework", spec.range, baseline)
    hooks = f"(\n{_indent(now)}\n) > {num(spec.threshold)}\nunless\n(\n{_indent(now)}\n)\n<= {num(factor)} * (\n{_indent(before)}\n)"
    prof = "npu_profile_framework_overhead_ratio"
    profile = profile_fresh(
        f"{prof} > {num(spec.threshold)}\nunless {prof} <= {num(factor)} * ({prof} offset {baseline})", table.alerting.profile_max_age
    )
    expr = f"(\n{_indent(hooks)}\n)\nor on ({JOB})\n(\n{_indent(profile)}\n)"
    return (
        expr,
        f"Host-side framework overhead is high for {JOB_SHORT}",
        (
            f"{JOB_TEXT[0].upper()}{JOB_TEXT[1:]} spends {{{{ $value | humanizePercentage }}}} of its step time in "
            f"the framework on the host, above {pct(spec.threshold)} and more than {num(factor)}x its share "
            f"{baseline} earlier (or no baseline)."
        ),
    )


def _idle_gaps(spec: AlertSpec, table: Thresholds) -> Built:
    # Only ranks that were already iterating one range ago: while a series is younger than
    # the range, rate() underestimates it and a job that just started would look idle.
    hooks = (
        f"1 - rate(npu_job_iteration_duration_seconds_sum[{spec.range}]) > {num(spec.threshold)}\n"
        f"and rate(npu_job_iterations_total[{spec.range}]) > 0\n"
        f"and on ({JOB}) npu_job_iterations_total offset {spec.range}"
    )
    profile = profile_fresh(f"npu_profile_idle_ratio > {num(spec.threshold)}", table.alerting.profile_max_age)
    expr = f"(\n{_indent(hooks)}\n)\nor on ({JOB})\n(\n{_indent(profile)}\n)"
    return (
        expr,
        f"The device idles between the steps of {JOB_SHORT}",
        (
            f"{JOB_TEXT[0].upper()}{JOB_TEXT[1:]} leaves the device idle {{{{ $value | humanizePercentage }}}} of "
            f"the time (between iterations, or Free time in its latest profile), above {pct(spec.threshold)}."
        ),
    )


def _stalled(spec: AlertSpec, table: Thresholds) -> Built:
    assert spec.threshold is not None
    return (
        stalled(spec.threshold),
        f"Training {JOB_SHORT} has stalled",
        (
            f"{JOB_TEXT[0].upper()}{JOB_TEXT[1:]} has not finished an iteration for {{{{ $value | humanizeDuration }}}} "
            f"while it still reports through the hooks (threshold {num(spec.threshold)}s), or its hook went silent "
            f"without closing (the process crashed or was killed)."
        ),
    )


def _straggler(spec: AlertSpec, table: Thresholds) -> Built:
    assert spec.threshold is not None and spec.range is not None
    return (
        straggler(spec.range, spec.threshold, int(spec.param("min_ranks", 2))),
        f"Straggler: {JOB_SHORT} holds its job back",
        (
            f'{JOB_TEXT[0].upper()}{JOB_TEXT[1:]} spends {{{{ $value | printf "%.2f" }}}}x the median time per '
            f"iteration of its job's ranks outside communication over {spec.range} (threshold "
            f"{num(1 + spec.threshold)}x): the other ranks wait for it in their collectives."
        ),
    )


def _regression(spec: AlertSpec, table: Thresholds) -> Built:
    baseline = spec.param("baseline", "1d")
    expr = (
        f"(\n{_indent(mean_iteration(spec.range))}\n)\n/\n(\n{_indent(mean_iteration(spec.range, baseline))}\n)\n"
        f"- 1 > {num(spec.threshold)}"
    )
    return (
        expr,
        f"Iterations of {JOB_SHORT} are slower than {baseline} ago",
        (
            f"The mean iteration time of {JOB_TEXT} over {spec.range} is {{{{ $value | humanizePercentage }}}} "
            f"above the same job's {baseline} earlier (threshold {pct(spec.threshold)})."
        ),
    )


def missing_chips(lookback: str, sel: str = "") -> str:
    """Chips a node misses (may be <= 0): npu_expected_devices (config, else pci) minus the chips
    listed now; without an expectation, the most listed within ``lookback`` minus now."""
    labels = f"{{{sel}}}" if sel else ""
    expected = lambda source: f'npu_expected_devices{{{sel + ", " if sel else ""}source="{source}"}}'  # noqa: E731
    return (
        f"max without (source) (\n  {expected('config')}\n  or on (job, instance)\n  {expected('pci')}\n)\n"
        f"- npu_devices{labels}\n"
        f"or on (job, instance)\n"
        f"(\n  max_over_time(npu_devices{labels}[{lookback}]) - npu_devices{labels}\n"
        f"  unless on (job, instance) npu_expected_devices{labels}\n)"
    )


def missing_lookback(spec: AlertSpec | None) -> str:
    return spec.param("lookback", "1d") if spec else "1d"


def _missing(spec: AlertSpec, table: Thresholds) -> Built:
    lookback = missing_lookback(spec)
    expr = f"(\n{_indent(missing_chips(lookback))}\n) > 0"
    expectation = (
        "{{ with printf `npu_expected_devices{instance=%q}` $labels.instance | query | sortByLabel `source` }}"
        " It should have{{ range . }} {{ .Value }} ({{ .Labels.source }}){{ end }}."
        f"{{{{ else }}}} It has no expected chip count (npu_smi.expected_devices, or 910/910B PCI functions in sysfs): "
        f"compared with the most chips it reported within the last {lookback}.{{{{ end }}}}"
    )
    return (
        expr,
        "NPU chips are missing on {{ $labels.instance }}",
        (f"{{{{ $labels.instance }}}} reports {{{{ $value }}}} NPU chip(s) fewer than expected, for {spec.window}.{expectation}"),
    )


def _temperature(spec: AlertSpec, table: Thresholds) -> Built:
    expr = f"npu_temperature_celsius > {num(spec.threshold)}"
    return (
        expr,
        f"NPU {CHIP_SHORT} is hot",
        f"The temperature of {CHIP_TEXT} is {{{{ $value }}}} °C, above {num(spec.threshold)} °C for {spec.window}.",
    )


def _hbm_full(spec: AlertSpec, table: Thresholds) -> Built:
    expr = f"npu_hbm_used_bytes / npu_hbm_total_bytes > {num(spec.threshold)}"
    return (
        expr,
        f"HBM of NPU {CHIP_SHORT} is almost full",
        (f"{{{{ $value | humanizePercentage }}}} of the HBM of {CHIP_TEXT} is in use, above {pct(spec.threshold)} for {spec.window}."),
    )


def _ecc(spec: AlertSpec, table: Thresholds) -> Built:
    expr = f'increase(npu_ecc_errors_total{{type="double_bit"}}[{spec.range}]) > {num(spec.threshold)}'
    return (
        expr,
        f"Uncorrectable ECC errors on NPU {CHIP_SHORT}",
        (
            f'{CHIP_TEXT[0].upper()}{CHIP_TEXT[1:]} counted {{{{ $value | printf "%.0f" }}}} new double-bit ECC '
            f"error(s) in its {{{{ $labels.memory }}}} memory within {spec.range}."
        ),
    )


def isolated_pages(matchers: str = "") -> str:
    """Pages each chip has isolated, over every memory and error type."""
    selector = f"npu_ecc_isolated_pages{{{matchers}}}" if matchers else "npu_ecc_isolated_pages"
    return f"sum without (memory, type) ({selector})"


def isolated_pages_limit(spec: AlertSpec) -> float:
    limit = spec.param("critical_pages", 64.0)
    if not isinstance(limit, float) or limit < 0:
        raise GenerateError(f"{spec.alert}: params.critical_pages: expected a number of pages >= 0, got {limit!r}")
    return limit


def _pages_isolated(spec: AlertSpec, table: Thresholds) -> list[Tier]:
    limit = isolated_pages_limit(spec)
    total, double = isolated_pages(), isolated_pages('type="double_bit"')
    critical = f"{total} > {num(limit)}\nor\n(\n  {total}\n  and\n  {double} > 0\n)"
    # New pages: above the lowest count within the range (a replaced chip starting at 0 counts from there).
    new = (
        f"sum without (memory, type) (\n  npu_ecc_isolated_pages - min_over_time(npu_ecc_isolated_pages[{spec.range}])\n)"
        f" > {num(spec.threshold)}"
    )
    warning = f"{new}\nunless\n(\n{_indent(critical)}\n)"
    return [
        Tier(
            spec.severity,
            (
                warning,
                f"NPU {CHIP_SHORT} isolated memory pages",
                (
                    f"{CHIP_TEXT[0].upper()}{CHIP_TEXT[1:]} isolated {{{{ $value }}}} more memory page(s) within {spec.range} "
                    f"after repeated ECC errors: its HBM or DDR is degrading.{ISOLATED_NOW}"
                ),
            ),
        ),
        Tier(
            "critical",
            (
                critical,
                f"NPU {CHIP_SHORT} is losing memory to ECC errors",
                (
                    f"{CHIP_TEXT[0].upper()}{CHIP_TEXT[1:]} has lost {{{{ $value }}}} memory page(s) to ECC errors "
                    f"(critical: any page after an uncorrectable double-bit error, or more than {num(limit)} pages): "
                    f"drain it and plan its replacement.{ISOLATED_NOW}"
                ),
            ),
        ),
    ]


def _source_failing(spec: AlertSpec, table: Thresholds) -> Built:
    return (
        "cann_exporter_source_success == 0",
        "cann-exporter source {{ $labels.source }} is failing on {{ $labels.instance }}",
        source_failing_description(spec.window),
    )


def _memory_high(spec: AlertSpec, table: Thresholds) -> Built:
    # Only where the exporter reports a cgroup limit: the division drops every other target.
    expr = f"process_resident_memory_bytes / cann_exporter_memory_limit_bytes > {num(spec.threshold)}"
    return (
        expr,
        "cann-exporter on {{ $labels.instance }} is close to its memory limit",
        (
            f"The exporter on {{{{ $labels.instance }}}} has used {{{{ $value | humanizePercentage }}}} of its cgroup "
            f"memory limit for {spec.window} (threshold {pct(spec.threshold)}); at the limit the kernel kills it and "
            f"every NPU metric and alert of the node goes with it."
        ),
    )


def _fds_high(spec: AlertSpec, table: Thresholds) -> Built:
    # process_* series of other exporters are left out by the join on the exporter's build info.
    expr = f"process_open_fds / process_max_fds > {num(spec.threshold)}\nand on (job, instance) cann_exporter_build_info"
    return (
        expr,
        "cann-exporter on {{ $labels.instance }} is running out of file descriptors",
        (
            f"The exporter on {{{{ $labels.instance }}}} has {{{{ $value | humanizePercentage }}}} of its maximum file "
            f"descriptors open for {spec.window} (threshold {pct(spec.threshold)}); when none is left, npu-smi calls "
            f"and scrapes fail."
        ),
    )


def _simulated(spec: AlertSpec, table: Thresholds) -> Built:
    return (
        "cann_exporter_simulated == 1",
        "cann-exporter on {{ $labels.instance }} serves SIMULATED chips",
        (
            f"The exporter on {{{{ $labels.instance }}}} has served data from its built-in simulator (scenario "
            f"{{{{ $labels.scenario }}}}, model {{{{ $labels.model }}}}) for {spec.window}: its chips, utilization and "
            f"alerts are not real hardware. Remove --simulate (and CANN_EXPORTER_SIMULATOR_SCENARIO) on a real node."
        ),
    )


# --- network / interconnect (hccn_tool) --------------------------------------------------------
# Optical power params (watts) of NPUOpticalPowerOutOfRange: (direction, metric, low param, high param).
OPTICAL_POWER = (
    ("rx", "npu_optical_rx_power_watts", "rx_power_low", "rx_power_high"),
    ("tx", "npu_optical_tx_power_watts", "tx_power_low", "tx_power_high"),
)
_LABEL_VALUE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_ -]*$")  # no regex metacharacters, no quotes


def mw(watts: float) -> str:
    return f"{watts * 1000:g} mW"


def _label_values(spec: AlertSpec, name: str, default: tuple[str, ...]) -> tuple[str, ...]:
    values = tuple(spec.param(name, default))
    bad = [v for v in values if not _LABEL_VALUE.match(v)]
    if not values or bad:
        raise GenerateError(f"{spec.alert}: params.{name}: expected label values without regex characters, got {list(values)}")
    return values


def optical_power_limits(spec: AlertSpec) -> dict[str, tuple[float, float]]:
    """{direction: (low, high)} in watts, from the alert's params."""
    out = {}
    for direction, _, low_key, high_key in OPTICAL_POWER:
        low, high = spec.param(low_key), spec.param(high_key)
        if not isinstance(low, float) or not isinstance(high, float) or not 0 < low < high:
            raise GenerateError(
                f"{spec.alert}: params.{low_key} and params.{high_key}: expected watts with 0 < low < high, got {low!r} and {high!r}"
            )
        out[direction] = (low, high)
    return out


def _link_down(spec: AlertSpec, table: Thresholds) -> Built:
    return (
        "npu_network_link_up == 0",
        f"Network link down on NPU {PORT_SHORT}",
        (
            f"hccn_tool -link has reported the link of {PORT_TEXT} DOWN for {spec.window}: collective "
            f"communication (HCCL) through this port fails or stalls."
        ),
    )


def _link_flapping(spec: AlertSpec, table: Thresholds) -> Built:
    # Newer drivers count downs; older ones only ups (every down of a port is followed by an up).
    expr = (
        f"(\n  increase(npu_network_link_down_transitions_total[{spec.range}])\n"
        f"  or increase(npu_network_link_up_transitions_total[{spec.range}])\n) >= {num(spec.threshold)}"
    )
    return (
        expr,
        f"Network link of NPU {PORT_SHORT} is flapping",
        (
            f'The link of {PORT_TEXT} changed {{{{ $value | printf "%.0f" }}}} times within {spec.range} '
            f"(hccn_tool -link_stat: link down count, or up count on drivers without one; threshold "
            f"{num(spec.threshold)}): every change interrupts the collective operations using the port."
        ),
    )


def _network_errors(spec: AlertSpec, table: Thresholds) -> Built:
    kinds = _label_values(spec, "kinds", ("roce", "fcs", "bad_packets"))
    expr = (
        f"sum without (direction, kind) (\n"
        f'  rate(npu_network_errors_total{{kind=~"{"|".join(kinds)}"}}[{spec.range}])\n) > {num(spec.threshold)}'
    )
    return (
        expr,
        f"Network errors on NPU {PORT_SHORT}",
        (
            f'{PORT_TEXT[0].upper()}{PORT_TEXT[1:]} counts {{{{ $value | printf "%.2f" }}}} bad packets per '
            f"second over {spec.range} (hccn_tool -stat, kinds {', '.join(kinds)}), above {num(spec.threshold)}/s "
            f"for {spec.window}."
        ),
    )


def _pfc_storm(spec: AlertSpec, table: Thresholds) -> Built:
    expr = f'sum without (direction, kind) (\n  rate(npu_network_packets_total{{kind="pfc"}}[{spec.range}])\n) > {num(spec.threshold)}'
    return (
        expr,
        f"PFC storm on NPU {PORT_SHORT}",
        (
            f'{PORT_TEXT[0].upper()}{PORT_TEXT[1:]} receives and sends {{{{ $value | printf "%.0f" }}}} PFC pause '
            f"frames per second over {spec.range}, above {num(spec.threshold)}/s for {spec.window}: a congested or "
            f"stuck receiver is pausing the fabric."
        ),
    )


def _optical_power(spec: AlertSpec, table: Thresholds) -> Built:
    limits = optical_power_limits(spec)
    parts = []
    for direction, metric, _, _ in OPTICAL_POWER:
        low, high = limits[direction]
        parts.append(f'label_replace(\n  {metric} < {num(low)} or {metric} > {num(high)},\n  "direction", "{direction}", "", ""\n)')
    ranges = {d: f"{mw(lo)} to {mw(hi)} ({dbm(lo):.1f} to {dbm(hi):+.1f} dBm)" for d, (lo, hi) in limits.items()}
    return (
        "\nor\n".join(parts),
        (f"Optical {{{{ $labels.direction }}}} power of NPU {PORT_SHORT} is out of range (lane {{{{ $labels.lane }}}})"),
        (
            f"The optical module of {PORT_TEXT} reads {{{{ $value | humanize }}}}W {{{{ $labels.direction }}}} power on "
            f"lane {{{{ $labels.lane }}}} for {spec.window}, outside "
            f'{{{{ if eq $labels.direction "rx" }}}}{ranges["rx"]}{{{{ else }}}}{ranges["tx"]}{{{{ end }}}}.'
        ),
    )


def _optical_temperature(spec: AlertSpec, table: Thresholds) -> Built:
    expr = f"npu_optical_temperature_celsius > {num(spec.threshold)}"
    return (
        expr,
        f"Optical module of NPU {PORT_SHORT} is hot",
        (f"The optical module of {PORT_TEXT} is at {{{{ $value }}}} °C, above {num(spec.threshold)} °C for {spec.window}."),
    )


def _network_unhealthy(spec: AlertSpec, table: Thresholds) -> Built:
    ok = _label_values(spec, "ok_states", ("Success", "Init"))
    expr = f'npu_network_health{{state!~"{"|".join(ok)}"}} == 1'
    return (
        expr,
        f"Network probe of NPU {PORT_SHORT} reports {{{{ $labels.state }}}}",
        (
            f"hccn_tool -net_health has reported {{{{ $labels.state }}}} for {PORT_TEXT} for {spec.window}: the "
            f"port cannot reach its detect address (netdetect in /etc/hccn.conf)."
        ),
    )


BUILDERS: dict[str, Callable[[AlertSpec, Thresholds], Built | list[Tier]]] = {
    "NPULowUtilization": _low_utilization,
    "NPUUtilizationUnstable": _unstable,
    "NPUHotOperator": _hot_operator,
    "NPUTopOperatorsDominant": _top_operators,
    "NPUMemcpyHigh": _memcpy,
    "NPUFrameworkOverheadHigh": _framework,
    "NPUIdleGapsHigh": _idle_gaps,
    "NPUTrainingStalled": _stalled,
    "NPUIterationTimeRegression": _regression,
    "NPUJobStragglerRank": _straggler,
    "NPUUnhealthy": fault_alerts.unhealthy,
    "NPUNeedsIsolation": fault_alerts.needs_isolation,
    "NPUMissing": _missing,
    "NPUTemperatureHigh": _temperature,
    "NPUHBMAlmostFull": _hbm_full,
    "NPUECCDoubleBitErrors": _ecc,
    "NPUMemoryPagesIsolated": _pages_isolated,
    **interconnect_rules.BUILDERS,
    "NPUNetworkLinkDown": _link_down,
    "NPUNetworkLinkFlapping": _link_flapping,
    "NPUNetworkErrors": _network_errors,
    "NPUNetworkPFCStorm": _pfc_storm,
    "NPUOpticalPowerOutOfRange": _optical_power,
    "NPUOpticalTemperatureHigh": _optical_temperature,
    "NPUNetworkUnhealthy": _network_unhealthy,
    "CANNExporterSourceFailing": _source_failing,
    "CANNExporterDown": exporter_down_alert,
    "CANNExporterMemoryHigh": _memory_high,
    "CANNExporterFileDescriptorsHigh": _fds_high,
    "CANNExporterSimulated": _simulated,
}
CONTRACT_ALERTS = tuple(BUILDERS)

GROUPS = (
    (
        "cann-exporter-npu",
        (
            "NPULowUtilization",
            "NPUUtilizationUnstable",
            "NPUUnhealthy",
            "NPUNeedsIsolation",
            "NPUMissing",
            "NPUTemperatureHigh",
            "NPUHBMAlmostFull",
            "NPUECCDoubleBitErrors",
            "NPUMemoryPagesIsolated",
        ),
    ),
    interconnect_rules.GROUP,
    (
        "cann-exporter-training",
        (
            "NPUHotOperator",
            "NPUTopOperatorsDominant",
            "NPUMemcpyHigh",
            "NPUFrameworkOverheadHigh",
            "NPUIdleGapsHigh",
            "NPUTrainingStalled",
            "NPUIterationTimeRegression",
            "NPUJobStragglerRank",
        ),
    ),
    (
        "cann-exporter-network",
        (
            "NPUNetworkLinkDown",
            "NPUNetworkLinkFlapping",
            "NPUNetworkErrors",
            "NPUNetworkPFCStorm",
            "NPUOpticalPowerOutOfRange",
            "NPUOpticalTemperatureHigh",
            "NPUNetworkUnhealthy",
        ),
    ),
    (
        "cann-exporter-self",
        (
            "CANNExporterSourceFailing",
            "CANNExporterDown",
            "CANNExporterMemoryHigh",
            "CANNExporterFileDescriptorsHigh",
            "CANNExporterSimulated",
        ),
    ),
)
# Alerts about a training rank (job_name, rank): they carry the rank's device (npu_job_info).
JOB_ALERTS = dict(GROUPS)["cann-exporter-training"]
# Thresholds that need a value for the expression to make sense.
_NEEDS_THRESHOLD = {name for name in CONTRACT_ALERTS} - {
    "NPUUnhealthy",
    "NPUNeedsIsolation",
    "NPUMissing",
    "CANNExporterSourceFailing",
    "CANNExporterDown",
    "CANNExporterSimulated",
    "NPUNetworkLinkDown",
    "NPUOpticalPowerOutOfRange",
    "NPUNetworkUnhealthy",
    "NPUHCCSLinkDown",
}
_NEEDS_RANGE = {
    "NPULowUtilization",
    "NPUUtilizationUnstable",
    "NPUMemcpyHigh",
    "NPUFrameworkOverheadHigh",
    "NPUIdleGapsHigh",
    "NPUIterationTimeRegression",
    "NPUJobStragglerRank",
    "NPUECCDoubleBitErrors",
    "NPUMemoryPagesIsolated",
    "NPUNetworkLinkFlapping",
    "NPUNetworkErrors",
    "NPUNetworkPFCStorm",
    *interconnect_rules.NEEDS_RANGE,
}


def job_lookback(table: Thresholds) -> str:
    """The longest range a job alert rates over: how long after a finish its rates still read."""
    ranges = [s.range for s in table.alerts if s.alert in JOB_ALERTS and s.range is not None]
    return max(ranges, key=duration_seconds, default="5m")


def runbook_url(table: Thresholds, alert: str) -> str:
    return f"{table.alerting.runbook_url}#{alert.lower()}"


def alert_rules(spec: AlertSpec, table: Thresholds) -> list[dict[str, Any]]:
    """The rule of one alert, or its rules when it pages at two severities."""
    builder = BUILDERS.get(spec.alert)
    if builder is None:
        raise GenerateError(f"alert {spec.alert}: not a contract alert; the generator knows {', '.join(CONTRACT_ALERTS)}")
    if spec.alert in _NEEDS_THRESHOLD and spec.threshold is None:
        raise GenerateError(f"alert {spec.alert}: needs a threshold (set one, or an indicator with a bound)")
    if spec.alert in _NEEDS_RANGE and spec.range is None:
        raise GenerateError(f"alert {spec.alert}: needs a range")
    built = builder(spec, table)
    tiers = built if isinstance(built, list) else [Tier(spec.severity, built)]
    if spec.alert in JOB_ALERTS:
        lookback = job_lookback(table)
        tiers = [Tier(t.severity, (on_device(not_finished(t.built[0], lookback)), *t.built[1:])) for t in tiers]
    return [rule(spec, table, tier) for tier in tiers]


def rule(spec: AlertSpec, table: Thresholds, tier: Tier) -> dict[str, Any]:
    expr, summary, description = tier.built
    out: dict[str, Any] = {"alert": spec.alert, "expr": expr + "\n"}
    if duration_seconds(spec.window) > 0:
        out["for"] = spec.window
    if spec.alert != HANDS_OVER_TO:
        out["keep_firing_for"] = table.alerting.handover
    out["labels"] = {"severity": tier.severity}
    out["annotations"] = {"summary": summary, "description": description, "runbook_url": runbook_url(table, spec.alert)}
    return out


def alerts(table: Thresholds, *, windows: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The alerting rule file (``{"groups": [...]}``) for every alert in the table."""
    table = with_windows(table, windows)
    specs = {spec.alert: spec for spec in table.alerts}
    unknown = sorted(set(specs) - set(CONTRACT_ALERTS))
    if unknown:
        raise GenerateError(f"alerts {', '.join(unknown)}: not contract alerts; the generator knows {', '.join(CONTRACT_ALERTS)}")
    problem = handover_problem(table)
    if problem:
        raise GenerateError(problem)
    groups = []
    for name, members in GROUPS:
        rules = [r for m in members if m in specs for r in alert_rules(specs[m], table)]
        if rules:
            groups.append({"name": name, "rules": rules})
    return {"groups": groups}
