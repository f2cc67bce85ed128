"""Clock jumps. The exporter's own wall clock (NTP step, VM resume, an operator's `date -s`)
must not decide what is stale or expired: ages run on the monotonic clock, timestamps on
the wall clock. npu-smi's clock (the simulator's `clock=S` fault, CANN_SIM_TIME) must not
matter at all.

The exporter's clocks are injected in-process; npu-smi's is moved under a real exporter.
"""

from __future__ import annotations

import inspect
import io
import time

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from exporter.core.health import HealthRegistry
from exporter.core.runner import RunError, RunResult
from exporter.core.sampler import Sampler
from exporter.core.selfmetrics import StatusCollector, StatusPart
from exporter.core.source import Derived, Sampled
from exporter.hccn.source import HccnSource
from exporter.jobs.store import IngestStore
from exporter.jobs.validate import IngestLimits, parse_batch
from exporter.node.assembly import build_snapshot
from exporter.node.exposition import Exposition, Rendering
from exporter.node.publisher import Publisher
from exporter.npusmi.collector import ChipsCollector
from exporter.npusmi.options import NpuSmiOptions
from exporter.npusmi.part import DEVICES
from exporter.npusmi.source import NpuSmiSource
from exporter.pods.source import PodResourcesSource
from exporter.simulator.npusmi import SimOptions
from exporter.simulator.npusmi import run as simulate
from tests.support.exposition import value, values

HOUR = 3600.0
MAX_AGE = 30.0


class Clock:
    def __init__(self, start: float) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


class SimRunner:
    """The simulator answered in-process; ``failing`` kinds (e.g. {"usages"}) time out."""

    def __init__(self) -> None:
        self.failing: set[str] = set()

    async def run(self, argv, timeout=None, urgent=False) -> RunResult:
        args = list(argv)[1:]  # argv[0] is the npu-smi command
        kind = args[args.index("-t") + 1] if "-t" in args else "info"
        if kind in self.failing:
            raise RunError("timeout", f"{kind} did not finish")
        out = io.BytesIO()
        code = simulate(SimOptions(), args, out)
        return RunResult(tuple(args), code, out.getvalue().decode(), "", 0.01)


class Node:
    """An exporter's sampling and rendering with a fake wall clock and a fake monotonic clock.

    ``sampler.publish()`` is what the sampler does after every run and, on its own, every
    second: build the snapshot as of now.
    """

    def __init__(self) -> None:
        self.wall, self.mono, self.runner = Clock(1_780_000_000.0), Clock(10_000.0), SimRunner()
        self.health = HealthRegistry(clock=self.wall)
        options = NpuSmiOptions(details=("usages",), board=False, interval=10, detail_interval=10)
        self.source = NpuSmiSource(options, self.runner, self.health, max_age=MAX_AGE, clock=self.mono)
        exposition = Exposition([Rendering(ChipsCollector(), "devices"), Rendering(StatusCollector(), "status")])
        self.publisher = Publisher(exposition)
        devices = Sampled("devices", self.source)
        sources = {
            "devices": devices,
            "status": Derived("status", lambda s: StatusPart(self.health.statuses(), None, s.get(DEVICES).stale_chips)),
        }
        self.sampler = Sampler(
            self.source.tasks(),
            self.health,
            lambda ready: self.publisher.publish(build_snapshot(ready, sources)),
        )
        self.registry = CollectorRegistry()
        self.registry.register(exposition)

    def scrape(self) -> dict:
        text = generate_latest(self.registry).decode()
        return {(s.name, frozenset(s.labels.items())): s.value for f in text_string_to_metric_families(text) for s in f.samples}


def served(found: dict, name: str) -> int:
    return len(values(found, name, "npu"))


async def test_a_backward_wall_jump_does_not_keep_stale_details_alive():
    node = Node()
    await node.sampler.run_once()
    assert served(node.scrape(), "npu_aicpu_utilization_ratio") == 8
    node.runner.failing = {"usages"}
    node.wall.advance(-HOUR)  # before the fix: details "observed in the future", served for an hour
    node.mono.advance(MAX_AGE + 1)
    await node.sampler.run_once()  # the overview still reads fine; details time out
    found = node.scrape()
    assert served(found, "npu_aicore_utilization_ratio") == 8
    assert served(found, "npu_aicpu_utilization_ratio") == 0


