"""Where exports are on disk: which producer wrote a directory, where its deliverables are,
finding exports under a watched root, and telling when one is finished.

An export counts as finished when its file listing (names, sizes, mtimes) is the same on two
consecutive scans and either torch_npu's `analyse.done` marker exists, or the data files are
there, non-empty and untouched for ``settle_seconds`` (and, for torch_npu/MindSpore,
`profiler_info*.json` says collection ended); docs/formats/profiler-exports.md, "When an
export is finished". File-system work here blocks: the source runs it in a worker thread. A directory that cannot
be listed, or that leads out of the watched root, is a Failure with its reason and is skipped:
the rest of the scan goes on. What one scan reads is bounded (``EntryBudget``): it stops once it
has examined ``max_entries`` directory entries, in an order that depends only on the tree.
Quoted section names refer to docs/formats/profiler-exports.md.
"""

from __future__ import annotations

import errno
import hashlib
import os
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from exporter.core.errors import ReasonError
from exporter.core.health import Failure
from exporter.core.inputfile import is_within, refusal_from_os_error

PRODUCERS = ("torch_npu", "mindspore", "msprof", "cluster")


def producer_of(path: str | os.PathLike[str]) -> str | None:
    """msprof-analyze's rule ("Finding exports"): by directory name."""
    name = os.path.basename(os.fspath(path))
    if name.endswith("_ascend_pt"):
        return "torch_npu"
    if name.endswith("_ascend_ms"):
        return "mindspore"
    if name.startswith("PROF_"):
        return "msprof"
    if os.path.isfile(os.path.join(path, "cluster_step_trace_time.csv")):  # never raises: an unreadable dir is reported when listed
        return "cluster"
    return None


def output_dir(path: Path, producer: str) -> Path:
    """Where the parsed deliverables are."""
    if producer in ("torch_npu", "mindspore"):
        return path / "ASCEND_PROFILER_OUTPUT"
    if producer == "msprof":
        return path / "mindstudio_profiler_output"
    return path


MARKER = "analyse.done"  # torch_npu >= 2026-01 writes it last
_DATA_FILES = {
    "torch_npu": ("step_trace_time.csv", "kernel_details.csv", "op_statistic.csv"),
    "mindspore": ("step_trace_time.csv", "kernel_details.csv", "op_statistic.csv"),
    "msprof": ("op_summary_", "op_statistic_", "msprof_"),
    "cluster": ("cluster_step_trace_time.csv",),
}


@dataclass(frozen=True)
class ProfileRef:
    """One export found on disk; ``job_name`` is the directory-derived default."""

    path: Path
    producer: str
    job_name: str
    root: Path | None = None  # the watched directory it was found under


# --- what one scan may read ---------------------------------------------------------------------

# Directory entries one scan of one watched directory examines at most (profiles.max_entries).
# Real use: tens to hundreds of exports, each listed as its directory and its output directory
# (about 30 entries for torch_npu, up to a few hundred with msprof slices): a few thousand to
# ten thousand in all. At the bound a scan costs about 3 s of one core and 16 MiB.
MAX_ENTRIES = 50_000
# Entries of one export's listing (its directory and its output directory); a real one holds
# a few hundred at most. More refuses that export only: the scan goes on.
MAX_EXPORT_ENTRIES = 5_000
MAX_DEPTH = 4  # directory levels searched below a watched directory


class TooManyEntries(ReasonError):
    """A listing cut short by an :class:`EntryBudget` (reason ``too_many_entries``)."""


class EntryBudget:
    """The directory entries a scan may still examine: every entry read counts (files,
    directories, hidden ones) in the walk and in export listings. Once ``limit`` entries are
    read, the next one raises :class:`TooManyEntries` and ``stopped_in`` says where."""

    def __init__(self, limit: int = MAX_ENTRIES, what: str = "in one scan (profiles.max_entries)") -> None:
        self.limit = limit
        self.what = what
        self.used = 0
        self.stopped_in: str | None = None

    def take(self, directory: str | os.PathLike[str]) -> None:
        if self.used >= self.limit:
            self.stopped_in = self.stopped_in or os.fspath(directory)
            raise TooManyEntries("too_many_entries", f"{os.fspath(directory)}: more than {self.limit} directory entries {self.what}")
        self.used += 1

    def failure(self, root: Path) -> Failure:
        """The one failure a spent budget costs its watched directory per scan."""
        return Failure(
            str(root),
            "too_many_entries",
            f"{root}: more than {self.limit} directory entries in one scan (profiles.max_entries); "
            f"stopped in {self.stopped_in}, the rest is not examined",
        )


# --- discovery (blocking; runs in a worker thread) --------------------------------------------


