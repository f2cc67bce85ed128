"""Model FLOPs utilization: the jobs part joined with the peak FLOP/s of each rank's chip.

A rank's MFU is the model FLOPs of its steps that arrived in the last ``MFU_WINDOW`` seconds,
over their time, over the peak of the rank's chip (its ``device``) at the job's declared
precision. The peaks come from the npu-smi part (``npu_peak_flops_per_second``); a rank with
no device, or a chip with no peak at that precision, has no MFU.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from exporter.jobs.store import JobsPart, RankView

Peaks = tuple[tuple[str, str, float], ...]  # (device, precision, FLOP/s), sorted


def utilization(rank: RankView, peaks: dict[tuple[str, str], float]) -> float | None:
    """The rank's MFU (0..1 for a declared FLOP count the chip can reach), or None."""
    device = rank.process.device
    peak = peaks.get((device, rank.precision))
    if not peak or not device or rank.window_seconds <= 0:
        return None
    return rank.window_flops / rank.window_seconds / peak


class PeakJoin:
    """The live jobs part with the chips' peaks in it; the same object while neither changed,
    so an idle store still costs a scrape no encode."""

    def __init__(self, read: Callable[[], JobsPart], peaks: Callable[[], Peaks]) -> None:
        self._read, self._peaks = read, peaks
        self._last: tuple[JobsPart, Peaks, JobsPart] | None = None

    def read(self) -> JobsPart:
        part, peaks = self._read(), self._peaks()
        last = self._last
        if last is not None and last[0] is part and last[1] == peaks:
            return last[2]
        joined = replace(part, peaks=peaks) if peaks else part
        self._last = (part, peaks, joined)
        return joined
