"""npu_energy_joules_total: the simulator's power integrated over the source's reads.

Time is driven by hand: the source's monotonic clock and the simulator's clock (its `--time`)
advance together, so ten minutes of samples take no wall-clock wait. The simulator answers
in-process through the same parsers and source as a real npu-smi.
"""

from __future__ import annotations

import io

from exporter.core.health import HealthRegistry
from exporter.core.runner import RunError, RunResult
from exporter.npusmi import parse as npusmi_parse
from exporter.npusmi.collector import ChipsCollector
from exporter.npusmi.energy import EnergyIntegrator
from exporter.npusmi.options import NpuSmiOptions
from exporter.npusmi.source import NpuSmiSource
from exporter.simulator.npusmi import SimOptions
from exporter.simulator.npusmi import run as simulate
from tests.support.exposition import render, value, values

T0 = 1_780_000_000.0  # the simulator's epoch for mono 0
WINDOW = 600.0  # ten minutes


class SimClockRunner:
    """The simulator at the time ``now`` says; ``failing`` makes every call time out."""

    def __init__(self, model: str, scenario: str) -> None:
        self.now = 0.0
        self.model, self.scenario = model, scenario
        self.failing = False

    def __call__(self) -> float:
        return self.now

    async def run(self, argv, timeout=None, urgent=False) -> RunResult:
        if self.failing:
            raise RunError("timeout", "npu-smi did not finish")
        args = list(argv)[1:]
        return RunResult(tuple(args), 0, self.answer(args), "", 0.01)

    def answer(self, args: list[str]) -> str:
        out = io.BytesIO()
        assert simulate(SimOptions(model=self.model, scenario=self.scenario, time=T0 + self.now), args, out) == 0
        return out.getvalue().decode()

    def power(self, at: float) -> dict[tuple[int, int], float]:
        """The power `npu-smi info` prints at ``at`` (310P: the card's `-t common`), by (npu, chip)."""
        self.now, saved = at, self.now
        try:
            return _powers(self)
        finally:
            self.now = saved


def _powers(runner: SimClockRunner) -> dict[tuple[int, int], float]:
    table = npusmi_parse.parse_info(runner.answer(["info"]))
    out = {(c.npu_id, c.chip_id): c.power_watts for c in table.chips if c.power_watts is not None}
    if not out:  # 310P: the MCU power of each card, on its first chip
        for npu in sorted({c.npu_id for c in table.chips}):
            common = npusmi_parse.parse_common(runner.answer(["info", "-t", "common", "-i", str(npu)]), npu_id=npu)
            out[(npu, 0)] = common.mcu_power_watts
    return out


def _source(runner: SimClockRunner, interval: float = 10.0, detail_interval: float = 60.0) -> NpuSmiSource:
    options = NpuSmiOptions(details=("common",), board=False, interval=interval, detail_interval=detail_interval)
    return NpuSmiSource(options, runner, HealthRegistry(clock=lambda: T0 + runner.now), clock=runner)


async def _sample(runner: SimClockRunner, source: NpuSmiSource, until: float) -> list[dict]:
    """The source's schedule from now to ``until``: overview every interval, details every detail
    interval; the exposition after each overview."""
    scrapes = []
    next_detail = runner.now
    while runner.now <= until:
        await source.refresh_overview()
        if runner.now >= next_detail:
            await source.refresh_details()
            next_detail += source.options.detail_interval
        scrapes.append(render(ChipsCollector(), source.part()))
        runner.now += source.options.interval
    return scrapes


def _energy(scrape: dict) -> dict[str, float]:
    return {f"{npu}/{chip}": v for (n, ls), v in scrape.items() if n == "npu_energy_joules_total" for npu, chip in [_npu_chip(ls)]}


def _npu_chip(labels: frozenset) -> tuple[str, str]:
    found = dict(labels)
    return found["npu"], found["chip"]


def _served_mean_power(scrapes: list[dict]) -> dict[str, float]:
    """The mean of the served npu_power_watts over the scrapes (what avg_over_time would say)."""
    sums: dict[str, list[float]] = {}
    for scrape in scrapes:
        for (n, ls), v in scrape.items():
            if n == "npu_power_watts":
                npu, chip = _npu_chip(ls)
                sums.setdefault(f"{npu}/{chip}", []).append(v)
    return {k: sum(v) / len(v) for k, v in sums.items()}


