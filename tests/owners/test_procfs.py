"""The reads under the procfs root: the real /proc of processes the tests start (this machine's
own cgroup is real), processes that exit or whose pid is taken meanwhile, and hostile trees
(a huge file, a FIFO, a symlink loop, a link out of the root, odd characters, binary junk)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from exporter.owners.parse import HOST, CgroupOwner, OwnerError, parse_cgroup, parse_start_time
from exporter.owners.procfs import MAX_CGROUP, ProcessOwner, read_owner, root_problem, start_time
from exporter.owners.source import resolve
from tests.support.owners import cgroup_text, procfs_tree, real_stat

SLEEP = [sys.executable, "-c", "import time; time.sleep(60)"]


@pytest.fixture
def sleeper() -> Iterator[subprocess.Popen[bytes]]:
    proc = subprocess.Popen(SLEEP)
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait()


def test_a_started_process_through_the_real_proc(sleeper: subprocess.Popen[bytes]) -> None:
    """What the kernel writes for a live process, read the exporter's way, equals a plain read."""
    start = start_time("/proc", sleeper.pid)
    assert start == parse_start_time(Path(f"/proc/{sleeper.pid}/stat").read_text())
    found = read_owner("/proc", sleeper.pid, start)
    assert found == ProcessOwner(sleeper.pid, start, parse_cgroup(Path(f"/proc/{sleeper.pid}/cgroup").read_text()))
    # A child shares its parent's cgroup (nothing here moved it): the same owner as this process.
    assert found.owner == parse_cgroup(Path("/proc/self/cgroup").read_text())


def test_a_process_that_exits_before_the_read_is_vanished() -> None:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    with pytest.raises(OwnerError) as raised:
        start_time("/proc", proc.pid)
    assert raised.value.reason == "vanished"
    owners, skipped = resolve("/proc", [proc.pid], {})
    assert owners == {} and skipped == {"vanished": 1}


def test_a_reused_pid_is_read_again_and_a_pid_taken_meanwhile_is_dropped(tmp_path: Path, sleeper: subprocess.Popen[bytes]) -> None:
    tree = procfs_tree(tmp_path, {sleeper.pid: "v1-docker-systemd__unknown__1"}, stat_of=sleeper.pid)
    start = start_time(str(tree), sleeper.pid)
    earlier = ProcessOwner(sleeper.pid, start - 1, CgroupOwner("slurm", job_id="1"))  # the pid's former process
    owners, skipped = resolve(str(tree), [sleeper.pid], {sleeper.pid: earlier})
    assert owners[sleeper.pid].owner.runtime == "docker" and owners[sleeper.pid].start == start and not +skipped
    same = ProcessOwner(sleeper.pid, start, CgroupOwner("slurm", job_id="2"))  # same start time: not read again
    assert resolve(str(tree), [sleeper.pid], {sleeper.pid: same})[0] == {sleeper.pid: same}
    with pytest.raises(OwnerError) as raised:  # its stat changed between the two reads around the cgroup
        read_owner(str(tree), sleeper.pid, start - 1)
    assert raised.value.reason == "reused"


def hostile(root: Path) -> dict[int, str]:
    """Pids whose files are hostile, and the reason each is skipped for."""
    stat = real_stat()
    for pid in (101, 102, 103, 106, 107):
        (root / str(pid)).mkdir(parents=True)
        (root / str(pid) / "stat").write_text(stat)
    (root / "101" / "cgroup").write_text("0::/" + "x/" * (MAX_CGROUP // 2) + "\n")  # past the cap
    os.mkfifo(root / "102" / "cgroup")  # a FIFO would block a plain open for ever
    (root / "103" / "cgroup").write_bytes(b"\x7fELF\x02\x01\x01\x00" + bytes(range(256)))
    (root / "104").symlink_to(root / "104")  # a loop
    (root / "105").symlink_to("/proc/self")  # out of the root
    (root / "106" / "cgroup").symlink_to("/etc/hostname")
    (root / "107" / "stat").write_text("107 (x) S 1 2")
    return {101: "too_large", 102: "unreadable", 103: "garbled", 104: "unreadable", 105: "unreadable", 106: "unreadable", 107: "garbled"}


def test_hostile_files_are_skipped_by_reason_without_a_crash(tmp_path: Path) -> None:
    expected = hostile(tmp_path)
    owners, skipped = resolve(str(tmp_path), sorted(expected), {})
    assert owners == {}
    assert dict(skipped) == {reason: list(expected.values()).count(reason) for reason in set(expected.values())}


def test_odd_characters_and_bytes_in_a_cgroup_path_are_read_as_they_are(tmp_path: Path, sleeper: subprocess.Popen[bytes]) -> None:
    tree = procfs_tree(tmp_path, {sleeper.pid: "v2-systemd-service__written"}, stat_of=sleeper.pid)
    odd = '0::/system.slice/evil"\x1b[31m\\x2d\u00e9' + "y" * 150 + ".service\n"
    (tree / str(sleeper.pid) / "cgroup").write_bytes(odd.encode() + b"\xff")
    found = read_owner(str(tree), sleeper.pid, start_time(str(tree), sleeper.pid))
    assert found.owner.runtime == "systemd" and found.owner.unit.startswith('evil"\x1b')


def test_a_kernel_thread_is_the_hosts() -> None:
    kthreadd = Path("/proc/2/stat")
    if not kthreadd.exists() or "(kthreadd)" not in kthreadd.read_text():
        pytest.skip("no kernel thread visible in this pid namespace")
    assert read_owner("/proc", 2, start_time("/proc", 2)).owner.runtime == HOST


def test_a_root_that_cannot_be_listed(tmp_path: Path) -> None:
    assert root_problem(str(tmp_path)) is None
    (tmp_path / "file").write_text("")
    for root in (tmp_path / "missing", tmp_path / "file"):
        problem = root_problem(str(root))
        assert problem is not None and problem[0] == "not_found"


def test_the_fixture_trees_hold_the_fixtures(tmp_path: Path) -> None:
    tree = procfs_tree(tmp_path, {4242: "v2-slurm__unknown__1"})
    assert (tree / "4242" / "cgroup").read_text() == cgroup_text("v2-slurm__unknown__1")
