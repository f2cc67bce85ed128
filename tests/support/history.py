"""31 days of cann-exporter series with known patterns, as OpenMetrics text for
`promtool tsdb create-blocks-from openmetrics`.

Coarse samples every 15 minutes up to two hours before ``now``, then every 30 s (a real
scrape interval) so the last hour also shows swings inside the 10 min windows of
NPUUtilizationUnstable. Every number a test checks is a constant here.

Nodes (4 chips each, 64 GiB HBM per chip):
- node-a: busy (88/90/92/90%), namespace team-a; HBM filling linearly 20% -> 80% over the window;
  job `bert` ranks 0 and 1 (0.30 s iterations until one day ago, 0.25 s since; 95% of wall
  time in iterations; known phase split) and a profile of bert rank 0.
- node-b: 40% on every chip in use; chips 2 and 3 idle (nothing on them, 0%) until 15 days
  ago; namespace team-b; job `slow` rank 0 (0.5 s iterations, 0.6 s since one day ago: a
  regression; 70% busy; 35% memory copies) and a profile with one hot operator.
- model FLOPs utilization: bert 46% (PaLM's figure), slow 20% (below the band), stuck none (no
  FLOPs declared).
- node-c: chip 0 idle the whole time (no process, no pod); chip 1 a saw-tooth (30% / 100%
  alternating samples); chips 2 and 3 at 96%; namespace team-c; no HBM series at all (a
  driver that does not report it); job `stuck` rank 0, whose last iteration was one hour
  before ``now``, and a profile of it made two days before ``now`` (older than the day the
  profile alerts accept) with a hot operator.

The profiles of bert and slow are fresh: their last update is every sample's own time.

Goodput (npu_job_goodput_seconds_total, npu_job_badput_seconds_total{kind}, counters from the
jobs' start, each a constant share of the wall time the job ran: Job.badput, the rest goodput):
bert 90.25% goodput (data_wait 4.75%, checkpoint_save 3%, idle 2%); slow 63% (checkpoint_save
15%, idle 10%, data_wait 7%, lost_progress 3%, downtime 2%; one restart, two days ago); stuck 81%
(idle 10%, data_wait 9%), its counters still since its last iteration.

Energy (`npu_energy_joules_total`, a counter from the history's start): a chip draws IDLE_WATTS
with nothing on it, else its WATTS (node-a 300 W, node-b 200 W, node-c chip 1 250 W and chips 2
and 3 350 W), so every kWh a test checks is watts x hours.

Owners (npu_chip_owner_info, labelled as the owner source serves them, on three chips): a
Kubernetes pod holds node-a chip 0 the whole time (88%); a Docker container node-b chip 3 the
whole time, idle (0%) until node-b's growth 15 days ago; a Slurm job node-c chip 0 (idle, 0%)
for the last 10 days (SLURM_SINCE). Every other chip has no owner series.

ECC isolated pages (HBM; node-c reports none): node-a chip 3 has had 2 single-bit pages the
whole time (old, nothing new); node-b chip 0 one double-bit page since ten days ago; node-b
chip 1 one single-bit page, and a second since half an hour ago; every other chip 0.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from exporter.owners.part import slurm_owner

DAY, HOUR = 86400, 3600
HISTORY_DAYS = 31
COARSE, FINE, FINE_SPAN = 900, 30, 2 * HOUR
GIB = 1 << 30
HBM_TOTAL = 64 * GIB
JOBS_SINCE = 3 * DAY  # jobs and profiles exist for the last 3 days only
CHANGE_AGO = DAY  # iteration times change one day before now
NODE_B_GROWTH_AGO = 15 * DAY  # node-b chips 2, 3 in use from then on
STALL_AGO = HOUR

NODE_A_UTIL = (0.88, 0.90, 0.92, 0.90)
NODE_B_UTIL = 0.40
NODE_C_BUSY = 0.96
SAW = (0.30, 1.00)
HBM_FILL = (0.20, 0.80)  # node-a, start -> now
HBM_OTHER = 0.50
IDLE_WATTS = 60.0
PRICE_PER_KWH = 0.25  # the 30-day report's --price-per-kwh
WATTS = {"node-a:9435": (300.0,) * 4, "node-b:9435": (200.0,) * 4, "node-c:9435": (IDLE_WATTS, 250.0, 350.0, 350.0)}
# (instance, npu) -> {type: (pages before, pages after, seconds before now of the change)}
PAGES = {
    ("node-a:9435", 3): {"single_bit": (2, 2, 0)},
    ("node-b:9435", 0): {"double_bit": (0, 1, 10 * DAY)},
    ("node-b:9435", 1): {"single_bit": (1, 2, HOUR // 2)},
}


@dataclass(frozen=True)
class Job:
    name: str
    instance: str
    ranks: tuple[int, ...]
    before: float  # iteration seconds until CHANGE_AGO
    after: float  # iteration seconds since
    busy: float  # share of wall time inside iterations
    samples_per_iteration: int
    phases: dict[str, float] = field(default_factory=dict)
    stops_ago: float | None = None
    mfu: float | None = None  # npu_job_model_flops_utilization_ratio; None: no FLOPs declared (no series)
    badput: dict[str, float] = field(default_factory=dict)  # kind -> share of the wall time run; the rest is goodput
    restarts_ago: tuple[float, ...] = ()  # npu_job_disruptions_total steps up this long before now

    @property
    def goodput(self) -> float:
        return 1.0 - sum(self.badput.values())


BERT = Job(
    "bert",
    "node-a:9435",
    (0, 1),
    0.30,
    0.25,
    0.95,
    32,
    {"data": 0.05, "h2d": 0.10, "compute": 0.70, "communication": 0.08, "d2h": 0.02, "framework": 0.05},
    mfu=0.46,
    badput={"data_wait": 0.95 * 0.05, "checkpoint_save": 0.03, "idle": 0.02},
)
SLOW = Job(
    "slow",
    "node-b:9435",
    (0,),
    0.5,
    0.6,
    0.70,
    16,
    {"data": 0.10, "h2d": 0.30, "compute": 0.35, "communication": 0.05, "d2h": 0.05, "framework": 0.15},
    mfu=0.20,
    badput={"data_wait": 0.70 * 0.10, "checkpoint_save": 0.15, "lost_progress": 0.03, "downtime": 0.02, "idle": 0.10},
    restarts_ago=(2 * DAY,),
)
STUCK = Job(
    "stuck",
    "node-c:9435",
    (0,),
    1.0,
    1.0,
    0.90,
    8,
    {"compute": 0.9, "data": 0.1},
    stops_ago=STALL_AGO,
    badput={"data_wait": 0.90 * 0.10, "idle": 0.10},
)
JOBS = (BERT, SLOW, STUCK)

PROFILES = {
    ("node-a:9435", "bert"): {
        "step_duration_seconds": 0.25,
        "compute_ratio": 0.90,
        "communication_ratio": 0.04,
        "idle_ratio": 0.06,
        "memcpy_ratio": 0.05,
        "framework_overhead_ratio": 0.04,
        "top3_operator_ratio": 0.75,
        "max_operator_ratio": 0.45,
    },
    ("node-b:9435", "slow"): {
        "step_duration_seconds": 0.6,
        "compute_ratio": 0.50,
        "communication_ratio": 0.05,
        "idle_ratio": 0.20,
        "memcpy_ratio": 0.35,
        "framework_overhead_ratio": 0.12,
        "top3_operator_ratio": 0.90,
        "max_operator_ratio": 0.80,
    },
}
PROFILES[("node-c:9435", "stuck")] = {
    "step_duration_seconds": 1.0,
    "compute_ratio": 0.40,
    "communication_ratio": 0.05,
    "idle_ratio": 0.55,
    "memcpy_ratio": 0.40,
    "framework_overhead_ratio": 0.30,
    "top3_operator_ratio": 0.95,
    "max_operator_ratio": 0.90,
}
OPERATORS = {
    ("node-a:9435", "bert"): (("MatMul", 0.45), ("Conv2D", 0.20), ("Add", 0.10), ("Softmax", 0.05)),
    ("node-b:9435", "slow"): (("TransData", 0.80), ("MatMul", 0.05), ("Add", 0.05)),
    ("node-c:9435", "stuck"): (("MatMul", 0.90),),
}
STALE_PROFILE_AGO = 2 * DAY  # stuck's profile was made then; the others at every sample

PROFILE_METRICS = {
    "step_duration_seconds": "npu_profile_step_duration_seconds",
    "compute_ratio": "npu_profile_compute_ratio",
    "communication_ratio": "npu_profile_communication_ratio",
    "idle_ratio": "npu_profile_idle_ratio",
    "memcpy_ratio": "npu_profile_memcpy_ratio",
    "framework_overhead_ratio": "npu_profile_framework_overhead_ratio",
    "top3_operator_ratio": "npu_profile_top3_operator_ratio",
    "max_operator_ratio": "npu_profile_max_operator_ratio",
}


SLURM_SINCE = 10 * DAY  # the Slurm job holds node-c chip 0 from then on


@dataclass(frozen=True)
class Owner:
    instance: str
    npu: int
    runtime: str
    owner: str
    labels: tuple[tuple[str, str], ...]  # the runtime's own labels (the others are empty: absent)
    since_ago: int | None = None  # holds the chip from this long before now; None: the whole history


CONTAINER_ID = "4f3c2a1b9d8e7f6a5b4c3d2e1f0a9b8c7d6e5f4a3b2c1d0e9f8a7b6c5d4e3f2a"
OWNERS = (
    Owner(
        "node-a:9435",
        0,
        "kubernetes",
        "team-a/team-a-trainer",
        (("namespace", "team-a"), ("pod", "team-a-trainer"), ("container", "9d0c" * 16)),
    ),
    Owner("node-b:9435", 3, "docker", "llm-serve", (("container", CONTAINER_ID),)),
    Owner("node-c:9435", 0, "slurm", slurm_owner("4242", "alice"), (("job_id", "4242"), ("user", "alice")), SLURM_SINCE),
)


@dataclass(frozen=True)
class Chip:
    instance: str
    npu: int
    namespace: str | None
    util: Callable[[int, int], float]  # (t, sample index) -> ratio
    in_use: Callable[[int], bool]
    hbm: Callable[[int], float | None]  # t -> used share (None: not reported)


def chips(now: int) -> list[Chip]:
    start = now - HISTORY_DAYS * DAY

    def fill(t: int) -> float:
        return HBM_FILL[0] + (HBM_FILL[1] - HBM_FILL[0]) * (t - start) / (now - start)

    def always(t: int) -> bool:
        return True

    def grown(t: int) -> bool:
        return t >= now - NODE_B_GROWTH_AGO

    out = [Chip("node-a:9435", i, "team-a", lambda t, k, u=u: u, always, fill) for i, u in enumerate(NODE_A_UTIL)]
    for i in range(4):
        use = always if i < 2 else grown
        out.append(Chip("node-b:9435", i, "team-b", lambda t, k, use=use: NODE_B_UTIL if use(t) else 0.0, use, lambda t: HBM_OTHER))
    # node-c reports no HBM (series missing)
    out.append(Chip("node-c:9435", 0, None, lambda t, k: 0.0, lambda t: False, lambda t: None))
    out.append(Chip("node-c:9435", 1, "team-c", lambda t, k: SAW[k % 2], always, lambda t: None))
    out += [Chip("node-c:9435", i, "team-c", lambda t, k: NODE_C_BUSY, always, lambda t: None) for i in (2, 3)]
    return out


def watts(chip: Chip, t: int) -> float:
    """The chip's power at ``t``: its WATTS in use, IDLE_WATTS otherwise."""
    return WATTS[chip.instance][chip.npu] if chip.in_use(t) else IDLE_WATTS


