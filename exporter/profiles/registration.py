"""The profiles' registration (`collector.profiles`): exports found under `profiles.dirs` and the
summaries the hooks' profiling windows post (made by the ingest, jobs/registration.py) as one
part: per job and rank, the one produced last."""

from __future__ import annotations

from exporter.core.registration import Build, Collect, Registration, Switch
from exporter.core.snapshot import Snapshot
from exporter.core.source import Derived, Source
from exporter.profiles.collector import ProfileCollector
from exporter.profiles.options import PROFILES_OPTIONS, ProfilesOptions
from exporter.profiles.part import PROFILES, ProfilesPart
from exporter.profiles.posted import POSTED, merged
from exporter.profiles.source import ProfileSource


def build(b: Build[ProfilesOptions]) -> Source | None:
    if not b.on("profiles"):
        return None
    watched = ProfileSource(b.options, b.health, single_scan=b.context.single_scan) if b.options.dirs else None
    pushed = b.shared(POSTED)
    if watched is None and pushed is None:
        return None

    def make(earlier: Snapshot) -> ProfilesPart | None:
        if pushed is None:
            return watched.part() if watched else None
        return merged(watched.part() if watched else None, pushed.summaries())

    return Derived(PROFILES.name, make, watched)


def describe(b: Build[ProfilesOptions], source: Source | None) -> str:
    if source is None:
        return "no profiles.dirs, and no ingest for the hooks' profiles"
    watched = [f"profile directories: {', '.join(b.options.dirs)}"] if b.options.dirs else []
    return "; ".join(watched + (["POST /api/v1/profiles"] if b.shared(POSTED) is not None else []))


SWITCH = Switch("profiles", "profiler exports found under profiles.dirs")
REGISTRATION = Registration(PROFILES, build, (Collect(SWITCH.name, ProfileCollector),), PROFILES_OPTIONS, (SWITCH,), describe)
