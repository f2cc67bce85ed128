"""The health and interconnect queries through NpuSmiSource and a real npu-smi subprocess
(a replay of real fixtures): values reach the chip, "does not support querying" is remembered
per type and card until the inventory changes, and it is never a failure."""

from __future__ import annotations

from exporter.core.health import HealthRegistry
from exporter.core.runner import CommandRunner
from exporter.npusmi.options import NpuSmiOptions
from exporter.npusmi.queries import HARDWARE, HCCS_BW
from exporter.npusmi.source import NpuSmiSource
from tests.support.replay import calls, write_replay_npu_smi

# A one-chip card (NPU 0, chip 0): the 310B4 overview.
INFO = {"info": "info__310B4__23.0.0__1", "info -m": "info-m__910A__23.0.x__1"}
SPOD_A3_LINES = "\tSDID                           : 167772160\n\tSuper Pod Size                 : 384\n\tSuper Pod ID                   : 0\n\tServer Index                   : 40\n"


def source(npu_smi, **options) -> NpuSmiSource:
    opts = NpuSmiOptions(board=False, **options)
    return NpuSmiSource(opts, CommandRunner(timeout=20), HealthRegistry(), command=(str(npu_smi),))


async def test_values_reach_the_chip_and_unsupported_types_are_asked_once(tmp_path):
    spod = tmp_path / "spod.txt"
    spod.write_text(SPOD_A3_LINES)
    replies = {
        **INFO,
        "info -t volt -i 0 -c 0": "info-t-volt__310B__unknown__2",
        "info -t sensors -i 0 -c 0": "info-t-sensors__950__unknown__1",
        "info -t sio-info -i 0 -c 0": "info-t-sio-info__950__unknown__1",
        "info -t pcie-err -i 0 -c 0": "info-t-pcie-err__310B__unknown__1__unsupported",
        "info -t err-count -i 0 -c 0": "info-t-err-count__310B__unknown__1__unsupported",
        "info -t hccs -i 0 -c 0": ("info-t-pcie-err__310B__unknown__1__unsupported", 0),
        "info -t spod-info -i 0 -c 0": spod,
    }
    npu_smi = write_replay_npu_smi(tmp_path, replies)
    src = source(npu_smi, details=("volt", "pcie-err", "sensors", "sio-info", "hccs", "spod-info"))
    await src.refresh_overview()
    await src.refresh_group(HARDWARE)
    (chip,) = src.part().chips
    assert chip.voltage_volts == 0.80
    assert chip.sensor_temperatures == (("soc_max", 67.0), ("ndie", 65.0))
    assert chip.hbm_temperature_celsius == 63.0  # the sensors' HBM reading: one source
    assert chip.sio_errors == (("tx", 0), ("rx", 0))
    assert chip.pcie_errors == () and chip.hccs_links == ()
    assert chip.superpod is not None and (chip.superpod.sdid, chip.superpod.server_index) == (167772160, 40)
    status = src.health[HARDWARE.task].status()
    assert status.success and dict(status.errors) == {}

    # The next round asks only what the card answers.
    before = len(calls(tmp_path))
    await src.refresh_group(HARDWARE)
    asked = calls(tmp_path)[before:]
    assert sorted(asked) == ["info -t sensors -i 0 -c 0", "info -t sio-info -i 0 -c 0", "info -t volt -i 0 -c 0"]
    assert src.health[HARDWARE.task].status().success


async def test_a_new_inventory_asks_again(tmp_path):
    replies = {**INFO, "info -t volt -i 0 -c 0": "info-t-pcie-err__310B__unknown__1__unsupported"}
    src = source(write_replay_npu_smi(tmp_path, replies), details=("volt",))
    await src.refresh_overview()
    await src.refresh_group(HARDWARE)
    await src.refresh_group(HARDWARE)
    assert calls(tmp_path).count("info -t volt -i 0 -c 0") == 1
    # Another driver (the same chip in another table) is a new inventory: the type is asked again.
    write_replay_npu_smi(tmp_path, {**replies, "info": "info__310P3__22.0.0-drv22.0.2__1"})
    await src.refresh_overview()
    await src.refresh_group(HARDWARE)
    assert calls(tmp_path).count("info -t volt -i 0 -c 0") == 2


async def test_a_failing_type_is_a_failure_and_is_asked_again(tmp_path):
    replies = {**INFO, "info -t volt -i 0 -c 0": ("error-dcmi-init-8005__container__unknown__1", 255)}
    src = source(write_replay_npu_smi(tmp_path, replies), details=("volt",))
    await src.refresh_overview()
    for _ in range(2):
        await src.refresh_group(HARDWARE)
    status = src.health[HARDWARE.task].status()
    assert not status.success and "dcmi_init_failed" in dict(status.errors)
    assert calls(tmp_path).count("info -t volt -i 0 -c 0") == 2


async def test_hccs_bw_runs_one_chip_at_a_time(tmp_path):
    # A 2-chip card whose hccs-bw call takes 0.3 s: the group never holds two runner slots.
    table = tmp_path / "bw.txt"
    table.write_text("hccs link    tx_bandwidth(GB/S)    rx_bandwidth(GB/S)\n0    1.5    2.0\ntotal 1.5 2.0\n")
    script = tmp_path / "npu-smi"
    inner = write_replay_npu_smi(tmp_path, {"info": "info__310P3-300IDuo__24.1.rc2__1"})
    inner.rename(tmp_path / "inner")
    script.write_text(
        "#!/bin/sh\n"
        f'case "$*" in *hccs-bw*) echo start >> {tmp_path}/bw.log; sleep 0.3; cat {table}; echo end >> {tmp_path}/bw.log ;;\n'
        f'  *) exec {tmp_path}/inner "$@" ;; esac\n'
    )
    script.chmod(0o755)
    src = source(script, details=("hccs-bw",), hccs_bw_time=0.5, max_concurrency=4)
    await src.refresh_overview()
    await src.refresh_group(HCCS_BW)
    log = (tmp_path / "bw.log").read_text().split()
    chips = len(src.part().chips)
    assert chips >= 2 and log == ["start", "end"] * chips  # never two at once
    assert all(chip.hccs_bandwidth == ((0, "tx", 1.5e9), (0, "rx", 2.0e9)) for chip in src.part().chips)
    assert all(" -time 500" in c for c in calls(tmp_path) if "hccs-bw" in c)
