"""How `diagnose` and `report` end when they cannot go on: one line on stderr naming the command
and what is wrong (a bad threshold table, an input unreachable, empty or unreadable), exit 2."""

from __future__ import annotations

from collections.abc import Callable
from typing import TextIO

from exporter.diagnostics.model import EXIT_CANNOT, CannotDiagnose
from exporter.thresholds.table import ThresholdError


def exit_status(prog: str, err: TextIO, work: Callable[[], int]) -> int:
    """``work()``'s exit status, or EXIT_CANNOT with the reason on ``err`` (no traceback)."""
    try:
        return work()
    except ThresholdError as exc:
        print(f"{prog}: bad threshold table: {exc}", file=err)
    except CannotDiagnose as exc:
        print(f"{prog}: {exc}", file=err)
    return EXIT_CANNOT
