"""SIGHUP to a real `serve --simulate`: the web config is re-read (even when its stat did not
change, so the every-second watcher could not have seen it) and the --config file checked
again; each outcome is logged; bad files keep the last good state; the exporter never exits."""

from __future__ import annotations

import os
import signal
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

from tests.support.hostile import write

CSP = "http_server_config:\n  headers:\n    Content-Security-Policy: default-src '{}'\n"


def csp(port: int) -> str | None:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as resp:
        return resp.headers.get("Content-Security-Policy")


def rewrite_keeping_stat(path: Path, text: str) -> None:
    """New content of the same size in the same inode, the old mtime put back: the watcher's
    signature does not change, only a re-read sees it."""
    before = os.stat(path)
    assert len(text.encode()) == before.st_size
    with open(path, "r+b") as f:
        f.write(text.encode())
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))


def hup_and_wait(exporter, log_line: str, count: int = 1, deadline: float = 30.0) -> str:
    """SIGHUP, then the log once it holds ``log_line`` ``count`` times (bounded)."""
    os.kill(exporter.proc.pid, signal.SIGHUP)
    end = time.monotonic() + deadline
    while True:
        log = exporter.log_path.read_text(errors="replace")
        if log.count(log_line) >= count:
            return log
        assert exporter.proc.poll() is None, f"exited on SIGHUP ({exporter.proc.returncode}); log:\n{log[-3000:]}"
        assert time.monotonic() < end, f"no {log_line!r} x{count} in {deadline}s; log:\n{log[-3000:]}"
        time.sleep(0.1)


def test_sighup_rereads_the_files_logs_it_and_never_exits(start: Callable[..., object], tmp_path: Path) -> None:
    web = write(tmp_path / "web.yml", CSP.format("self"))
    config = write(tmp_path / "config.yaml", f"web:\n  config_file: {web}\nmax_age: 180s\n")
    exporter = start("--simulate", "--config", str(config))
    port = exporter.port
    assert csp(port) == "default-src 'self'"

    # Changed without a stat change: only SIGHUP's re-read applies it.
    rewrite_keeping_stat(web, CSP.format("none"))
    time.sleep(2.5)  # two polls of the watcher: nothing seen
    assert csp(port) == "default-src 'self'"
    log = hup_and_wait(exporter, "SIGHUP: web config re-read")
    assert "SIGHUP: re-reading the configuration files" in log and "applied" in log
    assert "the configuration is valid and unchanged" in log
    assert csp(port) == "default-src 'none'"

    # A header HTTP cannot carry: refused naming it, the last good one stays.
    write(web, CSP.format("s\u2019f"))
    log = hup_and_wait(exporter, "SIGHUP: web config re-read", count=2)
    assert "http_server_config.headers.Content-Security-Policy: character U+2019" in log
    assert "refused, the last good one stays in force" in log
    assert csp(port) == "default-src 'none'"

    # --config changed (valid): logged as needing a restart; then invalid: problems by key.
    write(config, f"web:\n  config_file: {web}\nmax_age: 240s\n")
    log = hup_and_wait(exporter, "the changes take effect at the next restart")
    assert "max_age" in log.split("the changes take effect at the next restart")[-1].splitlines()[0]
    write(config, f"web:\n  config_file: {web}\nmax_agee: 240s\n")
    log = hup_and_wait(exporter, "SIGHUP: the configuration has problems")
    assert "max_agee" in log.split("SIGHUP: the configuration has problems")[-1].splitlines()[0]

    # A burst of signals: folded into one more re-read or a few, never fatal.
    done = log.count("SIGHUP: re-reading the configuration files")
    for _ in range(5):
        os.kill(exporter.proc.pid, signal.SIGHUP)
    log = hup_and_wait(exporter, "SIGHUP: re-reading the configuration files", count=done + 1)
    assert exporter.get("/healthz")[0] == 200 and exporter.get("/metrics")[0] == 200
    assert "Traceback" not in log and "reload crashed" not in log
    assert exporter.terminate_within(15) == 0


