"""The command line a newcomer meets: each command's own help, values for metavars, one
switch style, defaults shown once, did-you-mean for typos, port 0 and the bind before the log."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys

import pytest

from exporter.app.settings import OPTIONS
from exporter.cli import build_parser, main
from exporter.core.options import parse_listen

SERVE_ONLY = (
    "--listen",
    "--web.config.file",
    "--ingest.enabled",
    "--ingest.token",
    "--max-age",
    "--npu-smi.interval",
    "--hccn.interval",
    "--profiles.interval",
    "--collector.jobs",
)


def help_of(command: str, capsys) -> str:
    with pytest.raises(SystemExit) as exit_info:
        main([command, "--help"])
    assert exit_info.value.code == 0
    return capsys.readouterr().out


def test_once_help_lists_only_what_once_uses(capsys):
    once, serve = help_of("once", capsys), help_of("serve", capsys)
    for flag in SERVE_ONLY:
        assert flag in serve
        assert not re.search(rf"{re.escape(flag)}\b", once), flag
    for flag in ("--npu-smi", "--simulate", "--profile-dir", "--collector.devices"):
        assert flag in once
    assert once.startswith("usage: cann-exporter once") and serve.startswith("usage: cann-exporter serve")


def test_metavars_read_as_values(capsys):
    text = help_of("serve", capsys)
    # Before: PODRESOURCES.ENABLED, HCCN.ENABLED, SIMULATOR.MODEL, LOG.FORMAT.
    assert not re.findall(r"\b[A-Z_]+\.[A-Z_]+\b", text)
    assert "--log.format logfmt|json" in text and "--simulate.model 910b3|a3|310p-duo" in text


def test_every_switch_is_one_style(capsys):
    usage = help_of("serve", capsys).split("\n\n")[0]
    switches = [o for o in OPTIONS if o.switch]
    assert {"hccn.enabled", "podresources.enabled", "ingest.enabled"} <= {o.key for o in switches}
    for option in switches:
        flag = option.flag_name
        assert f"[{flag} | --no-{flag[2:]}]" in usage, flag
    # A tri-state switch left out keeps auto; given, it says on or off.
    args = build_parser().parse_args(["serve", "--no-hccn.enabled", "--podresources.enabled"])
    assert (getattr(args, "hccn.enabled"), getattr(args, "podresources.enabled"), getattr(args, "ingest.enabled")) == (False, True, None)


def test_every_default_is_shown_once_and_readable(capsys):
    text = " ".join(help_of("serve", capsys).split("\noptions:\n")[1].split())  # argparse wraps lines anywhere
    for option in OPTIONS:
        entry = re.search(rf"{re.escape(option.flag_name)}[ ,].*?env {option.env_name}\)", text)
        assert entry and entry.group().count("default:") == (option.shown_default is not None), option.key
    assert "(default: in memory only; env CANN_EXPORTER_PROFILES_STATE_FILE)" in text
    assert "(default: off; env CANN_EXPORTER_SIMULATOR_SCENARIO)" in text
    assert "default: None" not in text and "default: ()" not in text and "default: True" not in text


@pytest.mark.parametrize(
    ("argv", "command", "hint"),
    [
        (["serve", "--listn", ":9435"], "cann-exporter serve", "--listn (did you mean --listen?)"),
        (["--listn", ":9435"], "cann-exporter serve", "did you mean --listen?"),  # serve is the default
        (["once", "--npu-smi.timout", "3s"], "cann-exporter once", "did you mean --npu-smi.timeout?"),
        (["diagnose", "--prometeus", "http://127.0.0.1:1"], "cann-exporter diagnose", "did you mean --prometheus?"),
        (["serve", "--list", ":9435"], "cann-exporter serve", "--list (did you mean --listen?)"),  # no abbreviations
        (["serve", "--web.listen-address", ":9435"], "cann-exporter serve", "did you mean --listen?"),  # exporter-toolkit's
    ],
)
def test_a_mistyped_option_is_one_line_with_a_guess_and_a_pointer_to_help(argv, command, hint, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    err = capsys.readouterr().err
    assert exit_info.value.code == 2
    first, pointer = err.splitlines()  # the error and where the options are, not 50 lines of usage
    assert first.startswith(f"{command}: error: unrecognized arguments: ") and hint in first
    assert pointer == f"(`{command} --help` lists every option)"


def test_familiar_names_from_other_exporters_are_pointed_at_ours(tmp_path, capsys):
    config = tmp_path / "c.yaml"
    config.write_text("web:\n  listen_adress: ':9435'\n")
    assert main(["check-config", str(config)]) == 2
    assert "unknown key 'web.listen_adress'; did you mean 'listen'?" in capsys.readouterr().err


def test_unknown_environment_variable_exits_2_with_a_guess():
    env = {
        "CANN_EXPORTER_NPU_SMI_INTERVL": "5s",
        "CANN_EXPORTER_URL": "http://127.0.0.1:9435",
        "CANN_EXPORTER_JOB_NAME": "bert",
    }  # the hooks' own variables are not typos
    proc = subprocess.run(
        [sys.executable, "-m", "exporter", "once", "--simulate"], env=env_with(env), capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "cann-exporter: configuration error: CANN_EXPORTER_NPU_SMI_INTERVL: unknown environment variable; "
        "did you mean 'CANN_EXPORTER_NPU_SMI_INTERVAL'?"
    ]
    assert proc.stdout == ""


def env_with(extra: dict[str, str]) -> dict[str, str]:
    """This environment without any CANN_EXPORTER_* of the caller's, plus ``extra``."""
    return {**{k: v for k, v in os.environ.items() if not k.startswith("CANN_EXPORTER_")}, **extra}


