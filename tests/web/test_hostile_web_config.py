"""A hostile web config against a real `serve` process: at start it exits 2 naming the key; as a
reload it counts as failed (gauge 0, failure counter up), is logged once per distinct error, not
once per poll, and the last good config stays in force."""

from __future__ import annotations

import time
import urllib.request
from pathlib import Path

import pytest

from tests.support.exposition import value
from tests.support.hostile import alias_bomb, run_watched, symlink, write

GOOD = "http_server_config:\n  headers:\n    X-Frame-Options: deny\n"
BAD = {
    "digits": (
        "http_server_config:\n  headers:\n    X-Frame-Options: " + "7" * 5000 + "\n",
        "http_server_config.headers.X-Frame-Options: '77777",
    ),
    "nul_path": (
        'tls_server_config:\n  cert_file: "/etc/a\\0b.crt"\n  key_file: k.key\n',
        "tls_server_config.cert_file: contains a NUL character",
    ),
    "alias_bomb": (alias_bomb(), "more than 100000 values once aliases are expanded"),
    "utf16": (GOOD.encode("utf-16"), "UTF-16 text (byte-order mark)"),
    # Not Latin-1: once accepted, every answer failed to encode (empty /healthz, a traceback each).
    "curly_quotes": (
        "http_server_config:\n  headers:\n    Content-Security-Policy: default-src \u201cself\u201d\n",
        "http_server_config.headers.Content-Security-Policy: character U+201C at position 13",
    ),
    "crlf": (
        'http_server_config:\n  headers:\n    Strict-Transport-Security: "max-age=1\\r\\nSet-Cookie: a=b"\n',
        "http_server_config.headers.Strict-Transport-Security: character U+000D at position 10",
    ),
}
RELOAD_FAILED = "web config reload failed"


def _config(tmp_path: Path, name: str) -> tuple[Path, str]:
    content, message = BAD[name]
    return write(tmp_path / "web.yml", content), message


@pytest.mark.parametrize("name", sorted(BAD))
def test_a_hostile_web_config_at_start_exits_2_naming_the_key(tmp_path: Path, name: str) -> None:
    path, message = _config(tmp_path, name)
    config = write(tmp_path / "config.yaml", f"web:\n  config_file: {path}\n")
    for args in (["serve", "--simulate", "--listen", "127.0.0.1:0", "--web.config.file", str(path)], ["check-config", str(config)]):
        ran = run_watched(args, timeout=30)
        assert ran.code == 2 and message in ran.err and "Traceback" not in ran.err, ran.err[-2000:]


def test_a_web_config_on_dev_zero_at_start_exits_2(tmp_path: Path) -> None:
    path = symlink(tmp_path / "web.yml", "/dev/zero")
    ran = run_watched(["serve", "--simulate", "--listen", "127.0.0.1:0", "--web.config.file", str(path)], timeout=30)
    assert ran.code == 2 and "web.config_file: " in ran.err and "not a regular file" in ran.err, ran.err


def _reloads(exporter, result: str) -> float:
    return value(exporter.metrics(), "cann_exporter_web_config_reloads_total", result=result) or 0.0


def test_failed_reloads_count_log_once_per_error_and_keep_the_last_good_config(start, tmp_path: Path) -> None:
    path = write(tmp_path / "web.yml", GOOD)
    exporter = start("--simulate", "--web.config.file", str(path))
    assert exporter.get("/healthz")[0] == 200
    failures = 0.0
    for name in sorted(BAD):
        content, message = BAD[name]
        write(path, content)
        found = exporter.wait_for(lambda m, f=failures: (value(m, "cann_exporter_web_config_reloads_total", result="failure") or 0) > f)
        failures = value(found, "cann_exporter_web_config_reloads_total", result="failure")
        assert value(found, "cann_exporter_web_config_last_reload_success") == 0
        assert message in exporter.log_path.read_text()
    time.sleep(3)  # three more polls of the last, still broken, file
    log = exporter.log_path.read_text()
    assert log.count(RELOAD_FAILED) == len(BAD), log[-3000:]  # one line per distinct error
    assert "Traceback" not in log and "crashed" not in log
    assert _reloads(exporter, "failure") == failures == len(BAD)
    with urllib.request.urlopen(f"http://127.0.0.1:{exporter.port}/healthz", timeout=5) as resp:
        assert resp.headers["X-Frame-Options"] == "deny"  # the last good config, still in force
    write(path, GOOD.replace("deny", "sameorigin"))
    found = exporter.wait_for(lambda m: value(m, "cann_exporter_web_config_last_reload_success") == 1)
    assert value(found, "cann_exporter_web_config_reloads_total", result="success") == 1
    assert exporter.proc.poll() is None
