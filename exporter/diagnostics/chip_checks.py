"""`diagnose`'s checks of each chip's statistics: the memory pages it isolated after ECC errors
(hardware level: NPUMemoryPagesIsolated's tiers) and its AI Core utilization and swing (macro
level: device_utilization, NPUUtilizationUnstable's saw-tooth). Pure: chip statistics and the
threshold table in, findings out."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from exporter.diagnostics.model import HARDWARE, MACRO, PAGES, RATIO, ChipStats, Finding
from exporter.diagnostics.verdicts import judge, pct
from exporter.thresholds.alert_facts import isolated_pages_limit
from exporter.thresholds.table import ABNORMAL, HEALTHY, WARNING, Thresholds

UTILIZATION = "device_utilization"
PAGES_ALERT = "NPUMemoryPagesIsolated"


def page_findings(chips: Iterable[ChipStats], table: Thresholds) -> list[Finding]:
    return [isolated_pages_finding(chip, table) for chip in chips if chip.isolated_pages]


def isolated_pages_finding(chip: ChipStats, table: Thresholds) -> Finding:
    """NPUMemoryPagesIsolated's tiers: abnormal where it is critical (a page after a double-bit
    error, or more pages than its limit), warning where new pages appeared in the window."""
    total = sum(p.pages for p in chip.isolated_pages)
    double = sum(p.pages for p in chip.isolated_pages if p.type == "double_bit")
    spec = table.find(PAGES_ALERT)
    verdict, bounds = None, ""
    if spec is not None:
        limit, new_above = isolated_pages_limit(spec), spec.threshold or 0.0
        verdict = isolated_pages_verdict(total, double, chip.new_isolated_pages, limit, new_above)
        bounds = f"abnormal: any double-bit or > {limit:g}; warning: > {new_above:g} new"
    detail = ", ".join(f"{p.memory} {p.type} {p.pages:g}" for p in chip.isolated_pages if p.pages)
    if chip.new_isolated_pages:
        detail += f"; {chip.new_isolated_pages:g} new in the window"
    return Finding(
        HARDWARE,
        "isolated_pages",
        "ECC isolated memory pages",
        chip.subject,
        total,
        PAGES,
        verdict,
        None,
        PAGES_ALERT if spec else None,
        bounds,
        detail,
    )


def isolated_pages_verdict(total: float, double: float, new: float | None, limit: float, new_above: float) -> str:
    if double > 0 or total > limit:
        return ABNORMAL
    if new is not None and new > new_above:
        return WARNING
    return HEALTHY


def chip_findings(chips: Iterable[ChipStats], table: Thresholds, faulty: Mapping[str, str] | None = None) -> list[Finding]:
    """Utilization and swing of each chip; a chip with a hardware fault (``faulty``: subject ->
    the fault) is not judged on them: its low use follows from the fault, no pipeline lever helps."""
    out: list[Finding] = []
    for chip in chips:
        fault = (faulty or {}).get(chip.subject)
        if fault is not None:
            out.append(consequence_finding(chip, fault))
            continue
        out.append(utilization_finding(chip, table))
        stability = stability_finding(chip, table)
        if stability is not None:
            out.append(stability)
    return out


def utilization_finding(chip: ChipStats, table: Thresholds) -> Finding:
    verdict, bounds, alert = judge(table, UTILIZATION, chip.mean)
    detail = _spread(chip)
    if not chip.in_use:
        verdict, bounds = None, ""
        detail = "not in use (no process, pod or job): idle capacity, not judged" + (f"; {detail}" if detail else "")
    return Finding(MACRO, "utilization", "Device utilization", chip.subject, chip.mean, RATIO, verdict, UTILIZATION, alert, bounds, detail)


def consequence_finding(chip: ChipStats, fault: str) -> Finding:
    return Finding(
        MACRO,
        "utilization",
        "Device utilization",
        chip.subject,
        chip.mean,
        RATIO,
        None,
        None,
        None,
        "",
        f"not judged: a consequence of the hardware fault ({fault}), see Hardware",
    )


def _spread(chip: ChipStats) -> str:
    if chip.samples < 2 or chip.minimum is None or chip.maximum is None:
        return ""
    return f"min {pct(chip.minimum)}, max {pct(chip.maximum)} over {chip.samples} samples"


def stability_finding(chip: ChipStats, table: Thresholds) -> Finding | None:
    """Saw-tooth: the NPUUtilizationUnstable rule (stddev above its threshold around a mean
    below ``mean_below``). A wide swing around a high mean is only a warning."""
    spec = table.find("NPUUtilizationUnstable")
    if chip.stddev is None or not chip.in_use or spec is None or spec.threshold is None:
        return None
    default_mean = table[UTILIZATION].healthy if UTILIZATION in table else 0.85
    mean_below = float(spec.param("mean_below", default_mean) or 0.85)
    verdict = unstable_verdict(chip.stddev, chip.mean, spec.threshold, mean_below)
    bounds = f"abnormal: stddev > {pct(spec.threshold)} around a mean < {pct(mean_below)}"
    return Finding(
        MACRO,
        "stability",
        "Utilization swing (stddev)",
        chip.subject,
        chip.stddev,
        RATIO,
        verdict,
        UTILIZATION if UTILIZATION in table else None,
        spec.alert,
        bounds,
    )


def unstable_verdict(stddev: float, mean: float, threshold: float, mean_below: float) -> str:
    if stddev > threshold:
        return ABNORMAL if mean < mean_below else WARNING
    return HEALTHY
