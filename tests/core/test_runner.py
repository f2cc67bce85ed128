"""The bounded subprocess runner, through real subprocesses."""

from __future__ import annotations

import asyncio
import os
import sys

import pytest

from exporter.core.runner import CommandRunner, RunError
from tests.support.procs import exited, running, zombies

PY = sys.executable


async def test_runs_and_captures_both_streams():
    runner = CommandRunner(timeout=20)
    result = await runner.run([PY, "-c", "import sys; print('out'); print('err', file=sys.stderr); sys.exit(3)"])
    assert result.returncode == 3
    assert result.stdout == "out\n"
    assert result.stderr == "err\n"
    assert "out" in result.output and "err" in result.output


async def test_timeout_kills_the_whole_process_group(tmp_path):
    pidfile = tmp_path / "grandchild.pid"
    # The child starts a grandchild that would outlive it, then hangs.
    script = (
        "import subprocess, sys, time\n"
        f"p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)'])\n"
        f"open({str(pidfile)!r}, 'w').write(str(p.pid))\n"
        "time.sleep(300)\n"
    )
    runner = CommandRunner(timeout=3)
    with pytest.raises(RunError) as info:
        await runner.run([PY, "-c", script])
    assert info.value.reason == "timeout"
    grandchild = int(pidfile.read_text())
    for _ in range(100):  # SIGKILL delivery is asynchronous; bounded wait
        if exited(grandchild):
            break
        await asyncio.sleep(0.05)
    assert exited(grandchild)
    assert running() == [] and zombies() == []


# The child waits (bounded) until the runner has lowered its priority, then reports where it runs.
_REPORT = (
    "import os, time\n"
    "deadline = time.monotonic() + 20\n"
    "while os.getpriority(os.PRIO_PROCESS, 0) == {base} and time.monotonic() < deadline:\n"
    "    time.sleep(0.005)\n"
    "print(os.getsid(0), os.getpgid(0), os.getpid(), os.getpriority(os.PRIO_PROCESS, 0))\n"
)


async def test_a_call_runs_in_its_own_group_in_our_session_and_nicer():
    """Its own process group (a timeout kills the group) but not its own session: on Linux a
    new session is a new autogroup, which gets as much CPU as the whole exporter, nice or not."""
    base = os.getpriority(os.PRIO_PROCESS, 0)
    if base >= 19:
        pytest.skip("this test process already runs at nice 19: nothing nicer to set")
    runner = CommandRunner(timeout=30, nice=5)
    result = await runner.run([PY, "-c", _REPORT.format(base=base)])
    sid, pgid, pid, nice = map(int, result.stdout.split())
    assert sid == os.getsid(0)
    assert pgid == pid != os.getpgid(0)
    assert nice == min(19, base + 5)


async def test_nice_zero_leaves_the_priority_alone():
    base = os.getpriority(os.PRIO_PROCESS, 0)
    result = await CommandRunner(timeout=30).run([PY, "-c", "import os; print(os.getpriority(os.PRIO_PROCESS, 0))"])
    assert int(result.stdout) == base


async def test_output_is_capped():
    runner = CommandRunner(timeout=20, max_output_bytes=10_000)
    with pytest.raises(RunError) as info:
        await runner.run([PY, "-c", "import sys; sys.stdout.write('x' * 1_000_000)"])
    assert info.value.reason == "output_too_large"
    assert running() == [] and zombies() == []


async def test_missing_binary_is_a_reason_not_a_crash(tmp_path):
    runner = CommandRunner()
    with pytest.raises(RunError) as info:
        await runner.run([str(tmp_path / "npu-smi")])
    assert info.value.reason == "not_found"


async def test_not_executable_is_permission_denied(tmp_path):
    path = tmp_path / "npu-smi"
    path.write_text("#!/bin/sh\n")
    path.chmod(0o644)
    if os.geteuid() == 0:
        pass  # root still cannot exec a file without any x bit
    with pytest.raises(RunError) as info:
        await CommandRunner().run([str(path)])
    assert info.value.reason == "permission_denied"


