"""The training-hook event store behind `POST /api/v1/steps`.

:class:`IngestStore` folds validated batches into one :class:`RankState` per (job_name, rank)
without awaiting between admission (admission.py: the limits, and who gives way) and the
update; entries expire after a TTL (on the monotonic clock) so their series disappear from
/metrics. :meth:`IngestStore.part` is the immutable copy a scrape renders.
"""

from __future__ import annotations

import bisect
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from exporter.core.snapshot import PartKey
from exporter.jobs.admission import Newcomer, client_key, plan
from exporter.jobs.goodput import KINDS, Ledger
from exporter.jobs.liveness import CLOSED_QUIET, Connection, ProcTable
from exporter.jobs.metrics import DURATION_GRID, WARMUP_STEPS, WINDOW_BOUNDS, window_start
from exporter.jobs.options import IngestOptions
from exporter.jobs.phases import MAX_WORDS_PER_RANK, is_stage, stage_of
from exporter.jobs.validate import Batch, IngestError, IngestLimits

_DEFAULTS = IngestOptions()
MFU_WINDOW = 60.0  # seconds of arrivals whose steps' FLOPs and time make a rank's MFU
_MFU_BATCHES = 256  # per rank: batches kept for the window (a client sends about one a second)


@dataclass(frozen=True)
class Process:
    """What the process holding a rank says of itself, as of its latest batch."""

    world_size: int
    device: str  # chip logic id, "" when unknown
    framework: str
    pid: str  # "" when unknown

    @classmethod
    def of(cls, batch: Batch) -> Process:
        return cls(batch.world_size, batch.device, batch.framework, batch.pid)