def sample_times(now: int) -> list[int]:
    start = now - HISTORY_DAYS * DAY
    fine_from = now - FINE_SPAN
    return list(range(start, fine_from, COARSE)) + list(range(fine_from, now + 1, FINE))


def _labels(**labels: object) -> str:
    return "{" + ",".join(f'{k}="{v}"' for k, v in labels.items()) + "}"


def _chip_labels(chip: Chip) -> dict[str, object]:
    return {"instance": chip.instance, "job": "cann-exporter", "npu": chip.npu, "chip": 0, "device": chip.npu}


def _family(name: str, kind: str, series: Iterator[str]) -> Iterator[str]:
    yield f"# TYPE {name} {kind}"
    yield from series


def _chip_families(now: int, times: list[int]) -> Iterator[str]:
    nodes = chips(now)

    def per_chip(metric: str, value: Callable[[Chip, int, int], float | None], **extra: Callable[[Chip], object]) -> Iterator[str]:
        for chip in nodes:
            labels = _labels(**_chip_labels(chip), **{k: f(chip) for k, f in extra.items()})
            for k, t in enumerate(times):
                v = value(chip, t, k)
                if v is not None:
                    yield f"{metric}{labels} {v!r} {t}"

    yield from _family("npu_aicore_utilization_ratio", "gauge", per_chip("npu_aicore_utilization_ratio", lambda c, t, k: c.util(t, k)))
    yield from _family(
        "npu_hbm_total_bytes", "gauge", per_chip("npu_hbm_total_bytes", lambda c, t, k: float(HBM_TOTAL) if c.hbm(t) is not None else None)
    )
    yield from _family(
        "npu_hbm_used_bytes",
        "gauge",
        per_chip("npu_hbm_used_bytes", lambda c, t, k: None if (u := c.hbm(t)) is None else round(u * HBM_TOTAL)),
    )
    yield from _family(
        "npu_process_memory_bytes",
        "gauge",
        per_chip(
            "npu_process_memory_bytes",
            lambda c, t, k: 30.0 * GIB if c.in_use(t) else None,
            pid=lambda c: 1000 + c.npu,
            process=lambda c: "python",
        ),
    )
    yield from _family(
        "npu_pod_info",
        "gauge",
        per_chip(
            "npu_pod_info",
            lambda c, t, k: 1.0 if c.namespace and c.in_use(t) else None,
            namespace=lambda c: c.namespace or "",
            pod=lambda c: f"{c.namespace}-trainer",
            container=lambda c: "main",
        ),
    )

    def owners() -> Iterator[str]:
        for o in OWNERS:
            labels = _labels(
                instance=o.instance,
                job="cann-exporter",
                npu=o.npu,
                chip=0,
                device=o.npu,
                runtime=o.runtime,
                owner=o.owner,
                **dict(o.labels),
            )
            since = now - o.since_ago if o.since_ago is not None else times[0]
            yield from (f"npu_chip_owner_info{labels} 1.0 {t}" for t in times if t >= since)

    yield from _family("npu_chip_owner_info", "gauge", owners())

    def energy() -> Iterator[str]:
        for chip in nodes:
            labels = _labels(**_chip_labels(chip))
            joules, before = 0.0, times[0]
            for t in times:
                joules += watts(chip, before) * (t - before)
                before = t
                yield f"npu_energy_joules_total{labels} {joules!r} {t}"

    yield from _family("npu_energy_joules", "counter", energy())

    def pages(kind: str) -> Callable[[Chip, int, int], float | None]:
        def value(chip: Chip, t: int, k: int) -> float | None:
            if chip.hbm(t) is None:
                return None
            before, after, ago = PAGES.get((chip.instance, chip.npu), {}).get(kind, (0, 0, 0))
            return float(after if t >= now - ago else before)

        return value

    yield "# TYPE npu_ecc_isolated_pages gauge"
    for kind in ("single_bit", "double_bit"):
        yield from per_chip("npu_ecc_isolated_pages", pages(kind), memory=lambda c: "hbm", type=lambda c, k=kind: k)


