"""Watches profile directories, parses each finished export once, remembers it across restarts.

An export counts as finished (FORMATS.md §1.5) when its file listing (names, sizes, mtimes)
is the same on two consecutive scans and either torch_npu's `analyse.done` marker exists,
or the data files are there, non-empty and untouched for ``settle_seconds`` (and, for
torch_npu/MindSpore, `profiler_info*.json` says collection ended). A parsed export is not
parsed again unless its listing changes (a re-export); the state file keeps the fingerprints
and the summaries, so a restart serves the same metrics without re-reading anything.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import os
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from exporter.parsers.profiles import (
    Limits,
    ProfileParseError,
    ProfileSummary,
    load_profile,
    output_dir,
    producer_of,
    summarize,
    summary_from_dict,
    summary_to_dict,
)
from exporter.sources.health import Failure, HealthRegistry

log = logging.getLogger("exporter.sources.profiles")

STATE_VERSION = 1
MARKER = "analyse.done"  # torch_npu >= 2026-01 writes it last
_DATA_FILES = {
    "torch_npu": ("step_trace_time.csv", "kernel_details.csv", "op_statistic.csv"),
    "mindspore": ("step_trace_time.csv", "kernel_details.csv", "op_statistic.csv"),
    "msprof": ("op_summary_", "op_statistic_", "msprof_"),
    "cluster": ("cluster_step_trace_time.csv",),
}


@dataclass(frozen=True)
class ProfileSourceSettings:
    directories: tuple[Path, ...]
    state_file: Path | None = None           # None: remember in memory only
    interval: float = 30.0
    settle_seconds: float = 30.0             # quiet time required without a finished marker
    max_depth: int = 4                       # directory levels searched below each root
    max_parses_per_run: int = 4              # a backlog is worked off over several runs
    top_k: int = 5
    limits: Limits = field(default_factory=Limits)


@dataclass(frozen=True)
class ProfileRef:
    """One export found on disk; ``job_name`` is the directory-derived default."""

    path: Path
    producer: str
    job_name: str


# --- discovery (blocking; runs in a worker thread) --------------------------------------------


def find_profiles(root: Path, max_depth: int = 4) -> tuple[list[ProfileRef], list[Failure]]:
    """Exports under ``root`` (or ``root`` itself), without descending into an export.

    Job name: the directory directly below ``root`` that holds the export; exports placed
    in ``root`` itself take ``root``'s name. A cluster_analysis_output is only used when no
    per-rank export sits beside it (the rank exports say more).
    """
    refs: list[ProfileRef] = []
    failures: list[Failure] = []
    if not root.exists():
        return refs, [Failure(str(root), "missing_dir", f"{root}: profile directory does not exist")]
    own = producer_of(root)
    if own is not None:
        return [ProfileRef(root, own, root.parent.name or root.name)], []
    _walk(root, root, 0, max_depth, refs, failures)
    return refs, failures


def _walk(root: Path, directory: Path, depth: int, max_depth: int, refs: list[ProfileRef], failures: list[Failure]) -> None:
    try:
        with os.scandir(directory) as entries:
            children = sorted(Path(e.path) for e in entries if not e.name.startswith(".") and _is_dir(e))
    except OSError as exc:
        failures.append(Failure(str(directory), "unreadable", f"{directory}: cannot list: {exc.strerror or exc}"))
        return
    kinds = {child: producer_of(child) for child in children}
    has_ranks = any(k not in (None, "cluster") for k in kinds.values())
    for child in children:
        kind = kinds[child]
        if kind is None:
            if depth + 1 < max_depth:
                _walk(root, child, depth + 1, max_depth, refs, failures)
        elif kind != "cluster" or not has_ranks:
            refs.append(ProfileRef(child, kind, _job_name(root, child)))


def _is_dir(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_dir()
    except OSError:
        return False


def _job_name(root: Path, profile: Path) -> str:
    relative = profile.relative_to(root).parts
    return relative[0] if len(relative) > 1 else (root.name or str(root))


# --- "finished?" --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Listing:
    """What the finished-check looks at: one stat per file of the output dir."""

    fingerprint: str
    newest_mtime: float
    has_marker: bool
    has_data: bool
    has_info: bool                           # profiler_info*.json: collection ended


def list_export(ref: ProfileRef) -> Listing | None:
    """None while the output directory does not exist yet."""
    out = output_dir(ref.path, ref.producer)
    try:
        files = _stat_files(out)
        root_files = _stat_files(ref.path) if out != ref.path else files
    except OSError:
        return None
    info = {n: s for n, s in root_files.items() if n.startswith("profiler_info") or n == "profiler_metadata.json"}
    both = sorted(files.items()) + sorted(("../" + n, s) for n, s in info.items())
    digest = hashlib.sha1(repr(both).encode()).hexdigest()
    has_data = any(size > 0 and _is_data_file(name, ref.producer) for name, (size, _) in files.items())
    return Listing(
        fingerprint=digest,
        newest_mtime=max((m for _, m in files.values()), default=0.0) / 1e9,
        has_marker=MARKER in files,
        has_data=has_data,
        has_info=any(n.startswith("profiler_info") for n in info),
    )


def _is_data_file(name: str, producer: str) -> bool:
    """Exact names, or prefixes (ending in `_`) for msprof's timestamped/sliced files."""
    return any(name == p or (p.endswith("_") and name.startswith(p)) for p in _DATA_FILES[producer])