@dataclass
class RankState:
    """Everything known about one (job_name, rank); counters only grow while it lives."""

    job_name: str
    rank: int
    process: Process
    last_seen: float  # time.monotonic(): TTLs must not follow wall-clock jumps
    session: str = ""  # the holding process's random id (Batch.session)
    client: str = ""  # admission.client_key of the address that admitted it
    first_seen: float = 0.0  # monotonic, at admission
    last_step: float | None = None  # monotonic arrival of the latest batch with steps (idle or not)
    finished: bool = False
    iterations: int = 0
    samples: int | None = None  # None until a step reports samples
    duration_sum: float = 0.0
    window: int | None = None  # DURATION_GRID index of the first bucket bound, once fixed
    warmup: list[float] = field(default_factory=list)  # step durations until the window is fixed
    buckets: list[int] = field(default_factory=list)  # per window bound, then +Inf
    phase_seconds: dict[str, float] = field(default_factory=dict)
    last_iteration_end: float | None = None
    memory_allocated_bytes: int | None = None
    memory_max_allocated_bytes: int | None = None
    precision: str = "bf16"
    # (monotonic arrival, FLOPs, seconds) of each recent batch's steps that declared FLOPs
    flops_window: deque[tuple[float, float, float]] = field(default_factory=lambda: deque(maxlen=_MFU_BATCHES))
    profiling_seconds: float | None = None  # cumulative, as the process reports it
    proc: str = ""  # the holding process as /proc shows it (Batch.proc)
    connection: Connection | None = None  # the one its latest batch came on
    ledger: Ledger = field(default_factory=Ledger)  # goodput and badput: carried to the next process

    def fold(self, batch: Batch, now: float, seen: float) -> int:
        """``now`` is unix time (the default step end), ``seen`` the monotonic arrival time.
        Returns the steps whose index went below one this process sent before (ignored)."""
        self.process = Process.of(batch)
        self.proc = batch.proc or self.proc
        ledger = self.ledger
        ledger.heard = now
        # phases run between steps, by end time, laid out in order with the steps
        outside = sorted(((now if o.end is None else o.end, o.phases) for o in batch.outside), key=lambda o: o[0])
        taken = regressions = 0
        self.last_seen = seen
        if batch.steps or batch.outside:  # working: a checkpoint between steps too
            self.last_step = seen
        self.finished = batch.final
        if batch.memory_allocated_bytes is not None:
            self.memory_allocated_bytes = batch.memory_allocated_bytes
        if batch.memory_max_allocated_bytes is not None:
            self.memory_max_allocated_bytes = batch.memory_max_allocated_bytes
        self.precision = batch.precision
        flops = flops_seconds = 0.0
        if batch.profiling_seconds is not None:  # a retried older batch never takes it back
            self.profiling_seconds = max(self.profiling_seconds or 0.0, batch.profiling_seconds)
        for step in batch.steps:
            if step.flops is not None:
                flops += step.flops
                flops_seconds += step.duration
            self.iterations += 1
            self.duration_sum += step.duration
            if self.window is None:
                self.warmup.append(step.duration)
                if len(self.warmup) >= WARMUP_STEPS:
                    self._fix_window()
            else:
                self._observe(step.duration)
            if step.samples is not None:
                self.samples = (self.samples or 0) + step.samples
            for word, seconds in step.phases:
                name = word if word in self.phase_seconds else self._admit_phase(word)
                self.phase_seconds[name] = self.phase_seconds.get(name, 0.0) + seconds
            end = now if step.end is None else step.end
            if self.last_iteration_end is None or end > self.last_iteration_end:
                self.last_iteration_end = end
            while taken < len(outside) and outside[taken][0] <= end:
                ledger.phases(*outside[taken])
                taken += 1
            if not ledger.step(end, step.duration, step.phases, step.index):
                regressions += 1
        for late in outside[taken:]:
            ledger.phases(*late)
        if batch.final and self.warmup:
            self._fix_window()  # a short run gets its buckets too
        if flops_seconds > 0:
            self.flops_window.append((seen, flops, flops_seconds))
        return regressions

    def _fix_window(self) -> None:
        """Bucket bounds around the median of the warm-up steps, which are then counted in them."""
        ordered = sorted(self.warmup)
        self.window = window_start(ordered[len(ordered) // 2])
        self.buckets = [0] * (WINDOW_BOUNDS + 1)
        for duration in ordered:
            self._observe(duration)
        self.warmup = []

    def _observe(self, duration: float) -> None:
        assert self.window is not None
        start = self.window
        self.buckets[bisect.bisect_left(DURATION_GRID, duration, start, start + WINDOW_BOUNDS) - start] += 1

    def flops_in_window(self, now: float) -> tuple[float, float]:
        """(FLOPs, seconds) of the steps with FLOPs that arrived in the last MFU_WINDOW seconds."""
        window = self.flops_window
        while window and window[0][0] < now - MFU_WINDOW:
            window.popleft()
        return sum(w[1] for w in window), sum(w[2] for w in window)

    def held_by(self, batch: Batch) -> bool:
        """Whether ``batch`` comes from the process holding this rank (a client that sends
        neither pid nor session cannot be told apart, and is taken as the same)."""
        return (batch.pid, batch.session) == (self.process.pid, self.session) or not (batch.pid or batch.session)

    def _admit_phase(self, word: str) -> str:
        """A word new to this rank: its own series while the rank has fewer than
        MAX_WORDS_PER_RANK words besides the stage names, else its stage's."""
        if is_stage(word) or sum(not is_stage(w) for w in self.phase_seconds) < MAX_WORDS_PER_RANK:
            return word
        return stage_of(word)


@dataclass(frozen=True)
class RankView:
    """An immutable copy of a RankState for one scrape."""

    job_name: str
    rank: int
    process: Process
    iterations: int
    samples: int | None
    duration_sum: float
    window: int | None  # DURATION_GRID index of the first bound; None: +Inf only (warm-up)
    cumulative_buckets: tuple[int, ...]  # per window bound, then +Inf
    phase_seconds: tuple[tuple[str, float], ...]
    last_iteration_end: float | None
    memory_allocated_bytes: int | None
    memory_max_allocated_bytes: int | None
    profiling_seconds: float | None
    state: str = "running"  # one of metrics.JOB_STATES
    precision: str = "bf16"  # what the hook's FLOPs are computed in
    window_flops: float = 0.0  # model FLOPs of the steps that arrived in the last MFU_WINDOW seconds
    window_seconds: float = 0.0  # and their time
    goodput: float = 0.0  # seconds in steps that moved training forward, over the rank's processes
    badput: tuple[tuple[str, float], ...] = ()  # (kind, seconds), every goodput.KINDS
    disruptions: int = 0  # processes of the rank that died and were followed by another

    @classmethod
    def of(cls, s: RankState, state: str = "running", now: float | None = None) -> RankView:
        cumulative, total = [], 0
        for count in s.buckets or [len(s.warmup)]:
            total += count
            cumulative.append(total)
        ledger = s.ledger
        return cls(
            s.job_name,
            s.rank,
            s.process,
            s.iterations,
            s.samples,
            s.duration_sum,
            s.window,
            tuple(cumulative),
            tuple(sorted(s.phase_seconds.items())),
            s.last_iteration_end,
            s.memory_allocated_bytes,
            s.memory_max_allocated_bytes,
            s.profiling_seconds,
            state,
            s.precision,
            *(s.flops_in_window(now) if now is not None else (0.0, 0.0)),
            ledger.goodput,
            tuple((kind, ledger.badput[kind]) for kind in KINDS),
            ledger.disruptions,
        )


@dataclass(frozen=True)
class IngestCounters:
    requests: int = 0
    steps: int = 0
    client_dropped: int = 0
    unknown_phases: int = 0  # phase entries outside the vocabulary, served as other
    expired: int = 0
    rejected: tuple[tuple[str, int], ...] = ()
    evicted: tuple[tuple[str, int], ...] = ()
    held_ranks: int = 0
    profiles: int = 0  # POST /api/v1/profiles: summaries accepted
    profiles_rejected: tuple[tuple[str, int], ...] = ()
    profile_windows_skipped: int = 0
    profile_jobs_evicted: int = 0  # posted profile jobs removed to admit a new job
    index_regressions: int = 0  # steps whose index went below their process's earlier ones (index ignored)
    takeovers: tuple[tuple[str, int], ...] = ()  # a new process took a rank over, by how the old one was known gone


@dataclass(frozen=True)
class JobsPart:
    """What a scrape renders of the ingest: every live (job_name, rank) and the counters."""

    ranks: tuple[RankView, ...] = ()
    counters: IngestCounters = IngestCounters()
    peaks: tuple[tuple[str, str, float], ...] = ()  # (device, precision, FLOP/s) of this node's chips: MFU (mfu.py)


class IngestStore:
    """Per-(job_name, rank) state. Callers run on the event loop; the lock only guards
    against a scrape from another thread, it is never held across an await."""

    def __init__(
        self,
        ttl: float = _DEFAULTS.ttl,
        finished_ttl: float = _DEFAULTS.finished_ttl,
        stalled_after: float = _DEFAULTS.stalled_after,
        limits: IngestLimits = IngestLimits(),
        clock: Callable[[], float] = time.time,
        age_clock: Callable[[], float] | None = None,
        procs: ProcTable | None = None,
    ) -> None:
        self.ttl = ttl
        self.finished_ttl = min(finished_ttl, ttl)
        self.stalled_after = stalled_after
        # Called (under the lock, so it must not call back) with each (job_name, rank) that
        # expires or is evicted: what else the rank produced (posted profiles) ends with it.
        self.on_gone: Callable[[str, int], None] = lambda job_name, rank: None
        self.limits = limits
        self.clock = clock  # unix time: step `end` checks and defaults
        # TTLs run on the monotonic clock; a test that injects only ``clock`` drives both.
        self.age_clock = age_clock or (time.monotonic if clock is time.time else clock)
        self.procs = procs or ProcTable()  # this node's /proc: is a rank's holder alive (liveness.py)
        self._entries: dict[tuple[str, int], RankState] = {}
        self._lock = threading.Lock()
        self._requests = 0
        self._steps = 0
        self._client_dropped = 0
        self._unknown_phases = 0
        self._expired = 0
        self._rejected: dict[str, int] = {}
        self._evicted: dict[str, int] = {}
        self._profiles = 0
        self._profiles_rejected: dict[str, int] = {}
        self._profile_windows_skipped = 0
        self._profile_jobs_evicted = 0
        self._index_regressions = 0
        self._takeovers: dict[str, int] = {}
        self._changes = 0  # bumped by every change a scrape would see
        self._part: tuple[tuple[int, frozenset[tuple[str, int]]], JobsPart] | None = None

    def accept(self, batch: Batch, remote: str | None = None, connection: Connection | None = None) -> int:
        """Fold a validated batch from peer address ``remote``, which came on ``connection``, in;
        IngestError (429) when a new rank does not fit the limits and no idle rank can give way,
        (409) when another live process holds the rank."""
        with self._lock:
            now, seen = self.clock(), self.age_clock()
            self._expire(seen)
            key = (batch.job_name, batch.rank)
            entry = self._entries.get(key)
            ledger, died = None, False
            if entry is not None and not entry.held_by(batch):
                died = self._take_over(entry, batch, seen)  # the holder is gone, or 409
                ledger, entry = entry.ledger, None
            if entry is None:
                entry = self._admit(batch, client_key(remote), seen)
                if ledger is None:
                    entry.ledger = Ledger(batch.started)
                else:  # the rank's goodput and badput go on across its processes
                    entry.ledger = ledger
                    ledger.start_process(batch.started, died)
            if connection is not None:
                entry.connection = connection
            self._index_regressions += entry.fold(batch, now, seen)
            self._changes += 1
            self._requests += 1
            self._steps += len(batch.steps)
            self._client_dropped += batch.dropped
            self._unknown_phases += batch.unknown_phase_entries
            return len(batch.steps)

    def _take_over(self, entry: RankState, batch: Batch, now: float) -> bool:
        """Another process claims a held job_name and rank: once the holder finished, is known
        dead (liveness.py: its pid gone here, or its connection closed without a final report) or
        is stalled (silent for stalled_after) it is dropped and the claimant admitted anew; two
        live ones are never summed (409). Returns whether the holder died (no finish)."""
        age = now - entry.last_seen
        reason = self._gone(entry, age)
        if reason is not None:
            del self._entries[(entry.job_name, entry.rank)]
            self.on_gone(entry.job_name, entry.rank)  # the old process's profile summaries go with it
            self._takeovers[reason] = self._takeovers.get(reason, 0) + 1
            return reason != "finished"
        raise IngestError(
            409,
            "duplicate_rank",
            f"job {batch.job_name!r} rank {batch.rank} is held by another live process (pid {entry.process.pid or 'unknown'}, "
            f"last report {age:.0f} s ago): two processes are never summed; give each its own job_name or rank "
            f"(a restart takes over once the old process has closed, is gone from this node or its connection closed "
            f"without a final report, or after {self.stalled_after:g} s of silence)",
        )

    def _gone(self, entry: RankState, age: float) -> str | None:
        """How the holder is known to be gone (a metrics.TAKEOVER_REASONS), or None: it may live."""
        if entry.finished:
            return "finished"
        if age > self.stalled_after:
            return "stalled"
        alive = self.procs.alive(entry.process.pid, entry.proc)
        if alive is not None:
            return None if alive else "pid_gone"
        if entry.connection is not None and entry.connection.is_closing() and age >= CLOSED_QUIET:
            return "connection_closed"
        return None

    def _admit(self, batch: Batch, client: str, now: float) -> RankState:
        """A new rank, after the evictions that make room for it (IngestError: none, nothing changed)."""
        evictions = plan(self._entries.values(), Newcomer(batch.job_name, client, bool(batch.steps or batch.outside)), self.limits, now)
        for eviction in evictions:
            del self._entries[eviction.key]
            self._evicted[eviction.reason] = self._evicted.get(eviction.reason, 0) + 1
            self.on_gone(*eviction.key)
        entry = RankState(batch.job_name, batch.rank, Process.of(batch), now, session=batch.session, client=client, first_seen=now)
        self._entries[(batch.job_name, batch.rank)] = entry
        return entry

    def reject(self, reason: str) -> None:
        with self._lock:
            self._rejected[reason] = self._rejected.get(reason, 0) + 1
            self._changes += 1

    def count_profile(self, skipped: int, evicted_jobs: int = 0) -> None:
        """A profile summary accepted on POST /api/v1/profiles; ``skipped``: windows its client
        skipped; ``evicted_jobs``: posted jobs it took the place of."""
        with self._lock:
            self._profiles += 1
            self._profile_windows_skipped += skipped
            self._profile_jobs_evicted += evicted_jobs
            self._changes += 1

    def reject_profile(self, reason: str) -> None:
        with self._lock:
            self._profiles_rejected[reason] = self._profiles_rejected.get(reason, 0) + 1
            self._changes += 1

    def _expire(self, now: float) -> None:
        for key, entry in list(self._entries.items()):
            if now - entry.last_seen > (self.finished_ttl if entry.finished else self.ttl):
                del self._entries[key]
                self._expired += 1
                self._changes += 1
                self.on_gone(*key)

    def _stalled(self, now: float) -> frozenset[tuple[str, int]]:
        """Ranks not closed whose hook went silent (no batch, not even a heartbeat) for
        ``stalled_after``: the process died or hangs without a final message."""
        return frozenset(key for key, e in self._entries.items() if not e.finished and now - e.last_seen > self.stalled_after)

    def part(self) -> JobsPart:
        """Expire, then copy everything a scrape renders; the same object while nothing changed
        (so an idle store costs a scrape no copy and the exposition no encode)."""
        with self._lock:
            now = self.age_clock()
            self._expire(now)
            version = (self._changes, self._stalled(now))
            if self._part is not None and self._part[0] == version:
                return self._part[1]
            ranks = tuple(RankView.of(e, _state(e, key in version[1]), now) for key, e in sorted(self._entries.items()))
            counters = IngestCounters(
                self._requests,
                self._steps,
                self._client_dropped,
                self._unknown_phases,
                self._expired,
                tuple(sorted(self._rejected.items())),
                tuple(sorted(self._evicted.items())),
                len(self._entries),
                profiles=self._profiles,
                profiles_rejected=tuple(sorted(self._profiles_rejected.items())),
                profile_windows_skipped=self._profile_windows_skipped,
                profile_jobs_evicted=self._profile_jobs_evicted,
                index_regressions=self._index_regressions,
                takeovers=tuple(sorted(self._takeovers.items())),
            )
            self._part = (version, JobsPart(ranks, counters))
            return self._part[1]


def _state(entry: RankState, stalled: bool) -> str:
    """finished: the hook closed (final message); stalled: silent past ingest.stalled_after."""
    return "finished" if entry.finished else "stalled" if stalled else "running"


JOBS = PartKey("jobs", JobsPart)  # its snapshot key
