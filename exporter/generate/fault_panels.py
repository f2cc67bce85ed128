"""The chip's fault level as a status history: the npu_fault_level stateset as one number per chip
(0 none .. 9 SeparateNPU, the precedence of core/faultlevels.py), mapped back to the level name."""

from __future__ import annotations

from grafana_foundation_sdk.builders import statushistory
from grafana_foundation_sdk.models import dashboard as dm

from exporter.core import faultlevels
from exporter.generate.panels import CHIP_LEGEND, GREEN, ORANGE, RED, history, q

# Least severe first: the number a level is drawn as.
_ORDER = tuple(reversed(faultlevels.NAMES))
_COLORS = {faultlevels.NONE: GREEN, "NotHandleFault": GREEN, "SubHealthFault": "yellow", faultlevels.UNKNOWN: "purple"}


def _color(level: str) -> str:
    return _COLORS.get(level, RED if level in faultlevels.ISOLATION else ORANGE)


MAPPINGS = [
    dm.ValueMap(
        options={str(code): dm.ValueMappingResult(text=level, color=_color(level), index=code) for code, level in enumerate(_ORDER)}
    )
]


def fault_level_code(sel: str) -> str:
    return " or ".join(f'{code} * npu_fault_level{{{sel}, level="{level}"}}' for code, level in enumerate(_ORDER))


def fault_level_history(sel: str, *, w: int = 24, h: int = 6) -> statushistory.Panel:
    isolation = " and ".join(faultlevels.ISOLATION)
    return history(
        "Fault level",
        q(f"max by (instance, device) ({fault_level_code(sel)})", CHIP_LEGEND),
        mappings=MAPPINGS,
        w=w,
        h=h,
        steps=[dm.Threshold(value=None, color=GREEN)],
        description=(
            "The most severe handling level of each chip's fault codes (npu_fault_level, from npu-smi -t health codes and, on "
            f"Ascend 950, -t current-fault-event ids). {isolation} page NPUNeedsIsolation; docs/runbooks.md, Fault levels, "
            "says what each level asks. Chips not OK whose codes are unread show nothing."
        ),
    )
