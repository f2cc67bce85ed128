"""The cgroup memory limit on fixture trees (tests/fixtures/cgroup, provenance in each .src):
v1 and v2, limited and unlimited, a container that sees its own cgroup as the root, a limit
set on a parent; and hostile file contents."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from exporter.resources.cgroup import (
    lowest_limit,
    memory_limit,
    parse_limit,
    parse_membership,
)
from tests.support.paths import FIXTURES

TREES = FIXTURES / "cgroup"


@pytest.mark.parametrize(
    ("tree", "expected"),
    [
        ("v1-hybrid-unlimited__container", None),
        ("v1-docker-limited__container", 512 * 2**20),
        ("v2-pod-limited__kubernetes", 256 * 2**20),
        ("v2-nested-limited__systemd", 2**30),
        ("v2-unlimited__host", None),
    ],
)
def test_every_fixture_tree(tree: str, expected: float | None) -> None:
    assert memory_limit(TREES / tree) == expected


def test_every_tree_has_its_provenance() -> None:
    trees = {p.name for p in TREES.iterdir() if p.is_dir()}
    assert trees and trees == {p.stem for p in TREES.glob("*.src")}


def test_membership_lines() -> None:
    captured = (TREES / "v1-hybrid-unlimited__container" / "proc/self/cgroup").read_text()
    assert parse_membership(captured) == ("/process_api/9a7b876297e60a012555fb848ffd1cdb", "/")
    assert parse_membership("0::/system.slice/x.service\n") == (None, "/system.slice/x.service")
    assert parse_membership("4:cpu,memory:/a\n") == ("/a", None)
    assert parse_membership("garbage\n\n1:cpu\n") == (None, None)


@pytest.mark.parametrize(
    ("text", "limit"),
    [
        ("268435456\n", 268435456.0),
        ("max\n", None),
        ("9223372036854771712\n", None),
        ("0\n", None),
        ("-1\n", None),
        ("lots\n", None),
        ("", None),
    ],
)
def test_limit_values(text: str, limit: float | None) -> None:
    assert parse_limit(text) == limit


def test_a_hostile_path_stays_under_the_mount(tmp_path: Path) -> None:
    mount = tmp_path / "sys/fs/cgroup"
    (mount / "a").mkdir(parents=True)
    (mount / "memory.max").write_text("1000\n")
    (tmp_path / "memory.max").write_text("1\n")  # outside the mount: never read
    assert lowest_limit(mount, "/../../a", "memory.max") == 1000
    assert lowest_limit(mount, "/a (deleted)", "memory.max") == 1000


def test_no_proc_no_limit(tmp_path: Path) -> None:
    assert memory_limit(tmp_path) is None


def test_a_huge_file_is_read_only_in_part(tmp_path: Path) -> None:
    mount = tmp_path / "sys/fs/cgroup"
    mount.mkdir(parents=True)
    (tmp_path / "proc/self").mkdir(parents=True)
    (tmp_path / "proc/self/cgroup").write_text("0::/\n")
    (mount / "memory.max").write_text("1" * (1 << 20))  # a megabyte of digits: garbage, not a number to trust
    assert memory_limit(tmp_path) is None


@given(st.text(max_size=300))
def test_membership_never_raises(text: str) -> None:
    v1, v2 = parse_membership(text)
    assert v1 is None or isinstance(v1, str)
    assert v2 is None or isinstance(v2, str)
