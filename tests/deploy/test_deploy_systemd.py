"""deploy/systemd/cann-exporter.service: `systemd-analyze verify` and the sandbox options."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from tests.support.deploy import DEPLOY, run

UNIT = DEPLOY / "systemd" / "cann-exporter.service"


def directives() -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for line in UNIT.read_text().splitlines():
        if "=" in line and not line.startswith(("#", "[")):
            key, value = line.split("=", 1)
            out.setdefault(key.strip(), []).append(value.strip())
    return out


def systemd_analyze() -> str:
    path = shutil.which("systemd-analyze")
    if not path:
        pytest.skip("systemd-analyze not installed (Debian package systemd)")
    return path


def test_sandbox_options() -> None:
    d = directives()
    one = {key: values[-1] for key, values in d.items()}
    assert one["User"] == "cann-exporter" and one["SupplementaryGroups"] == "HwHiAiUser"
    for key, value in {
        "NoNewPrivileges": "yes",
        "ProtectSystem": "strict",
        "ProtectHome": "yes",
        "PrivateTmp": "yes",
        "DevicePolicy": "closed",
        "ProtectKernelModules": "yes",
        "RestrictSUIDSGID": "yes",
        "CapabilityBoundingSet": "",
        "LockPersonality": "yes",
    }.items():
        assert one[key] == value, key
    assert set(one["RestrictAddressFamilies"].split()) <= {"AF_INET", "AF_INET6", "AF_UNIX", "AF_NETLINK"}
    allowed = {v.split()[0] for v in d["DeviceAllow"]}
    assert {"/dev/davinci_manager", "/dev/devmm_svm", "/dev/hisi_hdc"} | {f"/dev/davinci{i}" for i in range(8)} <= allowed
    assert one["ExecStart"].split()[1:] == ["serve", "--config", "/etc/cann-exporter/config.yaml"]
    assert one["ExecReload"] == "/bin/kill -HUP $MAINPID"  # serve re-reads its files on SIGHUP, never exits
    # the owner source reads other users' /proc/PID/cgroup: not hidden from the unit
    assert one.get("ProtectProc", "default") == "default" and one.get("ProcSubset", "all") in ("all", "pid")
    assert "docker" not in one["SupplementaryGroups"].split()


def test_systemd_analyze_verify(tmp_path: Path) -> None:
    """verify insists that ExecStart exists, so the copy points it at /bin/true; any warning fails."""
    tool = systemd_analyze()
    copy = tmp_path / "cann-exporter.service"
    copy.write_text(re.sub(r"^ExecStart=\S+", "ExecStart=/bin/true", UNIT.read_text(), flags=re.M))
    proc = run([tool, "verify", str(copy)])
    assert proc.returncode == 0 and not (proc.stdout + proc.stderr).strip(), proc.stdout + proc.stderr


def test_systemd_analyze_security_exposure(tmp_path: Path) -> None:
    tool = systemd_analyze()
    copy = tmp_path / "cann-exporter.service"
    copy.write_text(re.sub(r"^ExecStart=\S+", "ExecStart=/bin/true", UNIT.read_text(), flags=re.M))
    proc = run([tool, "security", "--offline=yes", "--no-pager", str(copy)])
    match = re.search(r"Overall exposure level for \S+: ([\d.]+)", proc.stdout + proc.stderr)
    if proc.returncode != 0 and not match:
        pytest.skip(f"systemd-analyze security --offline unsupported here: {proc.stderr.strip()[:200]}")
    assert match and float(match.group(1)) <= 3.0, proc.stdout[-2000:]
