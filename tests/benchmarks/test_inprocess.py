"""The in-process harness of the CPU, hot-spot and RSS benchmarks keeps up with the runner it
stands in for: it drives the real npu-smi source through a whole cycle."""

from __future__ import annotations

import inspect

from benchmarks._inprocess import CannedNpuSmi, build, cycle
from exporter.core.runner import CommandRunner


def test_the_canned_npu_smi_takes_every_argument_the_runner_takes():
    assert inspect.signature(CannedNpuSmi.run).parameters.keys() == inspect.signature(CommandRunner.run).parameters.keys()


async def test_a_cycle_samples_and_renders_every_die():
    exporter, fake = build(**{"collector.network": False})
    for index in range(2):
        text = (await cycle(exporter, fake, index)).decode()
    dies = {line.split('device="')[1].split('"')[0] for line in text.splitlines() if line.startswith("npu_aicore_utilization_ratio{")}
    assert len(dies) == 16 and fake.calls > 2
