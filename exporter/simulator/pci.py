"""The Ascend PCI functions of a simulated node, as sysfs lists them.

A real node's kernel lists every Ascend PCI function under /sys/bus/pci/devices, whether or
not the driver brings its chip up; the exporter counts them for the chips it expects
(exporter/npusmi/pci.py, `npu_expected_devices{source="pci"}`). Each model here has that tree
as its healthy node shows it: one function per Bus-Id `npu-smi info` prints (a 910B chip, an
A3 die, a 300I Duo card whose two chips share one Bus-Id), in sysfs's lower case, each with
the `vendor`, `device`, `class`, `subsystem_vendor` and `subsystem_device` files the kernel
writes (one hexadecimal line each). A scenario that loses a chip loses it from npu-smi only:
PCI still shows it, as on a node whose chip fell off the driver.

The trees ship with the package under sysfs/<model>/ (plain directories where the kernel has
symlinks into /sys/devices), so the exporter reads them without importing the simulator;
`python -m exporter.simulator.pci` writes them again from the models, and
tests/simulator/test_sysfs.py keeps them equal.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from exporter.simulator.models import MODELS, NodeModel

TREES = Path(__file__).with_name("sysfs")  # one tree per model, by its name
DEVICES = Path("bus", "pci", "devices")
VENDOR = 0x19E5  # Huawei
ACCELERATOR_CLASS = 0x120000  # processing accelerator


def functions(model: NodeModel) -> tuple[str, ...]:
    """The PCI addresses of the model's Ascend functions, in enumeration order."""
    return tuple(dict.fromkeys(chip.bus_id.lower() for chip in model.chips))


def tree(model: NodeModel) -> dict[str, str]:
    """Every file of the model's tree: its path under the sysfs root (`/` separated) -> its text."""
    board = model.board
    files = {
        "vendor": VENDOR,
        "device": board.pci_device_id,
        "class": ACCELERATOR_CLASS,
        "subsystem_vendor": board.subsystem_vendor_id,
        "subsystem_device": board.subsystem_device_id,
    }
    width = {"class": 6}
    return {
        (DEVICES / address / name).as_posix(): f"0x{value:0{width.get(name, 4)}x}\n"
        for address in functions(model)
        for name, value in files.items()
    }


def write(root: Path) -> None:
    """Every model's tree under ``root``/<model>, replacing what was there."""
    for name, model in MODELS.items():
        shutil.rmtree(root / name, ignore_errors=True)
        for path, text in tree(model).items():
            target = root / name / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="ascii")


def main(argv: list[str] | None = None) -> int:
    """`python -m exporter.simulator.pci [DIR]`: write the trees (default: the shipped ones)."""
    args = sys.argv[1:] if argv is None else argv
    write(Path(args[0]) if args else TREES)
    return 0


if __name__ == "__main__":
    sys.exit(main())
