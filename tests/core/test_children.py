"""Children's exits come through pidfds watched by the loop that started them (children.py)."""

from __future__ import annotations

import asyncio
import sys
import threading

import pytest

from exporter.core.children import use_pidfds
from exporter.core.runner import CommandRunner

pytestmark = pytest.mark.skipif(not use_pidfds(), reason="this kernel refuses pidfd_open")


async def calls(runner: CommandRunner) -> list[int]:
    results = await asyncio.gather(*(runner.run([sys.executable, "-c", f"raise SystemExit({code})"]) for code in (0, 3, 7)))
    return [result.returncode for result in results]


async def test_a_call_starts_no_waiter_thread_and_gets_its_exit_code():
    runner = CommandRunner(max_concurrency=3)
    names_before = {thread.name for thread in threading.enumerate()}
    started: list[str] = []
    original = threading.Thread.start

    def start(thread: threading.Thread) -> None:
        started.append(thread.name)
        original(thread)

    threading.Thread.start = start  # type: ignore[method-assign]
    try:
        assert await calls(runner) == [0, 3, 7]
    finally:
        threading.Thread.start = original  # type: ignore[method-assign]
    assert not [name for name in started if name.startswith("waitpid")]
    assert {thread.name for thread in threading.enumerate()} <= names_before | set(started)


def test_loops_in_other_threads_and_later_loops_are_served_too():
    runner = CommandRunner(max_concurrency=3)
    results: list[list[int]] = []
    thread = threading.Thread(target=lambda: results.append(asyncio.run(calls(runner))))
    thread.start()
    thread.join(30)
    results.append(asyncio.run(calls(runner)))  # a new loop in this thread
    assert results == [[0, 3, 7], [0, 3, 7]]