def _stat_files(directory: Path) -> dict[str, tuple[int, int]]:
    out = {}
    with os.scandir(directory) as entries:
        for entry in entries:
            try:
                if entry.is_file():
                    st = entry.stat()
                    out[entry.name] = (st.st_size, st.st_mtime_ns)
            except OSError:
                continue  # vanished between listing and stat: the next scan sees it
    return out


def is_finished(ref: ProfileRef, listing: Listing, previous: str | None, now: float, settle: float) -> bool:
    """Finished and unchanged since the previous scan (see the module docstring)."""
    if previous != listing.fingerprint:
        return False
    if listing.has_marker:
        return True
    if not listing.has_data or now - listing.newest_mtime < settle:
        return False
    return listing.has_info or ref.producer in ("msprof", "cluster")


# --- the source ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Entry:
    fingerprint: str
    summaries: tuple[ProfileSummary, ...] = ()
    error: str | None = None


@dataclass
class _Scan:
    refs: list[ProfileRef]
    listings: dict[str, Listing]
    failures: list[Failure]
    gone: list[str]                          # remembered exports deleted or no longer watched


class ProfileSource:
    """Schedule ``refresh`` in the sampler; collectors read ``summaries``."""

    NAME = "profiles"

    def __init__(self, settings: ProfileSourceSettings, health: HealthRegistry, clock: Callable[[], float] = time.time) -> None:
        self.settings = settings
        self.health = health
        self.clock = clock
        self._entries: dict[str, _Entry] = {}
        self._seen: dict[str, str] = {}         # path -> fingerprint of the previous scan
        self._loaded = False
        self._latest: tuple[ProfileSummary, ...] = ()   # replaced whole: scrapes never see a half update

    def task(self) -> tuple[str, float, Callable[[], Awaitable[None]]]:
        """(name, interval, coroutine function) for the sampler's Task."""
        return (self.NAME, self.settings.interval, self.refresh)

    def summaries(self) -> tuple[ProfileSummary, ...]:
        """The latest profile of each (job_name, rank)."""
        return self._latest

    async def refresh(self) -> None:
        start = time.monotonic()
        failures: list[Failure] = []
        if not self._loaded and self.settings.state_file is not None:
            self._entries, problems = await asyncio.to_thread(read_state_file, Path(self.settings.state_file))
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
        self._latest = latest_per_rank(s for entry in self._entries.values() for s in entry.summaries)
        if changed and self.settings.state_file is not None:
            failures += await asyncio.to_thread(write_state_file, Path(self.settings.state_file), render_state(self._entries))
        self.health[self.NAME].record(time.monotonic() - start, failures, tried + [str(d) for d in self.settings.directories])

    # --- steps of a run (the blocking ones run in a thread) ------------------------------------

    def _scan(self, remembered: list[str]) -> _Scan:
        refs: list[ProfileRef] = []
        failures: list[Failure] = []
        for root in self.settings.directories:
            found, problems = find_profiles(Path(root), self.settings.max_depth)
            refs += found
            failures += problems
        listings = {}
        for ref in refs:
            listing = list_export(ref)
            if listing is not None:
                listings[str(ref.path)] = listing
        present = {str(r.path) for r in refs}
        # An unlistable directory (e.g. a network mount hiccup) must not drop what it holds.
        gone = [k for k in remembered if k not in present and (not os.path.exists(k) or not self._watched(k))]
        return _Scan(refs, listings, failures, gone)

    def _watched(self, path: str) -> bool:
        return any(Path(path).is_relative_to(Path(root)) for root in self.settings.directories)

    def _due(self, scan: _Scan) -> list[ProfileRef]:
        """Finished exports not parsed in this version; remembers this scan's fingerprints."""
        due, now = [], self.clock()
        for ref in scan.refs:
            key = str(ref.path)
            listing = scan.listings.get(key)
            if listing is None:
                continue
            previous, self._seen[key] = self._seen.get(key), listing.fingerprint
            entry = self._entries.get(key)
            if entry is not None and entry.fingerprint == listing.fingerprint:
                continue
            if is_finished(ref, listing, previous, now, self.settings.settle_seconds):
                due.append(ref)
        return due[: self.settings.max_parses_per_run]

    def _parse(self, ref: ProfileRef, fingerprint: str) -> tuple[_Entry, list[Failure]]:
        subject = str(ref.path)
        try:
            data = load_profile(ref.path, ref.producer, ref.job_name, self.settings.limits)
            summaries = tuple(summarize(d, self.settings.top_k)[0] for d in data)
        except ProfileParseError as exc:
            return _Entry(fingerprint, error=exc.reason), [Failure(subject, exc.reason, exc.message)]
        except Exception as exc:  # a parser bug must cost one profile, not the exporter
            log.exception("profile parser crashed", extra={"profile": subject})
            return _Entry(fingerprint, error="internal"), [Failure(subject, "internal", repr(exc))]
        issues = {(i.reason, i.message) for d in data for i in d.issues}
        log.info("profile parsed", extra={"profile": subject, "ranks": len(summaries), "issues": len(issues)})
        return _Entry(fingerprint, summaries), [Failure(subject, r, m) for r, m in sorted(issues)]

    def _forget(self, scan: _Scan) -> bool:
        """Exports deleted from disk leave the metrics too (and the state file stays small)."""
        for key in scan.gone:
            self._entries.pop(key, None)
        present = {str(r.path) for r in scan.refs}
        for key in [k for k in self._seen if k not in present]:
            del self._seen[key]
        return bool(scan.gone)