def test_listen_accepts_port_zero():
    assert parse_listen("127.0.0.1:0") == ("127.0.0.1", 0)
    assert parse_listen(":0") == ("", 0)
    for bad in ("127.0.0.1:65536", "127.0.0.1:", "127.0.0.1:00000000000000000001", "9435"):
        with pytest.raises(ValueError):
            parse_listen(bad)


def test_port_zero_is_logged_as_the_bound_port(start):
    exporter = start("--simulate", "--no-hccn.enabled")
    assert exporter.port != 0  # read from the "listening" line, written after the bind
    assert exporter.get("/healthz") == (200, "ok\n")


def test_a_taken_port_is_reported_before_anything_says_listening(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = subprocess.run(
            [sys.executable, "-m", "exporter", "serve", "--simulate", "--no-hccn.enabled", "--listen", f"127.0.0.1:{port}"],
            capture_output=True,
            text=True,
            timeout=60,
            env=env_with({}),
        )
    assert proc.returncode == 1
    assert "address already in use" in proc.stderr and f"address=127.0.0.1:{port}" in proc.stderr
    assert "msg=listening" not in proc.stderr


@pytest.mark.parametrize("listen", ["ab..c:9435", ".:9435", "a" * 64 + ".example:9435", "node:99999", "[::1]x:9435"])
def test_a_malformed_listen_address_exits_2_naming_it(listen, tmp_path, capsys):
    """Not a UnicodeError traceback from the resolver at bind time: refused where it is read."""
    config = tmp_path / "c.yaml"
    config.write_text(f"listen: '{listen}'\n")
    assert main(["check-config", str(config)]) == 2
    assert "listen" in capsys.readouterr().err
    proc = subprocess.run(
        [sys.executable, "-m", "exporter", "serve", "--simulate", "--listen", listen], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 2 and "listen" in proc.stderr and "expected HOST:PORT" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize(
    ("argv", "timeout", "bounded"),
    [(["diagnose"], 15.0, "each HTTP request"), (["report", "--out", "r"], 30.0, "each query")],
)
def test_diagnose_and_report_bound_their_prometheus_requests_alike(argv, timeout, bounded, capsys):
    text = " ".join(help_of(argv[0], capsys).split())
    assert f"--timeout DURATION bound on {bounded}, connection to last byte (default: {timeout:g}s)" in text
    args = build_parser().parse_args([*argv, "--prometheus", "http://p:9090"])
    assert (args.timeout, args.deadline, args.selector, args.end) == (timeout, None, "", None)
    args = build_parser().parse_args([*argv, "--prometheus", "http://p:9090", "--timeout", "500ms", "--deadline", "2m"])
    assert (args.timeout, args.deadline) == (0.5, 120.0)
    with pytest.raises(SystemExit):
        build_parser().parse_args([*argv, "--timeout", "2h"])  # over the 1h a request may take