def _integral(job: Job, now: int, t: int) -> float:
    """Seconds of wall time the job ran (reported steps) from its start up to ``t``."""
    begin = now - JOBS_SINCE
    stop = now - job.stops_ago if job.stops_ago is not None else None
    end = min(t, stop) if stop is not None else t
    return max(0.0, float(end - begin))


def _iterations(job: Job, now: int, t: int) -> float:
    begin, change = now - JOBS_SINCE, now - CHANGE_AGO
    run = _integral(job, now, t)
    first = min(run, change - begin)
    second = max(0.0, run - (change - begin))
    return job.busy * (first / job.before + second / job.after)


def _job_families(now: int, times: list[int]) -> Iterator[str]:
    begin = now - JOBS_SINCE
    job_times = [t for t in times if t >= begin]

    def per_rank(metric: str, value: Callable[[Job, int], float], **extra: str) -> Iterator[str]:
        for job in JOBS:
            for rank in job.ranks:
                labels = _labels(instance=job.instance, job="cann-exporter", job_name=job.name, rank=rank, **extra)
                for t in job_times:
                    yield f"{metric}{labels} {value(job, t)!r} {t}"

    def info() -> Iterator[str]:
        for job in JOBS:
            for rank in job.ranks:
                device = rank if job is not STUCK else 2
                labels = _labels(
                    instance=job.instance,
                    job="cann-exporter",
                    job_name=job.name,
                    rank=rank,
                    device=device,
                    world_size=len(job.ranks),
                    framework="torch",
                    pid=2000 + rank,
                )
                yield from (f"npu_job_info{labels} 1.0 {t}" for t in job_times)

    yield from _family("npu_job_info", "gauge", info())
    yield "# TYPE npu_job_iteration_duration_seconds summary"
    yield from per_rank("npu_job_iteration_duration_seconds_sum", lambda j, t: j.busy * _integral(j, now, t))
    yield from per_rank("npu_job_iteration_duration_seconds_count", lambda j, t: _iterations(j, now, t))
    yield from _family("npu_job_iterations", "counter", per_rank("npu_job_iterations_total", lambda j, t: _iterations(j, now, t)))
    yield from _family(
        "npu_job_samples", "counter", per_rank("npu_job_samples_total", lambda j, t: j.samples_per_iteration * _iterations(j, now, t))
    )

    yield "# TYPE npu_job_model_flops_utilization_ratio gauge"
    for job in JOBS:
        for rank in job.ranks if job.mfu is not None else ():
            labels = _labels(instance=job.instance, job="cann-exporter", job_name=job.name, rank=rank)
            yield from (f"npu_job_model_flops_utilization_ratio{labels} {job.mfu!r} {t}" for t in job_times)

    def last(j: Job, t: int) -> float:
        return float(min(t, now - j.stops_ago) if j.stops_ago is not None else t)

    yield from _family("npu_job_last_iteration_timestamp_seconds", "gauge", per_rank("npu_job_last_iteration_timestamp_seconds", last))
    yield "# TYPE npu_job_phase_seconds counter"
    for phase in ("data", "h2d", "compute", "communication", "d2h", "framework"):
        yield from per_rank(
            "npu_job_phase_seconds_total",
            lambda j, t, p=phase: j.phases.get(p, 0.0) * j.busy * _integral(j, now, t),
            phase=phase,
            stage=phase,
        )

    yield from _family(
        "npu_job_goodput_seconds", "counter", per_rank("npu_job_goodput_seconds_total", lambda j, t: j.goodput * _integral(j, now, t))
    )
    yield "# TYPE npu_job_badput_seconds counter"
    for kind in BADPUT_KINDS:
        yield from per_rank("npu_job_badput_seconds_total", lambda j, t, k=kind: j.badput.get(k, 0.0) * _integral(j, now, t), kind=kind)
    restarts = per_rank("npu_job_disruptions_total", lambda j, t: float(sum(t >= now - ago for ago in j.restarts_ago)))
    yield from _family("npu_job_disruptions", "counter", restarts)


