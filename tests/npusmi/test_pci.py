"""The Ascend PCI functions in sysfs (tests/fixtures/sysfs, provenance in each .src): the count
by device id, the expected chips where the model gives one number per function, and absence
(no sysfs, no Ascend function, unreadable files) never read as an expectation of 0."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from exporter.core.health import HealthRegistry
from exporter.core.runner import CommandRunner
from exporter.npusmi.collector import ChipsCollector
from exporter.npusmi.options import NpuSmiOptions, parse_count
from exporter.npusmi.pci import ascend_functions, pci_count
from exporter.npusmi.source import NpuSmiSource
from tests.support.exposition import exposition
from tests.support.paths import FIXTURES
from tests.support.replay import write_replay_npu_smi

TREES = FIXTURES / "sysfs"


def test_every_tree_has_its_provenance() -> None:
    trees = {p.name for p in TREES.iterdir() if p.is_dir()}
    assert trees and trees == {p.stem for p in TREES.glob("*.src")}


@pytest.mark.parametrize(
    ("tree", "functions", "expected"),
    [
        ("910B3-8card__written", (("0xd802", 8),), 8),
        ("910_93-A3-2card__written", (("0xd803", 4),), 4),  # Atlas A3: every die is a function
        ("310P3-300IDuo-x4__written", (("0xd500", 4),), None),  # 1 chip (300I Pro) or 2 (300I Duo) per function
    ],
)
def test_every_fixture_tree(tree: str, functions: tuple, expected: int | None) -> None:
    count = pci_count(TREES / tree)
    assert count is not None
    assert (count.functions, count.expected_chips) == (functions, expected)


def test_no_ascend_function_and_no_sysfs_are_absence(tmp_path: Path) -> None:
    assert pci_count(TREES / "no-ascend__written") is None
    assert ascend_functions(TREES / "no-ascend__written") == {}
    assert pci_count(tmp_path / "missing") is None
    assert ascend_functions(tmp_path / "missing") is None


def test_unreadable_and_odd_files_are_skipped(tmp_path: Path) -> None:
    devices = tmp_path / "bus/pci/devices"
    for name, files in {
        "0000:01:00.0": {"vendor": "0x19e5\n", "device": "0xd802\n", "class": "0x120000\n"},
        "0000:02:00.0": {"vendor": "0x19e5\n", "device": "0xd802\n"},  # no class
        "0000:03:00.0": {"vendor": "garbage", "device": "0xd802\n", "class": "0x120000\n"},
        "0000:04:00.0": {"vendor": "0x19e5\n", "device": "0xd802\n", "class": "0x020000\n"},  # a NIC
        "0000:05:00.0": {"vendor": "0x19E5", "device": "0xD801", "class": "0x120001"},  # upper case, no newline
    }.items():
        (devices / name).mkdir(parents=True)
        for file, text in files.items():
            (devices / name / file).write_text(text)
    count = pci_count(tmp_path)
    assert count is not None and count.functions == (("0xd801", 1), ("0xd802", 1)) and count.expected_chips == 2


@pytest.mark.parametrize("bad", ["-1", "x", True, "1.5"])
def test_expected_devices_option_rejects(bad: object) -> None:
    with pytest.raises(ValueError):
        parse_count(bad)


def test_the_source_serves_both_expectations(tmp_path: Path) -> None:
    script = write_replay_npu_smi(tmp_path, {"info": "info__910B3__25.5.1__1", "info -m": "info-m__910B3__25.5.1__1"})
    options = NpuSmiOptions(details=(), board=False, expected_devices=8, sysfs=str(TREES / "910B3-8card__written"))
    source = NpuSmiSource(options, CommandRunner(timeout=10), HealthRegistry(), command=(str(script),))
    asyncio.run(source.refresh_overview())
    text = exposition(ChipsCollector(), source.part())
    assert 'npu_expected_devices{source="config"} 8.0' in text
    assert 'npu_expected_devices{source="pci"} 8.0' in text
    assert 'npu_pci_functions{device_id="0xd802"} 8.0' in text
    assert "npu_devices 8.0" in text


def test_unset_means_no_series(tmp_path: Path) -> None:
    script = write_replay_npu_smi(tmp_path, {"info": "info__910B3__25.5.1__1", "info -m": "info-m__910B3__25.5.1__1"})
    options = NpuSmiOptions(details=(), board=False, sysfs=str(TREES / "no-ascend__written"))
    source = NpuSmiSource(options, CommandRunner(timeout=10), HealthRegistry(), command=(str(script),))
    asyncio.run(source.refresh_overview())
    text = exposition(ChipsCollector(), source.part())
    assert "npu_expected_devices{" not in text and "npu_pci_functions{" not in text