async def test_a_forward_wall_jump_does_not_drop_fresh_data():
    node = Node()
    await node.sampler.run_once()
    node.wall.advance(HOUR)  # before the fix: every value looked an hour old, withheld
    node.mono.advance(1)
    node.sampler.publish()
    found = node.scrape()
    assert served(found, "npu_aicore_utilization_ratio") == 8 and served(found, "npu_aicpu_utilization_ratio") == 8
    assert value(found, "cann_exporter_stale_chips") == 0


async def test_a_stalled_sampler_ages_out_whatever_the_wall_clock_says():
    node = Node()
    await node.sampler.run_once()
    node.wall.advance(-HOUR)
    node.mono.advance(MAX_AGE + 1)  # no sample since: the data is too old to serve
    node.sampler.publish()  # the sampler's own republishing, with no task run
    found = node.scrape()
    assert served(found, "npu_aicore_utilization_ratio") == 0
    assert set(values(found, "npu_up", "npu").values()) == {0.0}
    assert value(found, "cann_exporter_stale_chips") == 8


async def test_timestamps_follow_the_wall_clock():
    node = Node()
    await node.sampler.run_once()
    node.wall.advance(-HOUR)
    node.mono.advance(10)
    await node.sampler.run_once()
    last = value(node.scrape(), "cann_exporter_source_last_success_timestamp_seconds", source="npu_smi_info")
    assert last == node.wall.now  # a unix time, for Prometheus: wall clock by definition


def test_ingest_ttl_runs_on_the_monotonic_clock():
    wall, mono = Clock(1_780_000_000.0), Clock(10_000.0)
    store = IngestStore(ttl=60, finished_ttl=10, clock=wall, age_clock=mono)
    body = b'{"job_name": "bert", "rank": 0, "steps": [{"duration": 0.2}]}'
    store.accept(parse_batch(body, IngestLimits(), wall()))
    wall.advance(2 * HOUR)  # before the fix: expired at once, counters reset
    assert len(store.part().ranks) == 1
    wall.advance(-4 * HOUR)  # before the fix: kept for hours past its TTL
    mono.advance(61)
    part = store.part()
    assert part.ranks == () and part.counters.expired == 1


def test_ages_use_the_monotonic_clock_by_default():
    for cls in (NpuSmiSource, HccnSource, PodResourcesSource):
        assert inspect.signature(cls).parameters["clock"].default is time.monotonic, cls
    assert IngestStore().age_clock is time.monotonic


@pytest.mark.e2e
def test_npu_smi_clock_jumps_do_not_matter(start):
    """npu-smi's clock starts in 2001 (CANN_SIM_TIME), jumps back to 1970, then to 2002."""
    exporter = start(
        "--simulate",
        "healthy",
        "--npu-smi.interval",
        "1s",
        "--npu-smi.timeout",
        "3s",
        "--npu-smi.details=usages",
        "--npu-smi.detail-interval",
        "1s",
        "--max-age",
        "15s",
        env={"CANN_SIM_TIME": "1000000000"},
    )  # max-age: room for slow rounds on a loaded machine
    exporter.wait_for(lambda f: served(f, "npu_aicpu_utilization_ratio") == 8)
    for jump in ("clock=-1000000000", "clock=31536000"):
        exporter.fault(jump)
        before = exporter.metrics()

        def ran_since(f: dict, source: str, n: int, before: dict = before) -> bool:
            key = ("cann_exporter_source_runs_total", frozenset({("source", source)}))
            return f[key] >= before[key] + n

        found = exporter.wait_for(lambda f: ran_since(f, "npu_smi_info", 2) and ran_since(f, "npu_smi_details", 2))
        assert served(found, "npu_aicore_utilization_ratio") == 8 and served(found, "npu_aicpu_utilization_ratio") == 8
        assert value(found, "cann_exporter_source_success", source="npu_smi_info") == 1
        assert value(found, "cann_exporter_source_success", source="npu_smi_details") == 1
