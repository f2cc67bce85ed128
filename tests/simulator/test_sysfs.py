"""Each model's sysfs tree (exporter/simulator/sysfs, shipped with the package): what
simulator/pci.py makes of the model, one Ascend PCI function per Bus-Id `npu-smi info` prints
on the healthy node, read by the exporter's PCI count as the model's chips."""

from __future__ import annotations

from pathlib import Path

import pytest

from exporter.node.simulate import sysfs_tree
from exporter.npusmi.pci import pci_count
from exporter.simulator import pci, render
from exporter.simulator.models import MODEL_NAMES, MODELS
from exporter.simulator.scenarios import simulate


def shipped(root: Path) -> dict[str, str]:
    return {p.relative_to(root).as_posix(): p.read_text(encoding="ascii") for p in root.rglob("*") if p.is_file()}


def test_the_shipped_trees_are_the_models():
    """A changed model fails here: `python -m exporter.simulator.pci` writes the trees again."""
    assert {p.name for p in pci.TREES.iterdir()} == set(MODEL_NAMES)
    for name, model in MODELS.items():
        assert shipped(pci.TREES / name) == pci.tree(model), name


def test_written_trees_equal_the_shipped_ones(tmp_path: Path):
    assert pci.main([str(tmp_path)]) == 0
    assert shipped(tmp_path) == shipped(pci.TREES)


@pytest.mark.parametrize("name", MODEL_NAMES)
def test_one_function_per_bus_id_npu_smi_prints(name: str):
    overview = render.render_info(simulate(MODELS[name], "healthy", 1_780_000_000.0))
    buses = {bus.lower() for bus in pci.functions(MODELS[name])}
    printed = {cell.strip().lower() for line in overview.splitlines() for cell in line.split("|") if cell.strip().startswith("0000:")}
    assert buses == printed


@pytest.mark.parametrize(
    ("name", "functions", "expected"),
    [("910b3", (("0xd802", 8),), 8), ("a3", (("0xd803", 16),), 16), ("310p-duo", (("0xd500", 4),), None)],
)
def test_the_exporter_counts_the_models_chips(name: str, functions: tuple, expected: int | None):
    count = pci_count(pci.TREES / name)
    assert count is not None and (count.functions, count.expected_chips) == (functions, expected)
    assert len(MODELS[name].chips) == expected or expected is None


@pytest.mark.parametrize("name", MODEL_NAMES)
def test_the_exporter_finds_each_tree_without_the_simulator(name: str):
    assert Path(sysfs_tree(name)) == (pci.TREES / name).resolve()
