"""The "skipped groups" section at the end of a pytest run: every distinct skip reason once,
with how many tests it skipped and the test files they are in, so a machine that lacks a tool
says so instead of passing quietly."""

from __future__ import annotations

from collections.abc import Iterable

import pytest

Groups = dict[str, tuple[int, list[str]]]


def reason_of(report: pytest.TestReport | pytest.CollectReport) -> str:
    longrepr = report.longrepr
    # A skip's longrepr is (path, line, "Skipped: reason"); the path may be a helper's (tests/support/tools.py).
    text = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
    return text.removeprefix("Skipped: ")


def skip_groups(reports: Iterable[pytest.TestReport | pytest.CollectReport]) -> Groups:
    """reason -> (tests skipped, their files in first-seen order); the file comes from the node id."""
    groups: Groups = {}
    for report in reports:
        reason, path = reason_of(report), report.nodeid.split("::")[0]
        count, files = groups.get(reason, (0, []))
        groups[reason] = (count + 1, files if path in files else [*files, path])
    return groups


def write_skip_summary(terminalreporter: pytest.TerminalReporter) -> None:
    groups = skip_groups(terminalreporter.stats.get("skipped", []))
    if not groups:
        return
    terminalreporter.write_sep("=", "skipped groups")
    for reason, (count, files) in sorted(groups.items(), key=lambda item: (-item[1][0], item[0])):
        terminalreporter.write_line(f"{count} skipped: {reason}")
        terminalreporter.write_line(f"    in {', '.join(files)}")
    if any("Debian package" in reason for reason in groups):
        terminalreporter.write_line("Debian packages: scripts/install-test-packages installs them (as root or with passwordless sudo)")
