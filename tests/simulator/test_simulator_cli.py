"""The simulator as an executable: a real subprocess, as the exporter will run it."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from exporter.simulator import render, watch
from exporter.simulator.faults import HUGE_BYTES, parse_faults
from exporter.simulator.models import MODELS
from exporter.simulator.npusmi import EXIT_DCMI, EXIT_INVALID, parse_sim_options
from exporter.simulator.options import EXIT_SIMULATOR_USAGE
from exporter.simulator.scenarios import simulate
from tests.support.paths import ROOT

T0 = 1_780_000_000.0  # an even minute: the flap fault keeps NPU 0


def sim(*args: str, env: dict[str, str] | None = None, timeout: float = 10) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if not k.startswith("CANN_SIM_")}
    return subprocess.run(
        [sys.executable, "-m", "exporter.simulator", *args], cwd=ROOT, capture_output=True, timeout=timeout, env={**base, **(env or {})}
    )


def test_answers_like_npu_smi_and_agrees_with_the_library():
    done = sim("--model", "a3", "--time", str(T0), "--", "info", "-t", "usages", "-i", "3")
    assert done.returncode == 0
    assert done.stdout.decode() == render.render_usages(simulate(MODELS["a3"], "healthy", T0), 3)


def test_two_processes_print_the_same_instant():
    first, second = (sim("--scenario", "sawtooth", "--seed", "7", "--time", str(T0), "info") for _ in range(2))
    assert first.stdout == second.stdout and first.returncode == 0


def test_environment_variables_set_the_defaults():
    env = {"CANN_SIM_MODEL": "310p-duo", "CANN_SIM_SCENARIO": "idle", "CANN_SIM_TIME": str(T0)}
    done = sim("info", env=env)
    assert done.stdout.decode() == render.render_info(simulate(MODELS["310p-duo"], "idle", T0))
    overridden = sim("--model", "910b3", "-v", env=env)
    assert overridden.stdout == b"npu-smi version: 25.5.1\n"


@pytest.mark.parametrize(
    ("args", "code", "text"),
    [
        (["info", "-t", "board", "-i", "9"], EXIT_INVALID, render.INVALID_CARD_ID),
        (["info", "-t", "cpu", "-i", "0"], EXIT_INVALID, render.INVALID_TYPE),
        (["info", "-t", "usages"], EXIT_INVALID, f"Error parameter of -i\n{render.USAGE_INFO}\n"),
        (["bogus"], EXIT_INVALID, render.USAGE_TOP + "\n"),
        (["-v"], 0, "npu-smi version: 25.5.1\n"),
    ],
)
def test_exit_codes_and_error_texts(args, code, text):
    done = sim("--time", str(T0), *args)
    assert (done.returncode, done.stdout.decode()) == (code, text)


def test_degraded_usages_fail_with_dcmi_8005():
    done = sim("--scenario", "degraded", "--time", str(T0), "info", "-t", "usages", "-i", "5")
    assert done.returncode == EXIT_DCMI
    assert done.stdout.decode() == render.dcmi_error(-8005)
    missing = sim("--scenario", "degraded", "--time", str(T0), "info", "-t", "usages", "-i", "7")
    assert missing.returncode == EXIT_INVALID


def test_bad_simulator_options_are_reported_on_stderr():
    done = sim("--model", "h100", "info")
    assert done.returncode == EXIT_SIMULATOR_USAGE and b"unknown model" in done.stderr and done.stdout == b""


def test_watch_streams_rounds_until_count():
    started = time.monotonic()
    done = sim("--model", "a3", "--time", str(T0), "info", "watch", "-i", "1", "-d", "1", "--count", "2")
    lines = done.stdout.decode().splitlines()
    assert done.returncode == 0 and 0.9 < time.monotonic() - started < 8
    assert lines[0] == watch.render_watch_header(MODELS["a3"], "ptaicmbnu").rstrip("\n")
    assert [line.split()[:2] for line in lines[1:]] == [["1", "0"], ["1", "1"]] * 2
    assert all(line.endswith(" ") for line in lines[1:])


def test_watch_flushes_each_round_to_a_pipe():
    """The exporter reads watch through a pipe: rows must arrive before the process ends."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "exporter.simulator", "info", "watch", "-s", "pt"], cwd=ROOT, stdout=subprocess.PIPE, start_new_session=True
    )
    try:
        ready, _, _ = select.select([proc.stdout], [], [], 8)
        assert ready and proc.poll() is None
        assert os.read(proc.stdout.fileno(), 65536).startswith(b"NpuID(Idx)  ChipId(Idx) Pwr(W)")
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(5)


