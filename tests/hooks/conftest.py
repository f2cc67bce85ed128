"""Fixtures for the hook tests (helpers live in hooks_helpers.py, importable by the tests)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support.hooks import ExporterProcess, Sink


@pytest.fixture
def sink() -> Iterator[Sink]:
    s = Sink()
    yield s
    s.close()


@pytest.fixture
def start_exporter(tmp_path: Path) -> Iterator[Callable[..., ExporterProcess]]:
    started: list[ExporterProcess] = []

    def start(*args: str, port: int | None = None) -> ExporterProcess:
        exporter = ExporterProcess(tmp_path, *args, port=port)
        started.append(exporter)
        return exporter

    yield start
    for exporter in started:
        exporter.stop()
