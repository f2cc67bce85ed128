"""`once --simulate`: a simulated node shows its model's Ascend PCI functions (the simulator's
sysfs tree, exporter/simulator/pci.py), so the chips a scenario loses from npu-smi are still
expected (`npu_expected_devices{source="pci"}` above `npu_devices`: NPUMissing pages), a
healthy node's count equals its expectation, and a 310P card, whose chips per function are not
published, leaves the expectation unknown. A `npu_smi.sysfs` set by the user wins."""

from __future__ import annotations

import pytest

from exporter.cli import main
from tests.support.exposition import samples, value

QUIET = ["--log.level", "error", "--npu-smi.details=", "--no-npu-smi.board", "--no-hccn.enabled"]


def once(capsys, *args: str) -> dict:
    assert main(["once", *args, *QUIET]) == 0
    return samples(capsys.readouterr().out)


@pytest.mark.parametrize(
    ("model", "scenario", "listed", "expected", "functions"),
    [
        ("910b3", "healthy", 8, 8, {"0xd802": 8}),
        ("910b3", "degraded", 7, 8, {"0xd802": 8}),  # the last NPU is gone from npu-smi, not from PCI
        ("a3", "healthy", 16, 16, {"0xd803": 16}),  # every die is a function of its own
        ("a3", "degraded", 14, 16, {"0xd803": 16}),  # the last NPU's two dies
        ("310p-duo", "degraded", 6, None, {"0xd500": 4}),  # two chips share a card's function
    ],
)
def test_a_simulated_node_expects_its_models_chips(capsys, model, scenario, listed, expected, functions):
    found = once(capsys, "--simulate", scenario, "--simulate.model", model)
    assert value(found, "npu_devices") == listed
    pci = [v for (name, labels), v in found.items() if name == "npu_expected_devices" and ("source", "pci") in labels]
    assert pci == ([] if expected is None else [expected])
    served = {dict(labels)["device_id"]: v for (name, labels), v in found.items() if name == "npu_pci_functions"}
    assert served == functions


def test_the_users_sysfs_wins(capsys, tmp_path):
    found = once(capsys, "--simulate", "degraded", f"--npu-smi.sysfs={tmp_path}")
    assert value(found, "npu_devices") == 7
    assert not [key for key in found if key[0] in ("npu_expected_devices", "npu_pci_functions")]
