"""Ascend PCI functions in sysfs: an expectation of the chip count that does not come from npu-smi.

Read like node_exporter reads /sys, under a root directory (``npu_smi.sysfs``, default
``/sys``) so tests point it at a fixture tree: every ``bus/pci/devices/<address>/`` with
``vendor`` 0x19e5 (Huawei) and a ``class`` of processing accelerator (0x1200xx) is one Ascend
function. The kernel lists a function whether or not the driver brings its chip up, so a chip
npu-smi no longer (or never) lists still counts here (the layout: the kernel's
Documentation/ABI/testing/sysfs-bus-pci and Documentation/PCI/sysfs-pci.rst).

What a function is in chips depends on the model. One chip per function: Atlas 300 (310,
0xd100), 910 (0xd801), 910B (0xd802) and Atlas A3 (910_93, 0xd803), whose every die is a
function of its own (16 on an 8-card node); Huawei's CANN log-collection script counts each of
these models' chips as its `lspci` functions of that id. A 310P (0xd500) function is one chip
on an Atlas 300I Pro / 300V Pro and two on an Atlas 300I Duo, whose two chips share one Bus-Id
(info__310P3-300IDuo__24.1.rc2__1); Ascend 950 (0xd806) is not published. The expected chips
are served only when every Ascend function found has a known chip count; otherwise only the
count of functions is (set ``npu_smi.expected_devices`` on such nodes).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from exporter.core.errors import ReasonError
from exporter.core.inputfile import read_text_input

HUAWEI = 0x19E5
ACCELERATOR_CLASS = 0x12  # PCI base class "processing accelerators" (class 0x12SSPP)
# Chips per PCI function by device id, where one model carries one number (see the docstring).
CHIPS_PER_FUNCTION = {0xD100: 1, 0xD801: 1, 0xD802: 1, 0xD803: 1}
MAX_FUNCTIONS = 4096  # a bound on what is read (real hosts have a few hundred)
MAX_READ = 4096  # a sysfs attribute: the kernel reports every one as a page


@dataclass(frozen=True)
class PciCount:
    functions: tuple[tuple[str, int], ...]  # (device id as 0xd802, Ascend functions with it), sorted
    expected_chips: int | None  # chips the functions carry; None when a device id has no known count


def _hex(path: Path) -> int | None:
    """A sysfs attribute's hexadecimal number (read as every outside file is: core/inputfile.py)."""
    try:
        return int(read_text_input(path, MAX_READ).strip(), 16)
    except (ReasonError, ValueError):
        return None


def ascend_functions(root: Path) -> Counter[int] | None:
    """Ascend functions under ``root``/bus/pci/devices by device id; None when sysfs shows no PCI bus."""
    devices = root / "bus" / "pci" / "devices"
    try:
        entries = sorted(devices.iterdir())[:MAX_FUNCTIONS]
    except OSError:
        return None
    found: Counter[int] = Counter()
    for entry in entries:
        if _hex(entry / "vendor") != HUAWEI:
            continue
        klass = _hex(entry / "class")
        device = _hex(entry / "device")
        if klass is None or device is None or klass >> 16 != ACCELERATOR_CLASS:
            continue
        found[device] += 1
    return found


def pci_count(root: Path) -> PciCount | None:
    """The Ascend functions the host shows, or None when it shows none (no sysfs, a container
    without the PCI bus, a VM without passthrough): absence, never an expectation of 0."""
    found = ascend_functions(root)
    if not found:
        return None
    known = all(device in CHIPS_PER_FUNCTION for device in found)
    expected = sum(CHIPS_PER_FUNCTION[d] * n for d, n in found.items()) if known else None
    return PciCount(tuple((f"0x{d:04x}", n) for d, n in sorted(found.items())), expected)
