"""`diagnose` and `report` against hostile servers on 127.0.0.1, each command in a real process:
a server trickling a byte at a time cannot keep a request past --timeout (nor the command past
--deadline), a huge answer is refused at its cap in bounded memory, JSON of any depth is
refused cleanly; always exit 2 with a clear message, never a traceback."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.hostile import body, hostile_server, run_watched, trickle

MiB = 1 << 20
RSS_BOUND = 250 * MiB  # the interpreter with aiohttp and matplotlib-free imports: about 70 MB


def commands(url: str, tmp_path: Path, *extra: str) -> dict[str, list[str]]:
    return {
        "diagnose --prometheus": ["diagnose", "--prometheus", url, *extra],
        "diagnose --metrics-url": ["diagnose", "--metrics-url", url + "/metrics", *extra],
        "report": ["report", "--prometheus", url, "--out", str(tmp_path / "report"), *extra],
    }


def check(ran, message: str, seconds: float) -> None:
    assert ran.code == 2, (ran.code, ran.err[-2000:])
    assert message in ran.err and "Traceback" not in ran.err, ran.err[-2000:]
    assert ran.seconds < seconds, ran.seconds
    assert ran.peak_rss < RSS_BOUND, f"{ran.peak_rss / MiB:.0f} MiB"


def test_a_trickling_server_cannot_hold_a_request_past_timeout(tmp_path: Path) -> None:
    with hostile_server(trickle(every=0.5)) as url:
        for args in commands(url, tmp_path, "--timeout", "2s").values():
            ran = run_watched(args, timeout=60)
            # 2 s of requests plus the interpreter's start; a per-read timeout ran for minutes.
            check(ran, "did not answer within 2s (--timeout)", seconds=20)


def test_a_trickling_server_cannot_hold_a_command_past_its_deadline(tmp_path: Path) -> None:
    with hostile_server(trickle(every=0.5)) as url:
        for args in commands(url, tmp_path, "--timeout", "60s", "--deadline", "2s").values():
            check(run_watched(args, timeout=60), "did not answer within --deadline 2s", seconds=20)


def _deep(depth: int) -> bytes:
    return b'{"status": "success", "data": {"resultType": "vector", "result": ' + b"[" * depth + b"]" * depth + b"}}"


@pytest.mark.parametrize("depth", [100, 100_000])
def test_json_of_any_depth_is_refused_cleanly(tmp_path: Path, depth: int) -> None:
    with hostile_server(body(_deep(depth))) as url:
        for name in ("diagnose --prometheus", "report"):
            ran = run_watched(commands(url, tmp_path, "--timeout", "5s")[name], timeout=60)
            check(ran, "JSON nested more than 64 levels deep", seconds=30)


def _exposition(total: int) -> Iterator[bytes]:
    line = b'npu_aicore_utilization_ratio{npu="0",chip="0",device="0"} 0.5\n'
    chunk = line * (MiB // len(line))
    for _ in range(total // len(chunk)):
        yield chunk


@pytest.mark.parametrize("announced", [True, False])
def test_a_64_mib_exposition_is_refused_at_the_cap(tmp_path: Path, announced: bool) -> None:
    size = 64 * MiB
    length = sum(map(len, _exposition(size))) if announced else None
    with hostile_server(body(lambda: _exposition(size), "text/plain", length)) as url:
        ran = run_watched(commands(url, tmp_path, "--timeout", "30s")["diagnose --metrics-url"], timeout=60)
        check(ran, "more than the 4 MiB read at most", seconds=30)


def test_a_huge_prometheus_answer_is_refused_at_the_cap(tmp_path: Path) -> None:
    def answer() -> Iterator[bytes]:
        yield b'{"status": "success", "data": {"resultType": "vector", "result": ['
        item = b'{"metric": {"npu": "0"}, "value": [1, "0.5"]},' * 10_000
        for _ in range(100 * MiB // len(item)):
            yield item
        yield b"{}]}}"

    with hostile_server(body(answer)) as url:
        ran = run_watched(commands(url, tmp_path, "--timeout", "30s")["diagnose --prometheus"], timeout=90)
        check(ran, "more than the 64 MiB read at most", seconds=60)
