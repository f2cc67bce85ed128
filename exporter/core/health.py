"""Per-source health: success, duration, errors by reason, the subjects (a command on one card)
failing now, logged once per state change."""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

log = logging.getLogger("exporter.sources")

# Failing subjects remembered to log state changes. Subjects can be paths someone else creates
# (profile exports): beyond this many, those not failing in the latest run are forgotten.
MAX_REMEMBERED_SUBJECTS = 1024
# Subjects logged one by one per run, each way; the rest in one line with their count (a
# directory of 50,000 symlinks out of a watched directory is one run, not 50,000 lines).
MAX_LOGGED_PER_RUN = 10


@dataclass(frozen=True)
class SourceStatus:
    """Health of one source (one scheduled task) as of its latest run."""

    name: str
    runs: int = 0
    success: bool = False
    duration_seconds: float | None = None
    last_success_timestamp: float | None = None
    errors: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))
    subjects: int = 0  # what the latest run tried (e.g. one `-t usages -i N` per card)
    failing: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))  # subject -> reason, latest run

    @property
    def partial(self) -> bool:
        """Some subjects of the latest run failed and others succeeded: the rest is fresh."""
        return 0 < len(self.failing) < self.subjects


@dataclass(frozen=True)
class Failure:
    """One thing that went wrong in a run: ``subject`` is what failed (e.g. `usages -i 3`)."""

    subject: str
    reason: str
    message: str


class SourceHealth:
    """Counts runs and failures of one source; logs a subject only when its state changes."""

    def __init__(self, name: str, clock: Callable[[], float] = time.time) -> None:
        self.name = name
        self._clock = clock
        self._runs = 0
        self._success = False
        self._duration: float | None = None
        self._last_success: float | None = None
        self._errors: Counter[str] = Counter()
        self._state: dict[str, str] = {}  # failing subject -> reason (MAX_REMEMBERED_SUBJECTS)
        self._subjects = 0
        self._failing: dict[str, str] = {}

    def record(self, duration: float, failures: Iterable[Failure] = (), subjects: Iterable[str] = ()) -> None:
        """Record one run. ``subjects`` are the things that were tried (to log recoveries)."""
        failures = list(failures)
        self._runs += 1
        self._duration = duration
        self._success = not failures
        if self._success:
            self._last_success = self._clock()
        failed = {f.subject: f for f in failures}
        self._subjects = len(set(subjects) | set(failed))
        self._failing = {subject: f.reason for subject, f in sorted(failed.items())}
        logged, unlogged = 0, Counter[str]()
        for failure in failures:
            self._errors[failure.reason] += 1
            if self._state.get(failure.subject) != failure.reason:
                if logged >= MAX_LOGGED_PER_RUN:
                    unlogged[failure.reason] += 1
                else:
                    logged += 1
                    log.warning(
                        "source failing",
                        extra={"source": self.name, "subject": failure.subject, "reason": failure.reason, "error": failure.message},
                    )
            self._state[failure.subject] = failure.reason
        recovered = 0
        for subject in subjects:
            if subject not in failed and self._state.get(subject):
                recovered += 1
                if recovered <= MAX_LOGGED_PER_RUN:
                    log.info("source recovered", extra={"source": self.name, "subject": subject})
                del self._state[subject]
        if unlogged:
            log.warning(
                "source failing: more subjects",
                extra={"source": self.name, "subjects": sum(unlogged.values()), "reasons": ",".join(sorted(unlogged))},
            )
        if recovered > MAX_LOGGED_PER_RUN:
            log.info("source recovered: more subjects", extra={"source": self.name, "subjects": recovered - MAX_LOGGED_PER_RUN})
        if len(self._state) > MAX_REMEMBERED_SUBJECTS:
            self._state = {subject: reason for subject, reason in self._state.items() if subject in failed}

    def status(self) -> SourceStatus:
        return SourceStatus(
            name=self.name,
            runs=self._runs,
            success=self._success,
            duration_seconds=self._duration,
            last_success_timestamp=self._last_success,
            errors=MappingProxyType(dict(self._errors)),
            subjects=self._subjects,
            failing=MappingProxyType(dict(self._failing)),
        )


class HealthRegistry:
    """The SourceHealth of every source, created on first use."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self._sources: dict[str, SourceHealth] = {}

    def __getitem__(self, name: str) -> SourceHealth:
        if name not in self._sources:
            self._sources[name] = SourceHealth(name, self._clock)
        return self._sources[name]

    def statuses(self) -> tuple[SourceStatus, ...]:
        return tuple(source.status() for source in self._sources.values())
