"""The handling levels of Ascend chip fault codes: their precedence and what each asks of an
operator, in one place for the exporter (npu_fault_level), the alerts, the runbooks and `diagnose`.

The level names are those of Huawei's Ascend device plugin (MindCluster), whose fault-code table
the exporter ships (exporter/npusmi/faultcodes.json); the actions are our own words for what its
fault-handling documentation describes. Two states are ours: ``unknown`` (a code the table does not
list) and ``none`` (the chip reports no fault code).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

UNKNOWN = "unknown"  # a code missing from the table
NONE = "none"  # no fault code


@dataclass(frozen=True)
class FaultLevel:
    name: str
    action: str  # what to do, in plain words (alert summaries, diagnose)
    meaning: str  # one sentence for the runbook


# Most severe first. The plugin's ManuallySeparateNPU is left out: it never comes from the table (the
# plugin raises it when one code recurs too often within a day), so no reading of npu-smi shows it. A chip with several codes takes the most severe level; a code listed under two
# levels takes the more severe one. `unknown` ranks below every level that asks for a restart or
# isolation (a known action is never hidden behind a code we cannot place) and above the levels
# that ask for nothing, because an unlisted code may be anything.
LEVELS: tuple[FaultLevel, ...] = (
    FaultLevel(
        "SeparateNPU",
        "take the chip out of service now and have the hardware repaired or replaced",
        "The chip cannot be trusted with work: move its job off at once and keep new work away.",
    ),
    FaultLevel(
        "PreSeparateNPU",
        "take the chip out of service when its current job ends",
        "The chip is failing: let the running job finish (or checkpoint it), then schedule nothing new on it.",
    ),
    FaultLevel(
        "RestartNPU",
        "reset the chip after moving its job off",
        "The chip needs a hot reset (npu-smi set -t reset) before it can work again; its job has to stop.",
    ),
    FaultLevel(
        "FreeRestartNPU",
        "reset the chip once it is idle",
        "The chip needs a reset, but not urgently: do it when no job holds the chip.",
    ),
    FaultLevel(
        "RestartBusiness",
        "restart the job on the chip",
        "The job's state on the chip is lost: restart the job (from its last checkpoint); the chip needs no reset.",
    ),
    FaultLevel(
        "RestartRequest",
        "retry the failed request or step",
        "One request or training step failed: retrying it is enough; the job and the chip can stay.",
    ),
    FaultLevel(
        UNKNOWN,
        "look the code up in the Ascend documentation (not in the fault-code table)",
        "The code is not in the fault-code table in use. Huawei's device plugin isolates a chip for such a code "
        "unless the fault event says its severity is minor; npu-smi's health output shows no severity.",
    ),
    FaultLevel(
        "SubHealthFault",
        "keep new work away from the chip when others are free",
        "The chip works but is degraded: prefer other chips for new jobs; no restart is needed.",
    ),
    FaultLevel(
        "NotHandleFault",
        "nothing to do: the fault needs no action",
        "The fault is recorded for the record only: nothing to do.",
    ),
    FaultLevel(NONE, "nothing to do", "The chip reports no fault code."),
)
NAMES: tuple[str, ...] = tuple(level.name for level in LEVELS)  # the states of npu_fault_level, most severe first
TABLE_LEVELS: tuple[str, ...] = tuple(n for n in NAMES if n not in (UNKNOWN, NONE))  # the names a fault-code table may use
BY_NAME = {level.name: level for level in LEVELS}
ISOLATION = ("SeparateNPU", "PreSeparateNPU")  # levels that take the chip out of service
_RANK = {name: rank for rank, name in enumerate(NAMES)}


def most_severe(levels: Iterable[str]) -> str:
    """The most severe of ``levels`` (names of NAMES); ``none`` when there are none."""
    return min(levels, key=lambda name: _RANK.get(name, _RANK[UNKNOWN]), default=NONE)


def action(level: str) -> str:
    found = BY_NAME.get(level)
    return found.action if found else BY_NAME[UNKNOWN].action