def _group_members(pgid: int) -> list[int]:
    members = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid:
            members.append(int(stat.parent.name))
    return members


def test_hang_needs_a_process_group_kill():
    proc = subprocess.Popen(
        [sys.executable, "-m", "exporter.simulator", "--fault", "usages:hang", "info", "-t", "usages", "-i", "0"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 8
        while len(_group_members(proc.pid)) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(_group_members(proc.pid)) >= 2, "the hang fault should leave a child in the group"
        proc.kill()  # only the parent: the child still holds stdout open
        proc.wait(5)
        ready, _, _ = select.select([proc.stdout], [], [], 0.3)
        assert not ready, "stdout closed although the sleeping child holds it"
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
    ready, _, _ = select.select([proc.stdout], [], [], 5)
    assert ready and proc.stdout.read() == b""


def test_scoped_fault_leaves_other_commands_alone():
    assert sim("--fault", "usages:hang", "--time", str(T0), "info", "-t", "power", "-i", "0").returncode == 0


def test_a_fault_scoped_to_one_npu_leaves_the_other_cards_alone():
    assert parse_faults("usages@3:error-8005")[0].npu == 3
    failing = sim("--fault", "usages@3:error-8005", "--time", str(T0), "info", "-t", "usages", "-i", "3")
    assert failing.returncode == EXIT_DCMI and failing.stdout.decode() == render.dcmi_error(-8005)
    for args in (("info", "-t", "usages", "-i", "2"), ("info", "-t", "common", "-i", "3"), ("info",)):
        assert sim("--fault", "usages@3:error-8005", "--time", str(T0), *args).returncode == 0, args
    with pytest.raises(ValueError, match="not an NPU id"):
        parse_faults("usages@x:hang")


@pytest.mark.parametrize("kind", ["error-8005", "error-8020"])
def test_dcmi_error_faults(kind):
    done = sim("--fault", kind, "info")
    assert done.returncode == EXIT_DCMI and done.stdout.decode() == render.dcmi_error(-int(kind[-4:]))


def test_output_faults():
    normal = sim("--time", str(T0), "info").stdout
    truncated = sim("--fault", "truncate", "--time", str(T0), "info").stdout
    assert normal.startswith(truncated) and len(truncated) < len(normal) and not truncated.endswith(b"\n")
    garbage = sim("--fault", "garbage", "--time", str(T0), "info").stdout
    with pytest.raises(UnicodeDecodeError):
        garbage.decode("utf-8")
    huge = sim("--fault", "huge", "--time", str(T0), "info").stdout
    assert len(huge) >= HUGE_BYTES and huge.startswith(normal)
    forced = sim("--fault", "exit=3", "--time", str(T0), "info", "-t", "power", "-i", "0")
    assert forced.returncode == 3 and b"NPU Real-time Power(W)" in forced.stdout


def test_slow_fault_delays_the_answer():
    started = time.monotonic()
    assert sim("--fault", "slow=0.6", "-v").returncode == 0
    assert time.monotonic() - started >= 0.6


def test_flap_hides_npu_0_on_odd_minutes():
    even = sim("--fault", "flap", "--time", str(T0), "info", "-m").stdout.decode()
    odd = sim("--fault", "flap", "--time", str(T0 + 60), "info", "-m").stdout.decode()
    assert "\t0 " in even and "\t0 " not in odd
    gone = sim("--fault", "flap", "--time", str(T0 + 60), "info", "-t", "usages", "-i", "0")
    assert gone.returncode == EXIT_INVALID


def test_option_and_fault_parsing():
    options, rest = parse_sim_options(["--model=a3", "--seed", "2", "--", "info", "-m"], {"CANN_SIM_SEED": "9"})
    assert (options.model, options.seed, rest) == ("a3", 2, ["info", "-m"])
    options, rest = parse_sim_options(["info", "--model", "a3"], {})
    assert options.model == "910b3" and rest == ["info", "--model", "a3"]
    faults = parse_faults("usages:hang, slow=2,-m:truncate")
    assert [(f.kind, f.value, f.scope) for f in faults] == [("hang", None, "usages"), ("slow", 2.0, None), ("truncate", None, "m")]
    with pytest.raises(ValueError):
        parse_faults("slow")


def test_simulator_imports_nothing_else_from_exporter():
    code = (
        "import sys, exporter.simulator.npusmi, exporter.simulator.__init__; "
        "print(sorted(m for m in sys.modules if m.startswith('exporter') and m != 'exporter' "
        "and not m.startswith('exporter.simulator')))"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, timeout=10)
    assert done.stdout == b"[]\n", done.stderr
