"""Where exports are on disk: which producer wrote a directory, where its deliverables are,
finding exports under a watched root, and telling when one is finished.

An export counts as finished when its file listing (names, sizes, mtimes) is the same on two
consecutive scans and either torch_npu's `analyse.done` marker exists, or the data files are
there, non-empty and untouched for ``settle_seconds`` (and, for torch_npu/MindSpore,
`profiler_info*.json` says collection ended); docs/formats/profiler-exports.md, "When an
export is finished". File-system work here blocks: the source runs it in a worker thread. A directory that cannot
be listed, or that leads out of the watched root, is a Failure with its reason and is skipped:
the rest of the scan goes on.
Quoted section names refer to docs/formats/profiler-exports.md.
"""

from __future__ import annotations

import errno
import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

from exporter.core.health import Failure
from exporter.core.inputfile import is_within, refusal_from_os_error

PRODUCERS = ("torch_npu", "mindspore", "msprof", "cluster")


def producer_of(path: Path) -> str | None:
    """msprof-analyze's rule ("Finding exports"): by directory name."""
    name = path.name
    if name.endswith("_ascend_pt"):
        return "torch_npu"
    if name.endswith("_ascend_ms"):
        return "mindspore"
    if name.startswith("PROF_"):
        return "msprof"
    if os.path.isfile(path / "cluster_step_trace_time.csv"):  # never raises: an unreadable dir is reported when listed
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
    root: Path | None = None                 # the watched directory it was found under


# --- discovery (blocking; runs in a worker thread) --------------------------------------------


def find_profiles(root: Path, max_depth: int = 4, allow_outside: bool = False) -> tuple[list[ProfileRef], list[Failure]]:
    """Exports under ``root`` (or ``root`` itself), without descending into an export.

    Job name: the directory directly below ``root`` that holds the export; exports placed
    in ``root`` itself take ``root``'s name. A cluster_analysis_output is only used when no
    per-rank export sits beside it (the rank exports say more). A directory linked from
    inside ``root`` to somewhere outside it is skipped (``outside_root``) unless
    ``allow_outside``.
    """
    refs: list[ProfileRef] = []
    failures: list[Failure] = []
    try:
        os.stat(root)
    except OSError as exc:
        if exc.errno in (errno.ENOENT, errno.ENOTDIR):
            return refs, [Failure(str(root), "missing_dir", f"{root}: profile directory does not exist")]
        refusal = refusal_from_os_error(root, exc)
        return refs, [Failure(str(root), refusal.reason, refusal.message)]
    own = producer_of(root)
    if own is not None:
        return [ProfileRef(root, own, root.parent.name or root.name, root)], []
    _walk(root, root, 0, max_depth, allow_outside, refs, failures)
    return refs, failures


def _walk(root: Path, directory: Path, depth: int, max_depth: int, allow_outside: bool,
          refs: list[ProfileRef], failures: list[Failure]) -> None:
    try:
        with os.scandir(directory) as entries:
            children = sorted(Path(e.path) for e in entries if not e.name.startswith(".") and _is_dir(e))
    except OSError as exc:
        refusal = refusal_from_os_error(directory, exc)
        failures.append(Failure(str(directory), refusal.reason, f"{directory}: cannot list: {exc.strerror or exc}"))
        return
    if not allow_outside:
        outside = [child for child in children if not is_within(child, root)]
        failures += [Failure(str(c), "outside_root", f"{c}: resolves outside {root}; skipped (profiles.allow_outside)")
                     for c in outside]
        children = [child for child in children if child not in outside]
    kinds = {child: producer_of(child) for child in children}
    has_ranks = any(k not in (None, "cluster") for k in kinds.values())
    for child in children:
        kind = kinds[child]
        if kind is None:
            if depth + 1 < max_depth:
                _walk(root, child, depth + 1, max_depth, allow_outside, refs, failures)
        elif kind != "cluster" or not has_ranks:
            refs.append(ProfileRef(child, kind, _job_name(root, child), root))


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
    """None while the output directory does not exist yet; InputRefused when it cannot be
    listed (``permission_denied``, ``unreadable``)."""
    out = output_dir(ref.path, ref.producer)
    try:
        root_files = _stat_files(ref.path)
        files = _stat_files(out) if out != ref.path else root_files
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
