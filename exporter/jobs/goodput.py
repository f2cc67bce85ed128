"""Where a rank's time goes: goodput (time in steps that moved training forward) and badput by
kind, to the hook's own clock, carried across the rank's process restarts (docs/training-hooks.md,
"Goodput and badput").

A :class:`Ledger` lays the rank's wall time out once, in order, from its first process's start:
each step and each phase run outside a step takes its own duration at its place, and the gaps
before them are start-up (from a process's start to its first step or phase), idle (between
them) or downtime (between a death and the next process's start). A step or phase that starts
before the previous one ended (device-timed steps can, by a little) is laid right after it, so
nothing counts twice and the gaps that follow absorb the difference. Goodput and the badput
kinds therefore add up to the wall time accounted so far: from the first process's start to the
end of the latest step or phase, less the time between a clean finish and the next process (a
new run, not a disruption).

Per rank it keeps a handful of numbers: the totals, the highest step index of the earlier
processes and of the current one, and two timestamps.
"""

from __future__ import annotations

from collections.abc import Iterable

from exporter.jobs.phases import CHECKPOINT_RESTORE_WORDS, CHECKPOINT_SAVE_WORDS, VOCABULARY

STARTUP, DATA_WAIT, CHECKPOINT_SAVE, CHECKPOINT_RESTORE = "startup", "data_wait", "checkpoint_save", "checkpoint_restore"
LOST_PROGRESS, DOWNTIME, IDLE, OTHER = "lost_progress", "downtime", "idle", "other"
# npu_job_badput_seconds_total{kind}, in the order a dashboard stacks them.
KINDS = (STARTUP, DATA_WAIT, CHECKPOINT_SAVE, CHECKPOINT_RESTORE, LOST_PROGRESS, DOWNTIME, IDLE, OTHER)

# A phase word -> the badput kind its time is, inside a step or outside one; a word not here
# is goodput inside a step (compute, communication, copies, ...) and `other` outside one.
_KIND_OF_WORD: dict[str, str] = {
    **{word: DATA_WAIT for word, stage in VOCABULARY.items() if stage == "data"},
    **dict.fromkeys(CHECKPOINT_SAVE_WORDS, CHECKPOINT_SAVE),
    **dict.fromkeys(CHECKPOINT_RESTORE_WORDS, CHECKPOINT_RESTORE),
}

Phases = Iterable[tuple[str, float]]


def kind_of(word: str) -> str | None:
    """The badput kind a phase word's time is (None: goodput inside a step, `other` outside)."""
    return _KIND_OF_WORD.get(word)


class Ledger:
    """One rank's goodput, badput and disruptions; counters only grow while the rank is held."""

    __slots__ = ("goodput", "badput", "disruptions", "prior_index", "index", "cursor", "gap", "heard")

    def __init__(self, started: float | None = None) -> None:
        self.goodput = 0.0
        self.badput = dict.fromkeys(KINDS, 0.0)
        self.disruptions = 0
        self.prior_index: int | None = None  # the highest step index the rank's earlier processes completed
        self.index: int | None = None  # the current process's highest step index
        self.cursor: float | None = started  # unix time the rank's wall time is accounted up to
        self.gap = STARTUP  # what the time before the next step or phase is
        self.heard: float | None = None  # unix time the current process's latest batch arrived

    def start_process(self, started: float | None, died: bool) -> None:
        """Another process takes the rank over. After a death (``died``) the time the old one was
        still heard of after its last step or phase is idle (a hang, a step that never ended), one
        disruption is counted and the time until the new one started is downtime; after a clean
        finish the time until the new one started is no time of the job."""
        if self.index is not None:
            self.prior_index = self.index if self.prior_index is None else max(self.prior_index, self.index)
        self.index = None
        cursor, heard = self.cursor, self.heard
        self.heard = None
        if died:
            self.disruptions += 1
        if not died or cursor is None:  # never before the old process's end: no time counts twice
            self.cursor = started if started is None or cursor is None else max(started, cursor)
            self.gap = STARTUP
            return
        if heard is not None and heard > cursor:
            self.badput[IDLE] += heard - cursor
            cursor = heard
        if started is None:  # the new process's start is not known: the gap before its first step is downtime
            self.gap = DOWNTIME
        else:
            if started > cursor:
                self.badput[DOWNTIME] += started - cursor
                cursor = started
            self.gap = STARTUP
        self.cursor = cursor

    def _lay(self, end: float, duration: float) -> None:
        """Account the gap before a step or phase of ``duration`` ending at ``end``, and the time it takes."""
        start = end - duration
        cursor = self.cursor
        if cursor is None:
            cursor = start
        elif start > cursor:
            self.badput[self.gap] += start - cursor
            cursor = start
        self.cursor = cursor + duration
        self.gap = IDLE

    def step(self, end: float, duration: float, phases: Phases, index: int | None) -> bool:
        """One step. Its data and checkpoint phases are badput; the rest is goodput, or lost
        progress when its ``index`` is at or below one an earlier process completed. False when
        ``index`` is below one this process sent before (ignored: counted by the caller)."""
        self._lay(end, duration)
        productive = duration
        badput = self.badput
        for word, seconds in phases:
            kind = _KIND_OF_WORD.get(word)
            if kind is not None:
                badput[kind] += seconds
                productive -= seconds
        kept = True
        if index is not None:
            high = self.index
            if high is None or index >= high:  # equal: one step in parts (gradient accumulation)
                self.index = index
            else:
                index, kept = None, False
        prior = self.prior_index
        if productive > 0:
            if index is not None and prior is not None and index <= prior:
                badput[LOST_PROGRESS] += productive
            else:
                self.goodput += productive
        return kept

    def phases(self, end: float, phases: Phases) -> None:
        """Phases run outside any step, ending at ``end``: each by its kind (`other` for a word
        that is neither data nor a checkpoint: evaluation, logging, ...)."""
        phases = tuple(phases)
        self._lay(end, sum(seconds for _, seconds in phases))
        badput = self.badput
        for word, seconds in phases:
            badput[_KIND_OF_WORD.get(word, OTHER)] += seconds

    def accounted(self) -> float:
        """Seconds accounted so far: goodput and every badput kind."""
        return self.goodput + sum(self.badput.values())
