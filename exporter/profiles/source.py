"""Watches profile directories, parses each finished export once, remembers it across restarts.

When an export is finished is layout.py's business. A parsed export is not parsed again unless
its listing changes (a re-export); the state file keeps the fingerprints and the summaries, so
a restart serves the same metrics without re-reading anything.

What one directory can cost is bounded: every file is opened through exporter.core.inputfile
(refusals are counted by reason on their export), a directory that cannot be listed costs
itself only, a scan examines at most ``max_entries`` directory entries per watched directory
(layout.EntryBudget), and at most ``max_exports`` exports of ``max_jobs`` job names are held:
beyond that the oldest are dropped and counted (``dropped``), their fingerprints kept so that
they are not parsed again. What is remembered is bounded too: at most ``max_remembered``
exports (held, dropped or failed; the oldest not held are forgotten, and exports no newer than
the newest forgotten one are not parsed again) and as many candidates waiting to settle.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import time
from collections import Counter
from dataclasses import dataclass, replace
from pathlib import Path

from exporter.core import clock
from exporter.core.clock import Clock
from exporter.core.health import Failure, HealthRegistry
from exporter.core.heap import release_freed_memory
from exporter.core.inputfile import InputRefused
from exporter.core.sampler import Task
from exporter.profiles.formats.common import ProfileParseError
from exporter.profiles.indicators import ProfileSummary, summarize
from exporter.profiles.layout import (
    EntryBudget,
    Listing,
    ProfileRef,
    TooManyEntries,
    find_profiles,
    is_finished,
    list_export,
)
from exporter.profiles.load import load_profile
from exporter.profiles.options import ProfilesOptions
from exporter.profiles.part import DROP_REASONS, ProfilesPart, latest_per_rank
from exporter.profiles.state import (
    Entry,
    State,
    fresh_copy,
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
    gone: list[str]  # remembered exports deleted or no longer watched


class ProfileSource:
    """Scans ``options.dirs`` on the sampler's schedule; ``part()`` is the latest per rank.

    ``clock`` is wall time: an export's quiet time is measured against its files' mtimes.
    ``single_scan`` (the `once` command) takes a finished export on first sight and parses
    every one that is due: there is no second scan to compare with.
    """

    NAME = "profiles"

    def __init__(self, options: ProfilesOptions, health: HealthRegistry, clock: Clock = clock.wall, single_scan: bool = False) -> None:
        self.options = options
        self.directories = tuple(Path(d) for d in options.dirs)
        self.state_file = Path(options.state_file) if options.state_file else None
        self.health = health
        self.clock = clock
        self.single_scan = single_scan
        self.dropped: Counter[str] = Counter()  # exports dropped by the caps, by reason (DROP_REASONS)
        self._entries: dict[str, Entry] = {}  # at most options.max_remembered
        self._forgotten_before = 0.0  # newest listing mtime of the exports forgotten
        self._seen: dict[str, str] = {}  # candidate path -> fingerprint of the previous scan
        self._loaded = False
        self._part = ProfilesPart()  # replaced whole: scrapes never see a half update

    def tasks(self) -> list[Task]:
        # Its own schedule: a scan runs no npu-smi, so it never waits behind the detail rounds.
        return [Task(self.NAME, self.options.interval, self.refresh, own_schedule=True)]

    def part(self) -> ProfilesPart:
        """The latest profile of each (job_name, rank), as /metrics serves it."""
        return self._part

    def latest_summaries(self) -> tuple[ProfileSummary, ...]:
        """The latest profile of each (job_name, rank), every indicator and where it came from."""
        return latest_per_rank(s for entry in self._entries.values() for s in entry.summaries)

    def remembered(self) -> tuple[int, int]:
        """Exports remembered (held, dropped or failed) and candidates waiting to settle: each
        at most options.max_remembered, whatever was ever created."""
        return len(self._entries), len(self._seen)

    async def refresh(self) -> None:
        start = time.monotonic()
        failures: list[Failure] = []
        if not self._loaded and self.state_file is not None:
            state, problems = await asyncio.to_thread(read_state_file, self.state_file)
            self._entries, self._forgotten_before = state.entries, state.forgotten_before
            failures += problems
        self._loaded = True
        scan = await asyncio.to_thread(self._scan, list(self._entries))
        failures += scan.failures
        tried: list[str] = []
        changed = self._forget(scan)
        for ref in self._due(scan):
            changed = self._cap() or changed  # what is held now decides what could still be
            if self._unservable(ref, scan.listings[str(ref.path)]):
                changed = True
                continue
            tried.append(str(ref.path))
            entry, problems = await asyncio.to_thread(self._parse, ref, scan.listings[str(ref.path)])
            self._entries[str(ref.path)] = entry
            failures += problems
            changed = True
        if tried:  # what the parses held is free: give it back to the system, not only to malloc
            await asyncio.to_thread(release_freed_memory)
        changed = self._cap() or changed
        changed = self._forget_oldest() or changed
        self._part = ProfilesPart.latest(
            (s for entry in self._entries.values() for s in entry.summaries), tuple((r, self.dropped[r]) for r in DROP_REASONS)
        )
        if changed and self.state_file is not None:
            state = State(self._entries, self._forgotten_before)
            failures += await asyncio.to_thread(write_state_file, self.state_file, render_state(state))
        self.health[self.NAME].record(time.monotonic() - start, failures, tried + [str(d) for d in self.directories])

    # --- steps of a run (the blocking ones run in a thread) ------------------------------------

    def _scan(self, remembered: list[str]) -> _Scan:
        """Each export listed as the walk finds it, both from one budget per watched directory:
        a spent budget ends that directory's scan and counts once (too_many_entries)."""
        refs: list[ProfileRef] = []
        listings: dict[str, Listing] = {}
        failures: list[Failure] = []

        def listed(budget: EntryBudget, ref: ProfileRef, found_failures: list[Failure]) -> None:
            listing = _list(ref, budget, found_failures)
            if listing is not None:
                listings[str(ref.path)] = listing

        for root in self.directories:
            budget = EntryBudget(self.options.max_entries)
            found, missed = find_profiles(
                root, self.options.max_depth, self.options.allow_outside, budget, functools.partial(listed, budget)
            )
            refs += found
            failures += missed
        present = {str(r.path) for r in refs}
        # An unlistable directory (e.g. a network mount hiccup) must not drop what it holds.
        gone = [k for k in remembered if k not in present and (not os.path.exists(k) or not self._watched(k))]
        return _Scan(refs, listings, failures, gone)

    def _watched(self, path: str) -> bool:
        return any(Path(path).is_relative_to(root) for root in self.directories)

    def _due(self, scan: _Scan) -> list[ProfileRef]:
        """Finished exports not parsed at this listing, newest first (a backlog beyond the caps
        costs the oldest). Candidates are the exports not parsed at their listing and newer than
        any forgotten one; the newest max_remembered of them keep this scan's fingerprint for
        the next (the others wait for room)."""
        candidates: list[tuple[ProfileRef, Listing]] = []
        for ref in scan.refs:
            key = str(ref.path)
            listing = scan.listings.get(key)
            if listing is None:
                continue
            entry = self._entries.get(key)
            if entry is not None and entry.fingerprint == listing.fingerprint:
                continue
            if entry is None and listing.newest_mtime <= self._forgotten_before:
                continue  # as old as an export forgotten: it would be
            candidates.append((ref, listing))
        candidates.sort(key=lambda c: (-c[1].newest_mtime, str(c[0].path)))
        candidates = candidates[: self.options.max_remembered]
        previous, self._seen = self._seen, {str(ref.path): listing.fingerprint for ref, listing in candidates}
        now = self.clock()
        due = [
            ref
            for ref, listing in candidates
            if is_finished(
                ref,
                listing,
                listing.fingerprint if self.single_scan else previous.get(str(ref.path)),  # one look is all `once` has
                now,
                self.options.settle,
            )
        ]
        return due if self.single_scan else due[: self.options.max_parses_per_run]

    def _parse(self, ref: ProfileRef, listing: Listing) -> tuple[Entry, list[Failure]]:
        subject, fingerprint, produced = str(ref.path), listing.fingerprint, listing.newest_mtime
        limits = self.options.limits
        if ref.root is not None:
            limits = replace(limits, root=str(ref.root), allow_outside=self.options.allow_outside)
        try:
            data = load_profile(ref.path, ref.producer, ref.job_name, limits)
            made = tuple(summarize(d, self.options.top_k)[0] for d in data)
            issues = {(i.reason, i.message) for d in data for i in d.issues}
            del data
            summaries = tuple(fresh_copy(s) for s in made)  # allocated after the data is gone (fresh_copy)
        except ProfileParseError as exc:
            behind = sorted({(i.reason, i.message) for i in exc.issues})  # e.g. every file refused
            return Entry(fingerprint, error=exc.reason, newest_mtime=produced), [Failure(subject, r, m) for r, m in behind] + [
                Failure(subject, exc.reason, exc.message)
            ]
        except Exception as exc:  # a parser bug must cost one profile, not the exporter
            log.exception("profile parser crashed", extra={"profile": subject})
            return Entry(fingerprint, error="internal", newest_mtime=produced), [Failure(subject, "internal", repr(exc))]
        log.info("profile parsed", extra={"profile": subject, "ranks": len(summaries), "issues": len(issues)})
        return Entry(fingerprint, summaries, newest_mtime=produced), [Failure(subject, r, m) for r, m in sorted(issues)]

    def _unservable(self, ref: ProfileRef, listing: Listing) -> bool:
        """An export older (by its files' mtimes) than every one of the max_exports held would be
        dropped as soon as parsed: it is skipped before its files are opened, remembered at this
        listing, counted and logged as a max_exports drop (a re-export is looked at again)."""
        held = sorted((e.newest_mtime for e in self._entries.values() if e.summaries), reverse=True)
        if len(held) < self.options.max_exports or listing.newest_mtime >= held[self.options.max_exports - 1]:
            return False
        key = str(ref.path)
        self._entries[key] = Entry(listing.fingerprint, error="max_exports", newest_mtime=listing.newest_mtime)
        self.dropped["max_exports"] += 1
        log.info("profile skipped unparsed: older than every export held", extra={"profile": key, "limit": self.options.max_exports})
        return True

    def _cap(self) -> bool:
        """Hold at most max_exports exports of max_jobs job names: the most recently produced
        stay; the others keep their fingerprint (not parsed again) and lose their summaries."""
        held = sorted(
            ((k, e) for k, e in self._entries.items() if e.summaries),
            reverse=True,
            key=lambda item: (max(s.finished_at or 0.0 for s in item[1].summaries), item[0]),
        )
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
            self._entries[key] = replace(entry, summaries=(), error=reason)
            self.dropped[reason] += 1
            changed = True
            log.warning("profile dropped", extra={"profile": key, "reason": reason, "limit": getattr(self.options, reason)})
        return changed

    def _forget(self, scan: _Scan) -> bool:
        """Exports deleted from disk leave the metrics too (and the state file stays small)."""
        for key in scan.gone:
            self._entries.pop(key, None)
        return bool(scan.gone)

    def _forget_oldest(self) -> bool:
        """Remember at most max_remembered exports: the oldest not held go (held ones number at
        most max_exports), and no export as old as the newest of them is parsed again, so
        the forgotten cost nothing however many stay on disk."""
        excess = len(self._entries) - self.options.max_remembered
        if excess <= 0:
            return False
        idle = sorted((entry.newest_mtime, key) for key, entry in self._entries.items() if not entry.summaries)
        for produced, key in idle[:excess]:
            del self._entries[key]
            self._forgotten_before = max(self._forgotten_before, produced)
        log.debug("profiles forgotten", extra={"count": min(excess, len(idle)), "before": self._forgotten_before})
        return True


def _list(ref: ProfileRef, budget: EntryBudget, failures: list[Failure]) -> Listing | None:
    """The export's listing, or None with its failure (this export only: the others keep their
    metrics); a spent budget is counted once on its watched directory instead."""
    try:
        return list_export(ref, budget)
    except (InputRefused, TooManyEntries) as exc:
        if budget.stopped_in is None:
            failures.append(Failure(str(ref.path), exc.reason, exc.message))
        return None
