"""Goodput: the PromQL of where a training job's time goes (npu_job_goodput_seconds_total and
npu_job_badput_seconds_total{kind}, docs/training-hooks.md "Goodput and badput"): the share of
a rank's or a job's time in productive steps, each badput kind's share, and MFU over the wall
time; the recording rules that hold them, and NPUJobGoodputLow's expression."""

from __future__ import annotations

from exporter.generate.common import JOB, indent, positive
from exporter.generate.job_alerts import RUNNING
from exporter.thresholds.table import AlertSpec, num

GOODPUT = "npu_job_goodput_seconds_total"
BADPUT = "npu_job_badput_seconds_total"
MFU = "npu_job_model_flops_utilization_ratio"
# Per job: the goodput share over 5m and 1h, each badput kind's share over 1h, MFU x goodput.
RATIO5M, RATIO1H = "job_name:npu_job_goodput:ratio5m", "job_name:npu_job_goodput:ratio1h"
BADPUT_RATIO1H = "job_name_kind:npu_job_badput:ratio1h"
BADPUT_RATE5M = "job_name_kind:npu_job_badput_seconds:rate5m"
MFU_WALL = "job_name:npu_job_model_flops_utilization_wall:ratio1h"


# A series with no sample in the BIRTH_LOOKBACK before a range was born inside the range: the
# exporter serves a rank's counters from its first batch, when `startup` already holds its first
# process's start-up (and goodput its first steps). increase() starts from a series' first sample
# and would miss that, so a series born inside the range counts its whole value (growth from 0).
# Looking for any sample in 10 minutes, not only the one an instant `offset` would find, keeps a
# failed scrape (its staleness marker) or a gap under 10 minutes from passing an old series off as
# a new one, which would count everything it ever grew by.
BIRTH_LOOKBACK = "10m"


def grown(metric: str, range_: str, sel: str = "") -> str:
    """What each series of ``metric`` grew by over ``range_``, counting a series born inside the
    range from 0: its current value if it had no sample in the BIRTH_LOOKBACK before the range,
    else its increase() (which handles counter resets). The growth of every goodput and badput
    series in the rules, NPUJobGoodputLow and the dashboard goes through here. A series that was
    born and went away inside the range still counts from its first sample only."""
    series = f"{metric}{{{sel}}}" if sel else metric
    born = f"{series} unless present_over_time({series}[{BIRTH_LOOKBACK}] offset {range_})"
    return f"(\n  {born}\n  or increase({series}[{range_}])\n)"


def total(by: str, range_: str, sel: str = "") -> str:
    """The ranks' wall time over ``range_`` in seconds (goodput and every badput kind), summed by ``by``."""
    return f"sum by ({by}) {grown(GOODPUT, range_, sel)}\n+ sum by ({by}) {grown(BADPUT, range_, sel)}"


def _whole(by: str, range_: str, sel: str) -> str:
    """The wall time as a denominator: none where nothing was accounted (no step in the range)."""
    return positive(f"(\n{indent(total(by, range_, sel))}\n)")


def goodput_ratio(by: str, range_: str, sel: str = "") -> str:
    """Goodput over the wall time, summed by ``by``."""
    return f"sum by ({by}) {grown(GOODPUT, range_, sel)}\n/ {_whole(by, range_, sel)}"


def badput_ratio(by: str, range_: str, sel: str = "") -> str:
    """Each badput kind's share of the wall time, summed by ``by`` and kind."""
    return f"sum by ({by}, kind) {grown(BADPUT, range_, sel)}\n/ on ({by}) group_left ()\n{_whole(by, range_, sel)}"


def goodput_records() -> list[tuple[str, str, str]]:
    """(record, expr, help) of the goodput recording rules."""
    return [
        (
            RATIO5M,
            goodput_ratio("job_name", "5m"),
            "share of a training job's wall time (all ranks) in steps that moved training forward, 5m",
        ),
        (
            RATIO1H,
            goodput_ratio("job_name", "1h"),
            "share of a training job's wall time (all ranks) in steps that moved training forward, 1h",
        ),
        (
            BADPUT_RATE5M,
            f"sum by (job_name, kind) {grown(BADPUT, '5m')}\n/ 300",
            "NPU-seconds per second a training job loses, by badput kind (5m)",
        ),
        (BADPUT_RATIO1H, badput_ratio("job_name", "1h"), "share of a training job's wall time in each kind of badput, 1h"),
        (
            MFU_WALL,
            f"avg by (job_name) (avg_over_time({MFU}[1h]))\n* on (job_name)\n{RATIO1H}",
            "model FLOPs utilization over the wall time: MFU of the steps x goodput, what a training job's chips delivered "
            "against their peak over all the time it held them (1h)",
        ),
    ]


def goodput_low(spec: AlertSpec) -> str:
    """A running rank whose goodput over the alert's range is below its bound, once the exporter
    has held the rank for ``warmup``. A rank's first hour counts its first start-up (served with
    its first batch): one longer than warmup + window (45 minutes) pages, as a restart's can."""
    goodput = grown(GOODPUT, spec.span)
    whole = f"{goodput}\n+ sum without (kind) {grown(BADPUT, spec.span)}"
    ratio = f"{goodput}\n/ " + positive(f"(\n{indent(whole)}\n)")
    warmup = spec.param("warmup", "15m")
    return f"(\n{indent(ratio)}\n) < {num(spec.bound)}\nand on ({JOB}) {GOODPUT} offset {warmup}\nand on ({JOB}) {RUNNING}"
