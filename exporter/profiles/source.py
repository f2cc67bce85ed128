"""Watches profile directories, parses each finished export once, remembers it across restarts.

When an export is finished is layout.py's business. A parsed export is not parsed again unless
its listing changes (a re-export); the state file keeps the fingerprints and the summaries, so
a restart serves the same metrics without re-reading anything.

What one directory can cost is bounded: every file is opened through exporter.core.inputfile
(refusals are counted by reason on their export), a directory that cannot be listed costs
itself only, and at most ``max_exports`` exports of ``max_jobs`` job names are held: beyond
that the oldest are dropped and counted (``dropped``), their fingerprints kept so that they are
not parsed again.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections import Counter
from dataclasses import dataclass, replace
from pathlib import Path

from exporter.core import clock
from exporter.core.clock import Clock
from exporter.core.health import Failure, HealthRegistry
from exporter.core.inputfile import InputRefused
from exporter.core.sampler import Task
from exporter.profiles.formats.common import ProfileParseError
from exporter.profiles.indicators import ProfileSummary, summarize
from exporter.profiles.layout import (
    Listing,
    ProfileRef,
    find_profiles,
    is_finished,
    list_export,
)
from exporter.profiles.load import load_profile
from exporter.profiles.options import ProfilesOptions
from exporter.profiles.part import DROP_REASONS, ProfilesPart, latest_per_rank
from exporter.profiles.state import (
    Entry,
    read_state_file,
    render_state,
    write_state_file,
)

log = logging.getLogger("exporter.profiles")


@dataclass
class _Scan:
    refs: list[ProfileRef]
    listings: dict[str, Listing]
    failures: list[Failure]
    gone: list[str]                          # remembered exports deleted or no longer watched


class ProfileSource:
    """Scans ``options.dirs`` on the sampler's schedule; ``part()`` is the latest per rank.

    ``clock`` is wall time: an export's quiet time is measured against its files' mtimes.
    ``single_scan`` (the `once` command) takes a finished export on first sight and parses
    every one that is due: there is no second scan to compare with.
    """

    NAME = "profiles"

    def __init__(self, options: ProfilesOptions, health: HealthRegistry, clock: Clock = clock.wall,
                 single_scan: bool = False) -> None:
        self.options = options
        self.directories = tuple(Path(d) for d in options.dirs)
        self.state_file = Path(options.state_file) if options.state_file else None
        self.health = health
        self.clock = clock
        self.single_scan = single_scan
        self.dropped: Counter[str] = Counter()  # exports dropped by the caps, by reason (DROP_REASONS)
        self._entries: dict[str, Entry] = {}
        self._seen: dict[str, str] = {}         # path -> fingerprint of the previous scan
        self._loaded = False
        self._part = ProfilesPart()             # replaced whole: scrapes never see a half update

    def tasks(self) -> list[Task]:
        return [Task(self.NAME, self.options.interval, self.refresh)]

    def part(self) -> ProfilesPart:
        """The latest profile of each (job_name, rank), as /metrics serves it."""
        return self._part

    def latest_summaries(self) -> tuple[ProfileSummary, ...]:
        """The latest profile of each (job_name, rank), every indicator and where it came from."""
        return latest_per_rank(s for entry in self._entries.values() for s in entry.summaries)

    async def refresh(self) -> None:
        start = time.monotonic()
        failures: list[Failure] = []
        if not self._loaded and self.state_file is not None:
            self._entries, problems = await asyncio.to_thread(read_state_file, self.state_file)
            failures += problems
        self._loaded = True
        scan = await asyncio.to_thread(self._scan, list(self._entries))
        failures += scan.failures
        tried: list[str] = []
        changed = self._forget(scan)
        for ref in self._due(scan):
            tried.append(str(ref.path))
            entry, problems = await asyncio.to_thread(self._parse, ref, scan.listings[str(ref.path)].fingerprint)
            self._entries[str(ref.path)] = entry
            failures += problems
            changed = True
        changed = self._cap() or changed
        self._part = ProfilesPart.latest((s for entry in self._entries.values() for s in entry.summaries),
                                         tuple((r, self.dropped[r]) for r in DROP_REASONS))
        if changed and self.state_file is not None:
            failures += await asyncio.to_thread(write_state_file, self.state_file, render_state(self._entries))
        self.health[self.NAME].record(time.monotonic() - start, failures, tried + [str(d) for d in self.directories])

    # --- steps of a run (the blocking ones run in a thread) ------------------------------------

    def _scan(self, remembered: list[str]) -> _Scan:
        refs: list[ProfileRef] = []
        failures: list[Failure] = []
        for root in self.directories:
            found, problems = find_profiles(root, self.options.max_depth, self.options.allow_outside)
            refs += found
            failures += problems
        listings = {}
        for ref in refs:
            try:
                listing = list_export(ref)
            except InputRefused as exc:   # this export only: the others keep their metrics
                failures.append(Failure(str(ref.path), exc.reason, exc.message))
                continue
            if listing is not None:
                listings[str(ref.path)] = listing
        present = {str(r.path) for r in refs}
        # An unlistable directory (e.g. a network mount hiccup) must not drop what it holds.
        gone = [k for k in remembered if k not in present and (not os.path.exists(k) or not self._watched(k))]
        return _Scan(refs, listings, failures, gone)

    def _watched(self, path: str) -> bool:
        return any(Path(path).is_relative_to(root) for root in self.directories)

    def _due(self, scan: _Scan) -> list[ProfileRef]:
        """Finished exports not parsed in this version, newest first (a backlog beyond the
        caps costs the oldest); remembers this scan's fingerprints."""
        due, now = [], self.clock()
        for ref in scan.refs:
            key = str(ref.path)
            listing = scan.listings.get(key)
            if listing is None:
                continue
            previous, self._seen[key] = self._seen.get(key), listing.fingerprint
            if self.single_scan:
                previous = listing.fingerprint   # one look is all `once` has
            entry = self._entries.get(key)
            if entry is not None and entry.fingerprint == listing.fingerprint:
                continue
            if is_finished(ref, listing, previous, now, self.options.settle):
                due.append(ref)
        due.sort(key=lambda r: -scan.listings[str(r.path)].newest_mtime)
        return due if self.single_scan else due[: self.options.max_parses_per_run]

    def _parse(self, ref: ProfileRef, fingerprint: str) -> tuple[Entry, list[Failure]]:
        subject = str(ref.path)
        limits = self.options.limits
        if ref.root is not None:
            limits = replace(limits, root=str(ref.root), allow_outside=self.options.allow_outside)
        try:
            data = load_profile(ref.path, ref.producer, ref.job_name, limits)
            summaries = tuple(summarize(d, self.options.top_k)[0] for d in data)
        except ProfileParseError as exc:
            behind = sorted({(i.reason, i.message) for i in exc.issues})   # e.g. every file refused
            return Entry(fingerprint, error=exc.reason), [Failure(subject, r, m) for r, m in behind] + [
                Failure(subject, exc.reason, exc.message)]
        except Exception as exc:  # a parser bug must cost one profile, not the exporter
            log.exception("profile parser crashed", extra={"profile": subject})
            return Entry(fingerprint, error="internal"), [Failure(subject, "internal", repr(exc))]
        issues = {(i.reason, i.message) for d in data for i in d.issues}
        log.info("profile parsed", extra={"profile": subject, "ranks": len(summaries), "issues": len(issues)})
        return Entry(fingerprint, summaries), [Failure(subject, r, m) for r, m in sorted(issues)]

    def _cap(self) -> bool:
        """Hold at most max_exports exports of max_jobs job names: the most recently produced
        stay; the others keep their fingerprint (not parsed again) and lose their summaries."""
        held = sorted(((k, e) for k, e in self._entries.items() if e.summaries), reverse=True,
                      key=lambda item: (max(s.finished_at or 0.0 for s in item[1].summaries), item[0]))
        jobs: set[str] = set()
        kept = 0
        changed = False
        for key, entry in held:
            names = {s.job_name for s in entry.summaries}
            if kept >= self.options.max_exports:
                reason = "max_exports"
            elif len(jobs | names) > self.options.max_jobs:
                reason = "max_jobs"
            else:
                jobs |= names
                kept += 1
                continue
            self._entries[key] = Entry(entry.fingerprint, error=reason)
            self.dropped[reason] += 1
            changed = True
            log.warning("profile dropped", extra={"profile": key, "reason": reason, "limit": getattr(self.options, reason)})
        return changed

    def _forget(self, scan: _Scan) -> bool:
        """Exports deleted from disk leave the metrics too (and the state file stays small)."""
        for key in scan.gone:
            self._entries.pop(key, None)
        present = {str(r.path) for r in scan.refs}
        for key in [k for k in self._seen if k not in present]:
            del self._seen[key]
        return bool(scan.gone)