def test_sighup_rereads_the_fault_code_table(start: Callable[..., object], tmp_path: Path) -> None:
    """The site's fault-code table (npu_smi.fault_codes) is applied live: the degraded chip's
    SeparateNPU code becomes whatever the rewritten file says; a broken file keeps the last one."""
    codes = write(tmp_path / "codes.json", '{"SeparateNPUCodes": ["80E3A201"]}')
    config = write(tmp_path / "config.yaml", f"npu_smi:\n  fault_codes: {codes}\n  details: [health]\n  detail_interval: 2s\n")
    exporter = start("--simulate", "degraded", "--config", str(config), "--no-hccn.enabled")

    def level_of(code: str) -> Callable[[dict], str | None]:
        def find(found: dict) -> str | None:
            for (name, labels), _ in found.items():
                if name == "npu_health_error_info" and dict(labels).get("code") == code:
                    return dict(labels).get("level")
            return None

        return find

    separate = level_of("80E3A201")
    exporter.wait_for(lambda f: separate(f) == "SeparateNPU")
    assert level_of("80E18005")(exporter.metrics()) == "unknown"  # not in the site's table: the shipped one is not consulted

    write(codes, '{"SubHealthFaultCodes": ["80E3A201"], "RestartNPUCodes": ["80E18005"]}')
    log = hup_and_wait(exporter, "SIGHUP: fault-code table re-read")
    assert "the configuration is valid and unchanged" in log
    found = exporter.wait_for(lambda f: separate(f) == "SubHealthFault")
    assert level_of("80E18005")(found) == "RestartNPU"

    write(codes, '{"SeparateNPUCodes": ["not hex"]}')  # refused at the check: the table in use stays
    log = hup_and_wait(exporter, "SIGHUP: the configuration has problems")
    assert "npu_smi.fault_codes: " in log.split("SIGHUP: the configuration has problems")[-1].splitlines()[0]
    assert separate(exporter.metrics()) == "SubHealthFault"

    write(codes, '{"SeparateNPUCodes": ["80E3A201"], "SubHealthFaultCodes": ["0x80e3a201"]}')  # a conflict: refused, named
    log = hup_and_wait(exporter, "SIGHUP: the configuration has problems", count=2)
    line = log.split("SIGHUP: the configuration has problems")[-1].splitlines()[0]
    assert "code 80E3A201 is listed under both SeparateNPUCodes and SubHealthFaultCodes" in line
    assert separate(exporter.metrics()) == "SubHealthFault"


def test_sighup_applies_new_npu_smi_intervals(start: Callable[..., object], tmp_path: Path) -> None:
    """A group whose interval was an hour runs again within seconds of a SIGHUP that sets 2s:
    the waiting task reads its new interval; the change is not logged as needing a restart."""
    from tests.support.exposition import value

    config = write(tmp_path / "config.yaml", "npu_smi:\n  details: [volt]\n  hardware_interval: 1h\n")
    exporter = start("--simulate", "--no-hccn.enabled", "--config", str(config))

    def last_run(found: dict) -> float | None:
        return value(found, "cann_exporter_source_last_success_timestamp_seconds", source="npu_smi_hardware")

    first = last_run(exporter.wait_for(lambda f: last_run(f) is not None))
    write(config, "npu_smi:\n  details: [volt]\n  hardware_interval: 2s\n")
    log = hup_and_wait(exporter, "SIGHUP: npu-smi intervals applied")
    assert "npu_smi.hardware_interval" in log.split("SIGHUP: npu-smi intervals applied")[-1].splitlines()[0]
    assert "the changes take effect at the next restart" not in log
    exporter.wait_for(lambda f: (last_run(f) or 0) > first, deadline=60)
    assert exporter.terminate_within(15) == 0
