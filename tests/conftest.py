"""Fixtures every test folder may use; helpers live in tests/support."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from pathlib import Path

import pytest

from tests.support.replay import write_replay_npu_smi
from tests.support.serve import Exporter
from tests.support.skips import write_skip_summary


@pytest.fixture(autouse=True)
def _restore_root_logging():
    """In-process CLI runs install the exporter's log handler; drop it after each test."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    root.handlers[:] = [h for h in root.handlers if h in handlers or h.get_name() != "cann-exporter"]
    root.setLevel(level)


@pytest.fixture
def replay_npu_smi(tmp_path: Path) -> Callable[..., Path]:
    def make(replies: Mapping[str, object], default_exit: int = 1) -> Path:
        return write_replay_npu_smi(tmp_path, replies, default_exit)

    return make


@pytest.fixture
def start(tmp_path: Path):
    """start(*args, env=...) -> a running `cann-exporter serve` (stopped after the test)."""
    started: list[Exporter] = []

    def run(*args: str, env: dict[str, str] | None = None) -> Exporter:
        exporter = Exporter(list(args), tmp_path, env)
        started.append(exporter)
        return exporter

    yield run
    for exporter in started:
        exporter.stop()


@pytest.hookimpl(optionalhook=True)  # a pytest-xdist hook: unknown without it
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    """`make test` (`-n 2 --dist loadscope`): which tests share a worker, and what goes first."""
    if config.getvalue("dist") != "loadscope":
        return None
    from tests.support.groups import SuiteScheduling  # imports xdist: only where it runs

    return SuiteScheduling(config, log)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Every skipped group and why, so a missing tool never passes unnoticed."""
    write_skip_summary(terminalreporter)
