"""A chip's health over time, as the fleet and node dashboards draw it: npu-smi's Health and the
fault level of its codes, each a stateset drawn as one number per chip (its state's index)
mapped back to the state's name."""

from __future__ import annotations

from grafana_foundation_sdk.builders import statushistory

from exporter.core import faultlevels
from exporter.generate.panels import CHIP_LEGEND, GREEN, ORANGE, PURPLE, RED, YELLOW, code_steps, history, q, value_names

# npu_health's states, least severe first, and their colours.
HEALTH = (("OK", GREEN), ("Warning", YELLOW), ("Alarm", ORANGE), ("Critical", RED), ("Unknown", PURPLE))
# Fault levels least severe first: the number a level is drawn as.
_ORDER = tuple(reversed(faultlevels.NAMES))
_COLORS = {faultlevels.NONE: GREEN, "NotHandleFault": GREEN, "SubHealthFault": YELLOW, faultlevels.UNKNOWN: PURPLE}


def state_code(metric: str, sel: str, states: tuple[str, ...], label: str = "state") -> str:
    """The current state of a stateset ``metric`` (its ``label``) as the state's index in ``states``."""
    return " or ".join(f'{code} * {metric}{{{sel}, {label}="{state}"}}' for code, state in enumerate(states))


def health_history(title: str, sel: str, *, h: int = 9, description: str = "") -> statushistory.Panel:
    """npu-smi's Health of each chip of ``sel``."""
    code = state_code("npu_health", sel, tuple(state for state, _ in HEALTH))
    colors = [color for _, color in HEALTH]
    return history(
        title,
        q(f"max by (instance, device) ({code})", CHIP_LEGEND),
        mappings=value_names(HEALTH),
        steps=code_steps(colors),
        h=h,
        description=description,
    )


def _color(level: str) -> str:
    return _COLORS.get(level, RED if level in faultlevels.ISOLATION else ORANGE)


def fault_level_history(sel: str, *, w: int = 24, h: int = 6) -> statushistory.Panel:
    """The most severe handling level of each chip's fault codes (0 none .. 9 SeparateNPU, the
    precedence of core/faultlevels.py)."""
    isolation = " and ".join(faultlevels.ISOLATION)
    return history(
        "Fault level",
        q(f"max by (instance, device) ({state_code('npu_fault_level', sel, _ORDER, 'level')})", CHIP_LEGEND),
        mappings=value_names((level, _color(level)) for level in _ORDER),
        w=w,
        h=h,
        steps=code_steps([GREEN]),
        description=(
            "The most severe handling level of each chip's fault codes (npu_fault_level, from npu-smi -t health codes and, on "
            f"Ascend 950, -t current-fault-event ids). {isolation} page NPUNeedsIsolation; docs/runbooks.md, Fault levels, "
            "says what each level asks. Chips not OK whose codes are unread show nothing."
        ),
    )