def find_profiles(
    root: Path,
    max_depth: int = MAX_DEPTH,
    allow_outside: bool = False,
    budget: EntryBudget | None = None,
    each: Callable[[ProfileRef, list[Failure]], None] | None = None,
) -> tuple[list[ProfileRef], list[Failure]]:
    """Every export :func:`walk_exports` finds; a spent budget adds its ``too_many_entries``
    failure. ``each(ref, failures)`` runs on each export as it is found, so what it lists
    counts against the same budget (and its failures come in walk order)."""
    budget = budget or EntryBudget()
    refs: list[ProfileRef] = []
    failures: list[Failure] = []
    for found in walk_exports(root, budget, max_depth, allow_outside):
        if isinstance(found, Failure):
            failures.append(found)
            continue
        refs.append(found)
        if each is not None:
            each(found, failures)
    if budget.stopped_in is not None:
        failures.append(budget.failure(root))
    return refs, failures


def walk_exports(
    root: Path, budget: EntryBudget, max_depth: int = MAX_DEPTH, allow_outside: bool = False
) -> Iterator[ProfileRef | Failure]:
    """Exports under ``root`` (or ``root`` itself), without descending into an export.

    Scan order ("What a watched directory can cost"): breadth first, so an export near the root
    is never hidden behind a deep tree; each directory's subdirectories by name. A directory is
    used only when it was listed whole: when the budget runs out inside one, or inside what the
    caller lists between two refs (it shares ``budget``), the walk ends there. What was found
    before does not depend on the order the file system lists entries in.

    Job name: the directory directly below ``root`` that holds the export; exports placed
    in ``root`` itself take ``root``'s name. A cluster_analysis_output is only used when no
    per-rank export sits beside it (the rank exports say more). A directory linked from
    inside ``root`` to somewhere outside it is skipped (``outside_root``) unless
    ``allow_outside``.
    """
    try:
        os.stat(root)
    except OSError as exc:
        if exc.errno in (errno.ENOENT, errno.ENOTDIR):
            yield Failure(str(root), "missing_dir", f"{root}: profile directory does not exist")
            return
        refusal = refusal_from_os_error(root, exc)
        yield Failure(str(root), refusal.reason, refusal.message)
        return
    own = producer_of(root)
    if own is not None:
        yield ProfileRef(root, own, root.parent.name or root.name, root)
        return
    pending = deque([(str(root), 0)])  # directories found, not listed yet (each was an entry read)
    while pending and budget.stopped_in is None:
        directory, depth = pending.popleft()
        try:
            found = _subdirectories(directory, budget)
        except TooManyEntries:
            return
        except OSError as exc:
            refusal = refusal_from_os_error(directory, exc)
            yield Failure(directory, refusal.reason, f"{directory}: cannot list: {exc.strerror or exc}")
            continue
        children = []
        for name, linked in found:  # only a link can lead out: the walk stays inside
            child = os.path.join(directory, name)
            if linked and not allow_outside and not is_within(child, root):
                yield Failure(child, "outside_root", f"{child}: resolves outside {root}; skipped (profiles.allow_outside)")
            else:
                children.append((child, producer_of(child)))
        has_ranks = any(kind not in (None, "cluster") for _, kind in children)
        for child, kind in children:
            if kind is None:
                if depth + 1 < max_depth:
                    pending.append((child, depth + 1))
            elif kind != "cluster" or not has_ranks:
                path = Path(child)
                yield ProfileRef(path, kind, _job_name(root, path), root)
                if budget.stopped_in is not None:  # the caller's listing of it spent the budget
                    return


def _subdirectories(directory: str, budget: EntryBudget) -> list[tuple[str, bool]]:
    """(name, is a symlink) of ``directory``'s visible subdirectories, by name; every entry read
    is taken from ``budget`` (TooManyEntries when it runs out: the partial listing is not used)."""
    found = []
    with os.scandir(directory) as entries:
        for entry in entries:
            budget.take(directory)
            if not entry.name.startswith(".") and _is_dir(entry):
                found.append((entry.name, _is_link(entry)))
    found.sort()
    return found


def _is_dir(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_dir()
    except OSError:
        return False


def _is_link(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_symlink()
    except OSError:
        return True  # unknown: checked as a link would be


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
    has_info: bool  # profiler_info*.json: collection ended


def list_export(ref: ProfileRef, budget: EntryBudget | None = None) -> Listing | None:
    """None while the output directory does not exist yet; InputRefused when it cannot be
    listed (``permission_denied``, ``unreadable``); TooManyEntries when its listing holds more
    than MAX_EXPORT_ENTRIES entries (``budget.stopped_in`` stays None) or ``budget`` runs out."""
    out = output_dir(ref.path, ref.producer)
    budgets = (EntryBudget(MAX_EXPORT_ENTRIES, "in one export; skipped"), budget or EntryBudget())
    try:
        root_files = _stat_files(ref.path, budgets)
        files = _stat_files(out, budgets) if out != ref.path else root_files
    except OSError as exc:
        if exc.errno in (errno.ENOENT, errno.ENOTDIR):
            return None
        raise refusal_from_os_error(exc.filename or out, exc) from None
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


def _stat_files(directory: Path, budgets: tuple[EntryBudget, ...]) -> dict[str, tuple[int, int]]:
    out = {}
    with os.scandir(directory) as entries:
        for entry in entries:
            for budget in budgets:
                budget.take(directory)
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
