"""The chip-fault alerts: NPUUnhealthy (npu-smi Health) and NPUNeedsIsolation (the handling level of
the chip's fault codes, npu_fault_level). Their texts name the level and what to do about it in the
words of core/faultlevels.py, so the page says what the on-call would otherwise look up."""

from __future__ import annotations

from collections.abc import Iterable

from exporter.core import faultlevels
from exporter.generate.texts import CHIP_OWNER, CHIP_SHORT, CHIP_TEXT, ERROR_CODES
from exporter.thresholds.table import AlertSpec, Thresholds

ISOLATION_LEVELS = faultlevels.ISOLATION


def level_action(levels: Iterable[str], level: str = ".Labels.level") -> str:
    """A Go template: the action of the level in ``level`` (one of ``levels``)."""
    out = ""
    for n, name in enumerate(levels):
        out += f'{{{{ {"if" if n == 0 else "else if"} eq {level} "{name}" }}}}{faultlevels.action(name)}'
    return out + "{{ end }}" if out else ""


# The chip's most severe fault level and its action (nothing when the chip has no code, or when
# the exporter has not read them).
_ACTION_LEVELS = tuple(name for name in faultlevels.NAMES if name != faultlevels.NONE)
FAULT_LEVEL = (
    '{{ with printf `npu_fault_level{instance=%q, npu=%q, chip=%q, level!="none"} == 1` $labels.instance $labels.npu $labels.chip'
    f" | query }}}}{{{{ with first . }}}}: fault level {{{{ .Labels.level }}}}, {level_action(_ACTION_LEVELS)}{{{{ end }}}}{{{{ end }}}}"
)


def unhealthy(spec: AlertSpec, table: Thresholds) -> tuple[str, str, str]:
    states = "|".join(spec.param("states", ("Alarm", "Critical")))
    return (
        f'npu_health{{state=~"{states}"}} == 1',
        f"NPU {CHIP_SHORT} reports health {{{{ $labels.state }}}}{FAULT_LEVEL}",
        f"npu-smi reports the health of {CHIP_TEXT} as {{{{ $labels.state }}}} for {spec.window}.{ERROR_CODES}{CHIP_OWNER}",
    )


def needs_isolation(spec: AlertSpec, table: Thresholds) -> tuple[str, str, str]:
    levels = tuple(spec.param("levels", ISOLATION_LEVELS))
    action = level_action(levels, "$labels.level")
    return (
        f'npu_fault_level{{level=~"{"|".join(levels)}"}} == 1',
        f"NPU {CHIP_SHORT} must leave service ({{{{ $labels.level }}}}): {action}",
        (
            f"The fault codes npu-smi reports for {CHIP_TEXT} have the handling level {{{{ $labels.level }}}} in the "
            f"fault-code table: {action}.{ERROR_CODES}{CHIP_OWNER}"
        ),
    )
