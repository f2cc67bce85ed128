"""A ProfileSource over tmp_path/watched, and what tests read back from it."""

from __future__ import annotations

from pathlib import Path

from exporter.core.health import HealthRegistry
from exporter.profiles.options import ProfilesOptions
from exporter.profiles.source import ProfileSource


def source_for(tmp_path: Path, single_scan: bool = False, settle: float = 0.0, **kw) -> tuple[ProfileSource, HealthRegistry]:
    """A source watching ``tmp_path / "watched"`` with ``kw`` as profiles options, and its health."""
    health = HealthRegistry()
    options = ProfilesOptions(dirs=(str(tmp_path / "watched"),), settle=settle, **kw)
    return ProfileSource(options, health, single_scan=single_scan), health


async def scanned(source: ProfileSource, runs: int = 2) -> None:
    """``runs`` scans: two settle an export that did not change between them."""
    for _ in range(runs):
        await source.refresh()


def errors(health: HealthRegistry) -> dict[str, int]:
    (status,) = health.statuses()
    return dict(status.errors)


def failing(health: HealthRegistry) -> dict[str, str]:
    (status,) = health.statuses()
    return dict(status.failing)


def jobs(source: ProfileSource) -> set[str]:
    return {s.job_name for s in source.part().samples}