BADPUT_KINDS = ("startup", "data_wait", "checkpoint_save", "checkpoint_restore", "lost_progress", "downtime", "idle", "other")


def _profile_families(now: int, times: list[int]) -> Iterator[str]:
    job_times = [t for t in times if t >= now - JOBS_SINCE]
    for field_name, metric in PROFILE_METRICS.items():
        yield f"# TYPE {metric} gauge"
        for (instance, job), values in PROFILES.items():
            labels = _labels(instance=instance, job="cann-exporter", job_name=job, rank=0)
            yield from (f"{metric}{labels} {values[field_name]!r} {t}" for t in job_times)
    yield "# TYPE npu_profile_operator_time_ratio gauge"
    for (instance, job), operators in OPERATORS.items():
        for position, (op_type, ratio) in enumerate(operators, start=1):
            labels = _labels(instance=instance, job="cann-exporter", job_name=job, rank=0, op_type=op_type, position=position)
            yield from (f"npu_profile_operator_time_ratio{labels} {ratio!r} {t}" for t in job_times)
    yield "# TYPE npu_profile_last_update_timestamp_seconds gauge"
    for instance, job in PROFILES:
        labels = _labels(instance=instance, job="cann-exporter", job_name=job, rank=0)
        stale = job == STUCK.name
        yield from (
            f"npu_profile_last_update_timestamp_seconds{labels} {float(now - STALE_PROFILE_AGO if stale else t)!r} {t}" for t in job_times
        )


def openmetrics(now: int) -> Iterator[str]:
    times = sample_times(now)
    yield from _chip_families(now, times)
    yield from _job_families(now, times)
    yield from _profile_families(now, times)
    yield "# EOF"


# --- expected values the tests check ---------------------------------------------------------------


def job_rate(job: Job) -> dict[str, float]:
    """A rank's numbers over the last hour (after the change)."""
    return {
        "iteration_seconds": job.after,
        "iterations_per_second": job.busy / job.after,
        "samples_per_second": job.samples_per_iteration * job.busy / job.after,
        "idle": 1 - job.busy,
    }
