"""What `report` asks Prometheus for each figure of the capacity report, from one of two sources:

- ``raw_queries``: the exporter's series, averaged over each step (short windows, or no
  recording rules loaded);
- ``recorded_queries``: the hourly per-chip records of alerts/cann-exporter.rules.yml (one
  sample per chip-hour), when the step is a whole number of hours and they hold the window:
  a 30-day report reads 720 samples per chip where the raw series hold 86,400 at 30 s.

Each query gives series labelled by chip (``instance``, ``npu``, ``chip``, ``device``) or by node
(``instance``); a figure added to the report adds its row to both."""

from __future__ import annotations

from dataclasses import dataclass

from exporter.diagnostics.promapi import promql_duration, selector
from exporter.jobs.metrics import JOB_INFO
from exporter.npusmi.metrics import AICORE, HBM_TOTAL, HBM_USED, HEALTH, PROCESS_MEMORY
from exporter.owners.metrics import OWNER_INFO
from exporter.pods.metrics import POD_INFO
from exporter.thresholds.records import (
    REPORT_HBM_TOTAL,
    REPORT_HBM_USED,
    REPORT_IN_USE,
    REPORT_NAMESPACE,
    REPORT_OBSERVED,
    REPORT_OWNER,
    REPORT_UNHEALTHY,
    REPORT_UTIL,
)

RECORDED_STEP = 3600.0  # the records' hour: the report reads them at steps of whole hours
CHIP_LABELS = "job, instance, npu, chip, device"


@dataclass(frozen=True)
class ReportQueries:
    """The report's queries over one window; ``per_chip`` ones are sent per batch of nodes when
    ``recorded`` (``extra`` matchers added), so that no answer nears the client's size cap."""

    util: str  # per chip: mean AI Core utilization over each step
    in_use: tuple[tuple[str, str], ...]  # (source, query) per chip (instance, device): present where in use
    namespaces: str  # per chip and namespace: present where a pod of the namespace had the chip
    owners: str  # per chip, runtime and owner: present where the owner held the chip
    unhealthy: str  # per chip (instance, device): present where its health paged
    hbm_used: str  # per node: bytes used, mean over each step
    hbm_total: str  # per node: bytes installed
    observed: str | None  # per chip: seconds observed where less than the step; None: from sample timestamps
    recorded: bool


def raw_queries(matchers: str, step: float, states: tuple[str, ...]) -> ReportQueries:
    s = promql_duration(step)
    paging = selector(HEALTH.name, matchers, _paging(states))
    return ReportQueries(
        util=f"avg_over_time({selector(AICORE.name, matchers)}[{s}])",
        in_use=tuple(
            (what, f"group by (instance, device) (last_over_time({selector(metric, matchers)}[{s}]))")
            for metric, what in ((PROCESS_MEMORY.name, "processes"), (POD_INFO.name, "pods"), (JOB_INFO.name, "jobs"))
        ),
        namespaces=f"group by (instance, npu, chip, device, namespace) (last_over_time({selector(POD_INFO.name, matchers)}[{s}]))",
        owners=f"group by (instance, npu, chip, device, runtime, owner) (last_over_time({selector(OWNER_INFO.name, matchers)}[{s}]))",
        unhealthy=f"max by (instance, device) (max_over_time({paging}[{s}])) == 1",
        hbm_used=f"sum by (instance) (avg_over_time({selector(HBM_USED.name, matchers)}[{s}]))",
        hbm_total=f"sum by (instance) (avg_over_time({selector(HBM_TOTAL.name, matchers)}[{s}]))",
        observed=None,
        recorded=False,
    )


def recorded_queries(matchers: str, step: float, extra: str = "") -> ReportQueries:
    """The records over steps of ``step`` (whole hours): the record itself at one hour, else
    the mean (max, sum) of its hourly values within the step. ``extra``: a batch's matchers."""
    both = ", ".join(m for m in (matchers, extra) if m)

    def over(fn: str, name: str) -> str:
        what = selector(name, both)
        return what if step == RECORDED_STEP else f"{fn}_over_time({what}[{promql_duration(step)}:1h])"

    observed = over("sum", REPORT_OBSERVED)
    return ReportQueries(
        # a chip-hour without one observed interval has no point (its utilization is the hour's before)
        util=f"{over('avg', REPORT_UTIL)}\n  and on ({CHIP_LABELS}) {observed} > 0",
        in_use=(("in use", f"{over('max', REPORT_IN_USE)} == 1"),),
        namespaces=over("max", REPORT_NAMESPACE),  # already per chip and namespace: no grouping (a third of its cost)
        owners=over("max", REPORT_OWNER),  # likewise per chip, runtime and owner
        unhealthy=f"{over('max', REPORT_UNHEALTHY)} == 1",
        hbm_used=over("avg", REPORT_HBM_USED),
        hbm_total=over("avg", REPORT_HBM_TOTAL),
        observed=f"{observed} < {step:g}",
        recorded=True,
    )


def recorded_held(matchers: str, step: float) -> str:
    """How many chips have records in each step (where they begin, to the step)."""
    return f"count ({_recorded_at(matchers, step)})"


def recorded_nodes(matchers: str, span: float) -> str:
    """Per node, its chips with records in each ``span`` (a day or more: a cheap query whose
    answer sizes the per-chip queries' batches and finds the span where the records begin)."""
    return f"count by (instance) (last_over_time({selector(REPORT_UTIL, matchers)}[{promql_duration(span)}]))"


def _recorded_at(matchers: str, step: float) -> str:
    what = selector(REPORT_UTIL, matchers)
    return what if step == RECORDED_STEP else f"last_over_time({what}[{promql_duration(step)}:1h])"


def _paging(states: tuple[str, ...]) -> str:
    return f'state=~"{"|".join(states)}"'