async def _rate_against_power(model: str, scenario: str, truth_step: float | None) -> None:
    runner = SimClockRunner(model, scenario)
    source = _source(runner)
    scrapes = await _sample(runner, source, WINDOW)
    first, last = _energy(scrapes[0]), _energy(scrapes[-1])
    assert first and set(first) == set(last), (first, last)
    assert all(v == 0.0 for v in first.values())  # one read: nothing integrated yet
    served = _served_mean_power(scrapes)
    for chip, joules in last.items():
        rate = joules / WINDOW
        assert abs(rate - served[chip]) <= 0.05 * served[chip], (chip, rate, served[chip])
    if truth_step is not None:  # the power the simulator prints every truth_step seconds
        truth: dict[tuple[int, int], list[float]] = {}
        t = 0.0
        while t <= WINDOW:
            for key, watts in runner.power(t).items():
                truth.setdefault(key, []).append(watts)
            t += truth_step
        for (npu, chip), reads in truth.items():
            mean = sum(reads) / len(reads)
            rate = last[f"{npu}/{chip}"] / WINDOW
            assert abs(rate - mean) <= 0.05 * mean, (npu, chip, rate, mean)
    for scrape_before, scrape_after in zip(scrapes, scrapes[1:]):  # monotonic
        before, after = _energy(scrape_before), _energy(scrape_after)
        assert all(after[k] >= before[k] for k in before)
    assert value(scrapes[-1], "cann_exporter_energy_skipped_intervals_total") == 0


async def test_energy_rate_equals_the_served_power_over_ten_minutes():
    await _rate_against_power("910b3", "healthy", truth_step=2.0)


async def test_energy_rate_follows_a_sawtooth_load():
    await _rate_against_power("910b3", "sawtooth", truth_step=None)


async def test_a3_energy_is_on_the_first_die():
    runner = SimClockRunner("a3", "healthy")
    scrapes = await _sample(runner, _source(runner), 60.0)
    energy = _energy(scrapes[-1])
    assert energy and all(key.endswith("/0") for key in energy)  # die 1 prints "-": no power, no energy
    assert all(v > 0 for v in energy.values())


async def test_310p_card_power_is_integrated_on_the_card_first_chip():
    runner = SimClockRunner("310p-duo", "healthy")
    source = _source(runner, interval=10.0, detail_interval=10.0)
    scrapes = await _sample(runner, source, WINDOW)
    energy = _energy(scrapes[-1])
    assert energy and all(key.endswith("/0") for key in energy), energy
    served = _served_mean_power(scrapes)
    for chip, joules in energy.items():
        assert abs(joules / WINDOW - served[chip]) <= 0.05 * served[chip], (chip, joules / WINDOW, served[chip])


async def test_a_gap_is_skipped_and_counted_and_the_counter_never_drops():
    runner = SimClockRunner("910b3", "healthy")
    source = _source(runner)
    await _sample(runner, source, 30.0)
    before = render(ChipsCollector(), source.part())
    runner.failing = True
    for _ in range(6):  # a minute of failed reads
        await source.refresh_overview()
        runner.now += 10.0
    runner.failing = False
    await source.refresh_overview()
    after = render(ChipsCollector(), source.part())
    assert _energy(after) == _energy(before)  # the minute without reads added nothing
    assert value(after, "cann_exporter_energy_skipped_intervals_total") == len(values(after, "npu_power_watts", "npu"))
    runner.now += 10.0
    await source.refresh_overview()
    grown = _energy(render(ChipsCollector(), source.part()))
    assert all(grown[k] > v for k, v in _energy(after).items())  # integrating again from the read after the gap


def test_trapezoid_and_bad_reads():
    energy = EnergyIntegrator()
    assert energy.joules("c") is None
    energy.add("c", 0.0, 100.0, period=10.0)
    energy.add("c", 10.0, 200.0, period=10.0)
    assert energy.joules("c") == 1500.0
    for bad in (None, float("nan"), float("inf"), -5.0):
        energy.add("c", 20.0, bad, period=10.0)
    energy.add("c", 10.0, 999.0, period=10.0)  # the same instant again: nothing elapsed
    energy.add("c", 20.0, 0.0, period=10.0)  # 10 s from the 999 W read at 10.0
    assert energy.joules("c") == 1500.0 + 4995.0
    energy.add("c", 51.0, 0.0, period=10.0)  # 31 s > 3 periods: skipped
    assert energy.joules("c") == 6495.0 and energy.skipped_intervals == 1 and energy.skipped_seconds == 31.0
