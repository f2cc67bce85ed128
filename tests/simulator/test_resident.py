"""The resident simulator: real subprocesses (bash clients) answered by one warm process, with
exactly the stand-in's bytes and exit codes; everything it does not answer falls back to the
whole stand-in, faults included."""

from __future__ import annotations

import os
import socket
import subprocess
import time
from pathlib import Path

import pytest

from exporter.core.runner import CommandRunner, RunError
from exporter.node.simulate import (
    Resident,
    _start_resident,
    running_resident,
    simulated_tool,
    stand_in,
)
from exporter.simulator import resident as resident_simulator
from exporter.simulator.resident import TOOLS, parse_request
from tests.support.procs import running

T0 = "1767225600"   # a frozen clock: both paths print the same state
NO_PYTHON = "/nonexistent/python"   # a client that falls back to the stand-in fails with 127

NPU_SMI_CALLS = [
    ["info"], ["info", "-m"], ["info", "-l"], ["-v"], ["info", "-t", "usages", "-i", "3"], ["info", "-t", "memory", "-i", "0", "-c", "1"],
    ["info", "-t", "bogus", "-i", "0"], ["info", "-t", "usages", "-i", "99"], ["info", "-t", "usages"], ["nonsense"],
]
HCCN_CALLS = [["-i", "0", "-link", "-g"], ["-i", "5", "-optical", "-g"], ["-i", "3", "-stat", "-g"], ["-i", "99", "-link", "-g"], ["-x"]]


def argv(tool: str, python: str | None = None) -> list[str]:
    client = list(simulated_tool(tool))
    assert client[0].endswith("bash"), "bash is on every machine the tests run on"
    if python is not None:
        client[client.index(stand_in(TOOLS[tool])[0])] = python
    return [*client, "--model", "a3", "--scenario", "healthy", "--"]


def run(args: list[str], **env: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(args, capture_output=True, timeout=30, env={**os.environ, "CANN_SIM_TIME": T0, **env})


@pytest.mark.parametrize(("tool", "calls"), [("npusmi", NPU_SMI_CALLS), ("hccn", HCCN_CALLS)])
def test_the_resident_answers_with_the_stand_ins_bytes_streams_and_exit_codes(tool, calls):
    whole = [*stand_in(TOOLS[tool]), "--model", "a3", "--scenario", "healthy", "--"]
    for call in calls:
        fast, slow = run([*argv(tool, NO_PYTHON), *call]), run([*whole, *call])
        assert (fast.returncode, fast.stdout, fast.stderr) == (slow.returncode, slow.stdout, slow.stderr), call
        assert fast.stdout or fast.stderr, call


def test_faults_and_streams_run_the_whole_stand_in():
    assert run([*argv("npusmi"), "info"], CANN_SIM_FAULT="exit=7").returncode == 7
    assert run([*argv("npusmi", NO_PYTHON), "info"], CANN_SIM_FAULT="exit=7").returncode == 127   # not the resident's
    assert run([*argv("hccn"), "-i", "0", "-link", "-g"], CANN_SIM_HCCN_FAULT="busy").returncode == 11
    watch = run([*argv("npusmi"), "info", "watch", "-i", "0", "--count", "1"])
    assert watch.returncode == 0 and b"NpuID" in watch.stdout
    assert run([*argv("npusmi", NO_PYTHON), "info", "watch", "--count", "1"]).returncode == 127


def test_a_fault_file_is_the_stand_ins_to_read(tmp_path):
    faults = tmp_path / "faults"
    faults.write_text("exit=9\n")
    assert run([*argv("npusmi", NO_PYTHON), "info"], CANN_SIM_FAULT_FILE=str(faults)).returncode == 127
    assert run([*argv("npusmi"), "info"], CANN_SIM_FAULT_FILE=str(faults)).returncode == 9


def test_bad_simulator_options_get_the_stand_ins_usage_error():
    bad = run([*simulated_tool("npusmi"), "--model", "nope", "--", "info"])
    assert bad.returncode == 2 and b"unknown model" in bad.stderr


async def test_a_hung_call_is_killed_with_its_group_through_the_runner():
    runner = CommandRunner(timeout=1.0)
    env = {**os.environ, "CANN_SIM_FAULT": "hang"}
    runner.env = env
    with pytest.raises(RunError) as info:
        await runner.run([*argv("npusmi"), "info"])
    assert info.value.reason == "timeout"
    end = time.monotonic() + 10
    while running() and time.monotonic() < end:   # bounded: the killed group is being reaped
        time.sleep(0.05)
    assert running() == []   # the stand-in and the sleep it started: gone with the group


def test_requests_that_are_not_ours_are_refused():
    token = b"secret"
    with pytest.raises(ValueError, match="token"):
        parse_request(b"guess\0npusmi\0" + b"0\0\0", token)
    with pytest.raises(ValueError, match="CANN_SIM_"):
        parse_request(b"secret\0npusmi\x001\0info\0PATH=/tmp\0\0", token)
    with pytest.raises(ValueError, match="tool"):
        parse_request(b"secret\0sh\x001\0-c\0\0", token)
    assert parse_request(b"secret\0npusmi\x002\0info", token) is None           # still arriving
    assert parse_request(b"secret\0npusmi\x002\0info\0-m\0CANN_SIM_TIME=5\0\0", token) == (
        "npusmi", ["info", "-m"], {"CANN_SIM_TIME": "5"})
    assert parse_request(b"secret\0npusmi\x001\0\0\0", token) == ("npusmi", [""], {})   # an empty argument


def test_a_stranger_gets_nothing_and_an_endless_request_is_cut_off():
    resident = running_resident()
    assert resident is not None
    for request in (b"guess\0npusmi\x001\0info\0\0", b"x" * (resident_simulator.MAX_REQUEST_BYTES + 4096)):
        with socket.create_connection(("127.0.0.1", int(resident.port)), timeout=10) as conn:
            conn.sendall(request)
            assert conn.recv(4096) == b""   # closed without an answer
    assert resident.process.poll() is None   # and still serving
    assert run([*argv("npusmi", NO_PYTHON), "-v"]).returncode == 0


def test_without_the_resident_calls_run_the_stand_in_and_it_ends_with_its_parent():
    resident = _start_resident(nice=0)
    assert isinstance(resident, Resident)
    client = [resident.bash, "-c", resident_simulator.CLIENT, "cann-sim", resident.port, resident.token_file, "npusmi",
              *stand_in(TOOLS["npusmi"])[::4], "--model", "a3", "--"]
    answered = run([*client, "-v"])
    assert answered.returncode == 0 and b"version" in answered.stdout
    token_dir = Path(resident.token_file).parent
    assert oct(token_dir.stat().st_mode & 0o777) == "0o700" and oct(Path(resident.token_file).stat().st_mode & 0o777) == "0o600"
    assert resident.process.stdin is not None
    resident.process.stdin.close()              # what our exit does to its pipe
    assert resident.process.wait(timeout=10) == 0
    assert not token_dir.exists()
    fallback = run([*client, "-v"])             # nobody listens on the port: the whole stand-in answers
    assert fallback.returncode == 0 and fallback.stdout == answered.stdout