async def test_concurrency_is_bounded(tmp_path):
    log = tmp_path / "events"
    script = (
        "import os, sys, time\n"
        f"fd = os.open({str(log)!r}, os.O_WRONLY | os.O_APPEND | os.O_CREAT)\n"
        "os.write(fd, b'+'); time.sleep(0.3); os.write(fd, b'-')\n"
    )
    runner = CommandRunner(timeout=30, max_concurrency=2)
    await asyncio.gather(*(runner.run([PY, "-c", script]) for _ in range(6)))
    events = log.read_text()
    assert events.count("+") == 6 and events.count("-") == 6
    running = peak = 0
    for event in events:
        running += 1 if event == "+" else -1
        peak = max(peak, running)
    assert 1 <= peak <= 2


async def test_an_urgent_call_passes_the_calls_waiting_for_a_slot(tmp_path):
    """npu-smi's overview waits ahead of a batch of per-card queries (the chips would age out
    behind them on a slow node)."""
    log, gate = tmp_path / "order", tmp_path / "gate"

    def script(mark: str) -> str:
        return f"import os\nfd = os.open({str(log)!r}, os.O_WRONLY | os.O_APPEND | os.O_CREAT)\nos.write(fd, b'{mark}')\n"

    blocker = f"import os, time\nwhile not os.path.exists({str(gate)!r}): time.sleep(0.01)\n"
    runner = CommandRunner(timeout=60, max_concurrency=1)
    first = asyncio.create_task(runner.run([PY, "-c", blocker]))
    batch = []
    for _ in range(3):
        batch.append(asyncio.create_task(runner.run([PY, "-c", script("n")])))
        await asyncio.sleep(0)
    urgent = asyncio.create_task(runner.run([PY, "-c", script("u")], urgent=True))
    while runner._slots.waiting < 4:
        await asyncio.sleep(0.01)
    gate.write_text("go")
    await asyncio.gather(first, urgent, *batch)
    assert log.read_text() == "unnn"


async def test_cancelled_waiters_never_lose_a_slot():
    slots = CommandRunner(timeout=60, max_concurrency=1)._slots
    await slots.acquire()
    gone, next_one = asyncio.create_task(slots.acquire(urgent=True)), asyncio.create_task(slots.acquire())
    while slots.waiting < 2:
        await asyncio.sleep(0)
    gone.cancel()  # cancelled while waiting: the slot goes past it
    slots.release()
    await next_one
    with pytest.raises(asyncio.CancelledError):
        await gone
    late = asyncio.create_task(slots.acquire())
    while slots.waiting < 1:
        await asyncio.sleep(0)
    slots.release()  # handed the slot ...
    late.cancel()  # ... and cancelled before it resumed: it passes the slot on
    with pytest.raises(asyncio.CancelledError):
        await late
    assert slots.free == 1 and slots.waiting == 0


async def test_cancellation_kills_the_child():
    runner = CommandRunner(timeout=60)
    task = asyncio.create_task(runner.run([PY, "-c", "import time; time.sleep(300)"]))
    for _ in range(200):
        if running():
            break
        await asyncio.sleep(0.02)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert running() == [] and zombies() == []


async def test_a_reserved_slot_waits_for_the_urgent_call_only():
    """With reserve_urgent, ordinary calls never take the last slot: an urgent call finds it free
    while slow calls hold the others, and an ordinary one queues."""
    slots = CommandRunner(timeout=60, max_concurrency=3, reserve_urgent=True)._slots
    await slots.acquire()
    await slots.acquire()
    third = asyncio.create_task(slots.acquire())
    while slots.waiting < 1:
        await asyncio.sleep(0)
    await asyncio.wait_for(slots.acquire(urgent=True), 1)  # at once, past the ordinary waiter
    assert not third.done()
    slots.release()  # the urgent call ends: its slot is kept back again
    await asyncio.sleep(0)
    assert not third.done()
    slots.release()  # an ordinary call ends: the waiter takes its slot
    await asyncio.wait_for(third, 1)
    assert slots.free == 1 and CommandRunner(max_concurrency=1, reserve_urgent=True)._slots.reserved == 0