def latest_per_rank(summaries: Iterable[ProfileSummary]) -> tuple[ProfileSummary, ...]:
    """One summary per (job_name, rank): the most recently produced export wins."""
    best: dict[tuple[str, int | None], ProfileSummary] = {}
    for summary in summaries:
        key = (summary.job_name, summary.rank)
        old = best.get(key)
        if old is None or (summary.finished_at or 0.0, summary.path) > (old.finished_at or 0.0, old.path):
            best[key] = summary
    return tuple(best[k] for k in sorted(best, key=lambda k: (k[0], k[1] is None, k[1] or 0)))


def read_state_file(path: Path) -> tuple[dict[str, _Entry], list[Failure]]:
    """What a previous run parsed; an unreadable state file is reported and then replaced."""
    if not path.exists():
        return {}, []
    try:
        return parse_state(path.read_text(encoding="utf-8")), []
    except (OSError, ValueError, ProfileParseError) as exc:
        return {}, [Failure(str(path), "state_file", f"{path}: ignoring unreadable state file: {exc}")]


def write_state_file(path: Path, text: str) -> list[Failure]:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)  # atomic: a crash never leaves half a state file
    except OSError as exc:
        return [Failure(str(path), "state_file", f"{path}: cannot write state: {exc.strerror or exc}")]
    return []


def render_state(entries: dict[str, _Entry]) -> str:
    profiles = {
        path: {"fingerprint": e.fingerprint, "error": e.error, "summaries": [summary_to_dict(s) for s in e.summaries]}
        for path, e in sorted(entries.items())
    }
    return json.dumps({"version": STATE_VERSION, "profiles": profiles}, indent=1, sort_keys=True) + "\n"


def parse_state(text: str) -> dict[str, _Entry]:
    """Raises ValueError (or ProfileParseError) on anything but a state file we wrote."""
    data: Any = json.loads(text)
    if not isinstance(data, dict) or data.get("version") != STATE_VERSION or not isinstance(data.get("profiles"), dict):
        raise ValueError(f"not a version {STATE_VERSION} profile state file")
    entries = {}
    for path, item in data["profiles"].items():
        if not isinstance(item, dict) or not isinstance(item.get("fingerprint"), str):
            raise ValueError(f"bad entry for {path}")
        error = item.get("error")
        entries[str(path)] = _Entry(
            item["fingerprint"],
            tuple(summary_from_dict(s) for s in item.get("summaries") or ()),
            error if isinstance(error, str) else None,
        )
    return entries
