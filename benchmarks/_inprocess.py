"""The exporter's sample-and-render path inside this process, npu-smi answered from canned text.

``build()`` assembles the real exporter (exporter.node.assembly.assemble: sources, sampler,
collectors, registry) and swaps its npu-smi runner for ``CannedNpuSmi``, which has the
CommandRunner interface (``async run(argv) -> RunResult``) and answers from simulator text
rendered once per time point (model a3, 4 processes per die: 16 dies, 64 processes).
``cycle()`` is one sample cycle as the sampler runs it, plus one scrape's render.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from prometheus_client import generate_latest

from exporter.app.settings import build_settings
from exporter.core.runner import RunResult
from exporter.node.assembly import Node, assemble
from exporter.npusmi.source import NpuSmiSource
from exporter.simulator.models import get_model
from exporter.simulator.npusmi import Result, execute, parse_command
from exporter.simulator.scenarios import simulate

T0 = 1_800_000_000.0  # a fixed instant, so every run renders the same texts


class CannedNpuSmi:
    """npu-smi answered from simulator text rendered once per (time point, argv)."""

    def __init__(
        self, model: str = "a3", processes_per_die: int = 4, scenario: str = "healthy", points: int = 10, step: float = 1.0
    ) -> None:
        node = get_model(model, processes_per_die)
        self.states = [simulate(node, scenario, T0 + i * step) for i in range(points)]
        self.point = 0  # which time point answers; the caller advances it per cycle
        self.calls = 0
        self._cache: dict[tuple[int, tuple[str, ...]], tuple[int, str]] = {}

    async def run(self, argv: Sequence[str], timeout: float | None = None, *, urgent: bool = False) -> RunResult:
        self.calls += 1
        args = tuple(argv[1:])  # drop the "npu-smi" the source puts first
        key = (self.point % len(self.states), args)
        answer = self._cache.get(key)
        if answer is None:
            command = parse_command(args)
            result = command if isinstance(command, Result) else execute(command, self.states[key[0]])
            answer = self._cache[key] = (result.code, result.text)
        return RunResult(tuple(argv), answer[0], answer[1], "", 0.0)


def build(**flags: Any) -> tuple[Node, CannedNpuSmi]:
    settings = build_settings(flags={"npu_smi.path": "npu-smi", **flags})
    exporter = assemble(settings)
    fake = CannedNpuSmi()
    npu_smi(exporter).runner = fake  # the one substitution: no subprocess, same source code path
    return exporter, fake


def npu_smi(exporter: Node) -> NpuSmiSource:
    source = exporter.source(NpuSmiSource)
    assert source is not None
    return source


async def cycle(exporter: Node, fake: CannedNpuSmi, index: int) -> bytes:
    """refresh_overview + refresh_details + publish + a registry render (text format 0.0.4)."""
    fake.point = index
    await npu_smi(exporter).refresh_overview()
    await npu_smi(exporter).refresh_details()
    exporter.sampler.publish()
    return generate_latest(exporter.registry)
