"""Hostile configuration files through every command that reads one, each in a real process:
exit 2 with a message naming the key (or the file), never a traceback, in bounded memory and time."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.hostile import alias_bomb, fifo, run_watched, symlink, write

MiB = 1 << 20
# The interpreter with the exporter's imports takes 40-80 MB; a 574-byte bomb took 570 MB.
RSS_BOUND = 160 * MiB

# name -> (file content, or a maker of the file, and what the message must say)
CASES = {
    "alias_bomb": (alias_bomb(), "more than 100000 values once aliases are expanded"),
    "recursive_alias": ("npu_smi: &a {timeout: *a}\n", "an alias inside its own anchor"),
    "deep": ("max_age: " + "[" * 5000 + "]" * 5000 + "\n", "nested more than 64 levels deep"),
    "nines": ("max_age: " + "9" * 400 + "\n", "max_age: expected a duration"),
    "digits": ("npu_smi:\n  max_output_bytes: " + "7" * 5000 + "\n", "npu_smi.max_output_bytes: expected a positive integer up to"),
    "huge_int": ("npu_smi:\n  max_concurrency: 99999999999999999999\n", "npu_smi.max_concurrency: expected a positive integer up to"),
    "year": ("max_age: 99999y\n", "max_age: must be at most 366d"),
    "date": ("max_age: 2024-13-45\n", "max_age: expected a duration"),
    "utf16": ("max_age: 180s\n".encode("utf-16"), "UTF-16 text (byte-order mark); save it as UTF-8"),
    "utf32": ("max_age: 180s\n".encode("utf-32"), "UTF-32 text (byte-order mark)"),
    "latin1": ("npu_smi:\n  path: /opt/np\xfc\n".encode("latin-1"), "not UTF-8"),
    "nul_in_path": ('npu_smi:\n  path: "/usr/bin/np\\0u-smi"\n', "npu_smi.path: contains a NUL character"),
    "nul_in_list": ('profiles:\n  dirs: ["/data", "/x\\0y"]\n', "profiles.dirs: contains a NUL character"),
    "raw_nul": (b"max_age: 180s\n\0\n", "a NUL byte on line 2"),
    "too_large": ("# padding\n" * 120_000, "more than the 1048576 allowed"),
    "dev_zero": (lambda p: symlink(p, "/dev/zero"), "not a regular file"),
    "fifo": (lambda p: fifo(p), "not a regular file"),
    "token_dev_zero": ("ingest:\n  token_file: /dev/zero\n", "ingest.token_file: /dev/zero: not a regular file"),
}


def hostile(tmp_path: Path, name: str) -> tuple[Path, str]:
    content, message = CASES[name]
    path = tmp_path / f"{name}.yaml"
    if callable(content):
        content(path)
    else:
        write(path, content)
    return path, message


def check(ran, message: str) -> None:
    assert ran.code == 2, (ran.code, ran.err[-2000:])
    assert message in ran.err, ran.err[-2000:]
    assert "Traceback" not in ran.err and ran.out == ""
    assert ran.peak_rss < RSS_BOUND, f"{ran.peak_rss / MiB:.0f} MiB"


@pytest.mark.parametrize("name", sorted(CASES))
def test_check_config_refuses_it_naming_the_key(tmp_path: Path, name: str) -> None:
    path, message = hostile(tmp_path, name)
    check(run_watched(["check-config", str(path)], timeout=30), message)


@pytest.mark.parametrize("name", ["alias_bomb", "nines", "digits", "utf16", "nul_in_path", "fifo"])
def test_serve_once_and_diagnose_refuse_it_the_same_way(tmp_path: Path, name: str) -> None:
    path, message = hostile(tmp_path, name)
    for args in (
        ["serve", "--listen", "127.0.0.1:0", "--config", str(path)],
        ["once", "--simulate", "--config", str(path)],
        ["diagnose", "--simulate", "--config", str(path)],
    ):
        check(run_watched(args, timeout=30), message)


THRESHOLDS = {
    "alias_bomb": (alias_bomb(), "more than 100000 values once aliases are expanded"),
    "infinite": (None, "indicators[0] (device_utilization): healthy: expected a finite number or null"),
    "digits": (None, "indicators[0] (device_utilization): healthy: expected a finite number or null, got '7777"),
    "utf16": (None, "UTF-16 text (byte-order mark)"),
    "fifo": (lambda p: fifo(p), "not a regular file"),
}


def _thresholds(tmp_path: Path, name: str) -> tuple[Path, str]:
    from exporter.thresholds.table import DEFAULT_PATH

    content, message = THRESHOLDS[name]
    path = tmp_path / "thresholds.yaml"
    table = DEFAULT_PATH.read_text()
    first = table.index("healthy:", table.index("id: device_utilization"))
    end = table.index("\n", first)
    if name == "infinite":
        content = table[:first] + "healthy: .inf" + table[end:]
    elif name == "digits":
        content = table[:first] + "healthy: " + "7" * 5000 + table[end:]
    elif name == "utf16":
        content = table.encode("utf-16")
    if callable(content):
        content(path)
    else:
        write(path, content)
    return path, message


@pytest.mark.parametrize("name", sorted(THRESHOLDS))
def test_generate_refuses_a_hostile_threshold_table(tmp_path: Path, name: str) -> None:
    path, message = _thresholds(tmp_path, name)
    check(run_watched(["generate", "--thresholds", str(path), "--out", str(tmp_path / "out")], timeout=60), message)
    assert not (tmp_path / "out").exists()
