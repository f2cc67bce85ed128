"""Alert builders for the chips as npu-smi reports them (the cann-exporter-npu group):
utilization while in use, missing chips, temperature, HBM, ECC errors and isolated pages, and
the fault alerts of fault_alerts.py. Spec + table -> (expr, summary, description), or two Tiers;
rules.py puts the groups together."""

from __future__ import annotations

from exporter.generate import fault_alerts
from exporter.generate.common import IN_USE_SOURCES, Built, Tier, healthy_note, in_use_chips, indent, pct, too_hot
from exporter.generate.texts import CHIP_OWNER, CHIP_OWNER_SHORT, CHIP_SHORT, CHIP_TEXT, COUNT, ISOLATED_NOW, SHARE, VALUE, upper_first
from exporter.thresholds.alert_facts import isolated_pages_limit
from exporter.thresholds.table import AlertSpec, Thresholds, num


def _low_utilization(spec: AlertSpec, table: Thresholds) -> Built:
    sources = spec.param("in_use", IN_USE_SOURCES)
    expr = (
        f"avg_over_time(npu_aicore_utilization_ratio[{spec.span}]) < {num(spec.bound)}\n"
        f"and on (job, instance, device)\n(\n  {in_use_chips(tuple(sources))}\n)"
    )
    return (
        expr,
        f"NPU {CHIP_SHORT} is in use{CHIP_OWNER_SHORT} but below {pct(spec.bound)} utilization",
        f"The AI Core utilization of {CHIP_TEXT} averaged {SHARE} over {spec.span}, below {pct(spec.bound)} for {spec.window}{healthy_note(spec, table)}, while a process, pod or training job uses the chip.{CHIP_OWNER}",
    )


def _unstable(spec: AlertSpec, table: Thresholds) -> Built:
    mean_below = spec.param("mean_below", table[spec.indicator].healthy if spec.indicator else 0.85)
    sources = spec.param("in_use", IN_USE_SOURCES)
    expr = (
        f"stddev_over_time(npu_aicore_utilization_ratio[{spec.span}]) > {num(spec.bound)}\n"
        f"and\navg_over_time(npu_aicore_utilization_ratio[{spec.span}]) < {num(mean_below)}\n"
        f"and on (job, instance, device)\n(\n  {in_use_chips(tuple(sources), spec.alert)}\n)"
    )
    return (
        expr,
        f"NPU {CHIP_SHORT} utilization swings in a saw-tooth",
        f"The AI Core utilization of {CHIP_TEXT} swings by a standard deviation of {SHARE} over {spec.span} (above {pct(spec.bound)}) around a mean below {pct(mean_below)}, for {spec.window}, while a process, pod or training job uses the chip: the task stream stops and restarts.{CHIP_OWNER}",
    )


def missing_chips(lookback: str, sel: str = "") -> str:
    """Chips a node misses (may be <= 0): npu_expected_devices (config, else pci) minus the chips
    listed now; without an expectation, the most listed within ``lookback`` minus now."""
    labels = f"{{{sel}}}" if sel else ""

    def expected(source: str) -> str:
        return f'npu_expected_devices{{{sel + ", " if sel else ""}source="{source}"}}'

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
    expr = f"(\n{indent(missing_chips(lookback))}\n) > 0"
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
    return too_hot(spec, "npu_temperature_celsius", f"NPU {CHIP_SHORT} is hot", f"The temperature of {CHIP_TEXT} is")


def _hbm_full(spec: AlertSpec, table: Thresholds) -> Built:
    return (
        f"npu_hbm_used_bytes / npu_hbm_total_bytes > {num(spec.bound)}",
        f"HBM of NPU {CHIP_SHORT} is almost full",
        f"{SHARE} of the HBM of {CHIP_TEXT} is in use, above {pct(spec.bound)} for {spec.window}.{CHIP_OWNER}",
    )


def _ecc(spec: AlertSpec, table: Thresholds) -> Built:
    return (
        f'increase(npu_ecc_errors_total{{type="double_bit"}}[{spec.span}]) > {num(spec.bound)}',
        f"Uncorrectable ECC errors on NPU {CHIP_SHORT}",
        f"{upper_first(CHIP_TEXT)} counted {COUNT} new double-bit ECC error(s) in its {{{{ $labels.memory }}}} memory within {spec.span}.{CHIP_OWNER}",
    )


def isolated_pages(matchers: str = "") -> str:
    """Pages each chip has isolated, over every memory and error type."""
    selector = f"npu_ecc_isolated_pages{{{matchers}}}" if matchers else "npu_ecc_isolated_pages"
    return f"sum without (memory, type) ({selector})"


def _pages_isolated(spec: AlertSpec, table: Thresholds) -> list[Tier]:
    limit = isolated_pages_limit(spec)
    total, double = isolated_pages(), isolated_pages('type="double_bit"')
    critical = f"{total} > {num(limit)}\nor\n(\n  {total}\n  and\n  {double} > 0\n)"
    # New pages: above the lowest count within the range (a replaced chip starting at 0 counts from there).
    new = (
        f"sum without (memory, type) (\n  npu_ecc_isolated_pages - min_over_time(npu_ecc_isolated_pages[{spec.span}])\n)"
        f" > {num(spec.bound)}"
    )
    warning = f"{new}\nunless\n(\n{indent(critical)}\n)"
    return [
        Tier(
            spec.severity,
            (
                warning,
                f"NPU {CHIP_SHORT} isolated memory pages",
                f"{upper_first(CHIP_TEXT)} isolated {VALUE} more memory page(s) within {spec.span} after repeated ECC errors: its HBM or DDR is degrading.{ISOLATED_NOW}",
            ),
        ),
        Tier(
            "critical",
            (
                critical,
                f"NPU {CHIP_SHORT} is losing memory to ECC errors",
                f"{upper_first(CHIP_TEXT)} has lost {VALUE} memory page(s) to ECC errors (critical: any page after an uncorrectable double-bit error, or more than {num(limit)} pages): drain it and plan its replacement.{ISOLATED_NOW}",
            ),
        ),
    ]


BUILDERS = {
    "NPULowUtilization": _low_utilization,
    "NPUUtilizationUnstable": _unstable,
    "NPUUnhealthy": fault_alerts.unhealthy,
    "NPUNeedsIsolation": fault_alerts.needs_isolation,
    "NPUMissing": _missing,
    "NPUTemperatureHigh": _temperature,
    "NPUHBMAlmostFull": _hbm_full,
    "NPUECCDoubleBitErrors": _ecc,
    "NPUMemoryPagesIsolated": _pages_isolated,
}
NO_THRESHOLD = {"NPUUnhealthy", "NPUNeedsIsolation", "NPUMissing"}
NEEDS_RANGE = {"NPULowUtilization", "NPUUtilizationUnstable", "NPUECCDoubleBitErrors", "NPUMemoryPagesIsolated"}
GROUP = ("cann-exporter-npu", tuple(BUILDERS))
