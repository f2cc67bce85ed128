"""The ingest's registration (`collector.jobs`, `serve` only): the training hooks' steps (POST
/api/v1/steps) as a live part, and their profiling windows' summaries (POST /api/v1/profiles),
which the profiles part merges with the watched exports. Both are fed by the same hooks and
bounded by the same `ingest.*` limits; a rank's summaries end with it."""

from __future__ import annotations

from exporter.core.registration import Build, Collect, Registration, Switch
from exporter.core.snapshot import Snapshot
from exporter.core.source import Live, Source
from exporter.jobs.collector import JobCollector
from exporter.jobs.mfu import PeakJoin, Peaks
from exporter.jobs.options import INGEST_OPTIONS, IngestOptions
from exporter.jobs.store import JOBS, IngestStore
from exporter.jobs.validate import IngestLimits
from exporter.npusmi.part import DEVICES
from exporter.profiles.options import PROFILES_OPTIONS
from exporter.profiles.posted import POSTED, PostedLimits, PostedProfiles


def ingesting(b: Build[IngestOptions]) -> bool:
    return b.context.serving and b.on("jobs") and b.options.enabled


def posted(b: Build[IngestOptions]) -> PostedProfiles | None:
    """The hooks' profile summaries: with the ingest and the profiles collector."""
    if not (ingesting(b) and b.on("profiles")):
        return None
    profiles = b.context.options(PROFILES_OPTIONS)
    options = b.options
    return PostedProfiles(
        PostedLimits(
            max_jobs=options.max_jobs, max_ranks=options.max_ranks, max_ranks_per_client=options.max_ranks_per_client, top_k=profiles.top_k
        )
    )


def build(b: Build[IngestOptions]) -> Source | None:
    if not ingesting(b):
        return None
    options = b.options
    store = IngestStore(
        ttl=options.ttl, finished_ttl=options.finished_ttl, stalled_after=options.stalled_after, limits=IngestLimits.of(options)
    )
    summaries = b.shared(POSTED)
    if summaries is not None:
        store.on_gone = summaries.forget  # a rank's summaries end with it (ingest.finished_ttl)
    return Live(JOBS.name, PeakJoin(store.part, lambda: chip_peaks(b.context.latest())).read, store)


def chip_peaks(snapshot: Snapshot) -> Peaks:
    """(device, precision, FLOP/s) of every chip read now: what the jobs' MFU divides by."""
    devices = snapshot.get(DEVICES)
    if devices is None:
        return ()
    return tuple(
        sorted(
            (str(c.device), precision, flops)
            for c in devices.chips
            if c.up and c.device is not None
            for precision, flops, _ in c.peak_flops
        )
    )


def describe(b: Build[IngestOptions], source: Source | None) -> str:
    if source is not None:
        token = "bearer token required" if b.options.token or b.options.token_file else "no token"
        return f"POST /api/v1/steps ({token}; a silent rank is dropped after {b.options.ttl:g} s)"
    return "ingest.enabled is false" if b.context.serving else "`once` has no ingest"


SWITCH = Switch("jobs", "training-hook ingest (POST /api/v1/steps) and its npu_job_* metrics, where ingest.enabled allows", serve_only=True)
REGISTRATION = Registration(
    JOBS, build, (Collect(SWITCH.name, JobCollector),), INGEST_OPTIONS, (SWITCH,), describe, provides=((POSTED, posted),)
)
