"""Goodput and badput per job and rank (exporter/jobs/goodput.py), through the ingest: a scripted
job on its own clock that starts, steps, checkpoints, dies and resumes gets every kind within 5%
of the truth and their sum within 2% of its wall time; restarts take over at once once the old
process is known dead (liveness.py), never while it lives."""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path

import pytest

from exporter.jobs.collector import JobCollector
from exporter.jobs.goodput import KINDS, Ledger
from exporter.jobs.liveness import CLOSED_QUIET, ProcTable
from exporter.jobs.store import IngestStore
from exporter.jobs.validate import IngestError, IngestLimits, parse_batch
from tests.support.exposition import render

BOOT = "5f1e9a4c-2b7d-4e3a-9c61-0d8f2a7b3e10"
NS = "4026531836"
T0 = 1_750_000_000.0


class Clock:
    def __init__(self, now: float = T0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class FakeProc:
    """A /proc tree under tmp_path: this exporter's boot id and pid namespace, and processes."""

    def __init__(self, root: Path) -> None:
        self.root = root
        (root / "proc/sys/kernel/random").mkdir(parents=True)
        (root / "proc/sys/kernel/random/boot_id").write_text(BOOT + "\n")
        (root / "proc/self/ns").mkdir(parents=True)
        os.symlink(f"pid:[{NS}]", root / "proc/self/ns/pid")
        self.table = ProcTable(root)

    def run(self, pid: int, ticks: int, state: str = "S") -> str:
        """A live process; returns its hook's `proc`."""
        (self.root / f"proc/{pid}").mkdir(exist_ok=True)
        fields = [state] + ["0"] * 18 + [str(ticks)] + ["0"] * 10
        (self.root / f"proc/{pid}/stat").write_text(f"{pid} (python (train)) {' '.join(fields)}\n")
        return f"{BOOT}:{NS}:{ticks}"

    def kill(self, pid: int) -> None:
        (self.root / f"proc/{pid}/stat").unlink()
        (self.root / f"proc/{pid}").rmdir()


class Conn:
    def __init__(self) -> None:
        self.closed = False

    def is_closing(self) -> bool:
        return self.closed


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def procs(tmp_path: Path) -> FakeProc:
    return FakeProc(tmp_path)


def post(store: IngestStore, clock: Clock, doc: dict, connection: Conn | None = None) -> int:
    """What the exporter's route does with a body: validate (at the store's time), accept."""
    return store.accept(parse_batch(json.dumps(doc).encode(), store.limits, clock()), "127.0.0.1", connection)


def series(store: IngestStore, job: str = "run", rank: str = "0") -> dict[str, float]:
    """goodput, every badput kind and disruptions of one rank, as /metrics serves them."""
    found = render(JobCollector(), store.part())
    out: dict[str, float] = {}
    for (name, labels), v in found.items():
        ls = dict(labels)
        if ls.get("job_name") != job or ls.get("rank") != rank:
            continue
        if name == "npu_job_badput_seconds_total":
            out[ls["kind"]] = v
        elif name in ("npu_job_goodput_seconds_total", "npu_job_disruptions_total"):
            out[name.removeprefix("npu_job_").removesuffix("_seconds_total").removesuffix("_total")] = v
    return out


class Process:
    """One scripted training process: it keeps its timeline and the truth of where its time
    went, and sends what the hooks send (a batch about every second of its own clock)."""

    def __init__(self, job: ScriptedJob, pid: int, started: float, proc: str) -> None:
        self.job, self.pid, self.started, self.proc = job, pid, started, proc
        self.session = f"{pid:016x}"
        self.now = started
        self.steps: list[dict] = []
        self.outside: list[dict] = []
        self.heard = started
        self.connection = Conn()

    def wait(self, seconds: float, kind: str) -> None:
        self.now += seconds
        self.job.truth[kind] += seconds

    def step(self, index: int | None, compute: float, data: float = 0.0, checkpoint: float = 0.0, redone: bool = False) -> None:
        phases = {"forward": compute / 2, "backward": compute / 2}
        if data:
            phases["dataloader"] = data
        if checkpoint:
            phases["checkpoint"] = checkpoint
        duration = compute + data + checkpoint
        self.now += duration
        step = {"end": round(self.now, 6), "duration": duration, "samples": 8, "phases": phases}
        if index is not None:
            step["index"] = index
        self.steps.append(step)
        self.job.truth["lost_progress" if redone else "goodput"] += compute
        self.job.truth["data_wait"] += data
        self.job.truth["checkpoint_save"] += checkpoint
        self._maybe_send()

    def phase(self, name: str, seconds: float, kind: str) -> None:
        self.now += seconds
        self.outside.append({"end": round(self.now, 6), "phases": {name: seconds}})
        self.job.truth[kind] += seconds
        self._maybe_send()

    def _maybe_send(self, final: bool = False) -> None:
        if final or self.now - self.heard >= 1.0:
            self.send(final)

    def send(self, final: bool = False) -> None:
        clock = self.job.clock
        clock.now = self.now + 0.01  # the sender thread's next wake-up
        doc = {
            "job_name": "run",
            "rank": 0,
            "world_size": 1,
            "pid": self.pid,
            "session": self.session,
            "started": self.started,
            "proc": self.proc,
            "steps": self.steps,
            "outside": self.outside,
            "final": final,
        }
        post(self.job.store, clock, doc, self.connection)
        self.steps, self.outside = [], []
        self.heard = clock.now
        self.job.last_heard = clock.now


class ScriptedJob:
    def __init__(self, store: IngestStore, clock: Clock) -> None:
        self.store, self.clock = store, clock
        self.truth: Counter[str] = Counter()
        self.last_heard = clock.now


def run_job(store: IngestStore, clock: Clock, procs: FakeProc) -> tuple[Counter[str], float]:
    """Start, step (data phases, a checkpoint phase inside a step, checkpoints between steps),
    die after step 27 (last checkpoint: step 20), stay down, resume from step 20, re-do 21..27,
    evaluate, finish. Returns the truth and the wall time."""
    job = ScriptedJob(store, clock)
    a = Process(job, 100, T0, procs.run(100, ticks=1000))
    a.wait(42.0, "startup")
    for index in range(1, 28):
        a.step(index, compute=0.9, data=0.05, checkpoint=0.3 if index == 15 else 0.0)
        a.wait(0.05, "idle")
        if index % 10 == 0:
            a.phase("save_checkpoint", 4.0, "checkpoint_save")
    a.send()  # its last batch; then the process is killed
    job.truth["idle"] += a.heard - a.now  # heard after its last step: idle
    died = a.heard
    procs.kill(100)
    b = Process(job, 200, died + 20.0, procs.run(200, ticks=9000))
    job.truth["downtime"] += 20.0
    b.wait(30.0, "startup")
    b.phase("load_checkpoint", 6.0, "checkpoint_restore")
    b.wait(0.5, "idle")
    for index in range(21, 46):
        b.step(index, compute=0.9, data=0.05, redone=index <= 27)
        b.wait(0.05, "idle")
        if index == 40:
            b.phase("evaluate", 2.0, "other")
    b.step(45, compute=0.4)  # one more part of step 45 (gradient accumulation): goodput
    b.send(final=True)
    wall = (died - T0) + 20.0 + (b.now - b.started)
    return job.truth, wall


def test_a_scripted_job_that_dies_and_resumes_gets_every_kind_within_5_percent(clock, procs):
    store = IngestStore(clock=clock, procs=procs.table)
    truth, wall = run_job(store, clock, procs)
    found = series(store)
    assert found["disruptions"] == 1
    for kind in ("goodput", *KINDS):
        expected = truth[kind]
        assert found[kind] == pytest.approx(expected, rel=0.05, abs=1e-6), (kind, found[kind], expected)
    assert sum(found[k] for k in ("goodput", *KINDS)) == pytest.approx(wall, rel=0.02)
    assert min(truth[k] for k in KINDS) > 0  # every kind exercised


def test_the_restart_took_over_at_once_because_its_pid_was_gone(clock, procs):
    store = IngestStore(clock=clock, procs=procs.table, stalled_after=3600)
    run_job(store, clock, procs)
    counters = store.part().counters
    assert dict(counters.takeovers) == {"pid_gone": 1}
    assert dict(counters.rejected) == {}  # not one 409: the new process took over at its first batch


# --- taking a rank over ---------------------------------------------------------------------------


def doc(pid: int, index: int | None = None, proc: str | None = None, **extra) -> dict:
    step = {"duration": 1.0} if index is None else {"duration": 1.0, "index": index}
    out = {"job_name": "run", "rank": 0, "pid": pid, "session": f"{pid:016x}", "steps": [step], **extra}
    if proc is not None:
        out["proc"] = proc
    return out


def test_a_live_holder_is_never_displaced_even_with_its_connection_closed(clock, procs):
    store = IngestStore(clock=clock, procs=procs.table)
    conn = Conn()
    post(store, clock, doc(100, proc=procs.run(100, ticks=5)), conn)
    conn.closed = True  # the exporter closed it (its connection cap), or the hook will reconnect
    clock.now += 60
    with pytest.raises(IngestError) as refused:
        post(store, clock, doc(200, proc=procs.run(200, ticks=7)))
    assert refused.value.status == 409 and refused.value.reason == "duplicate_rank"


def test_a_pid_reused_by_another_process_is_a_dead_holder(clock, procs):
    store = IngestStore(clock=clock, procs=procs.table)
    post(store, clock, doc(100, proc=procs.run(100, ticks=5)))
    procs.kill(100)
    procs.run(100, ticks=6)  # another process got the pid
    post(store, clock, doc(200, proc=procs.run(200, ticks=7)))
    assert dict(store.part().counters.takeovers) == {"pid_gone": 1}


def test_a_zombie_holder_is_dead(clock, procs):
    store = IngestStore(clock=clock, procs=procs.table)
    post(store, clock, doc(100, proc=procs.run(100, ticks=5)))
    procs.run(100, ticks=5, state="Z")
    post(store, clock, doc(200, proc=procs.run(200, ticks=7)))
    assert series(store)["disruptions"] == 1


def test_without_proc_a_closed_connection_and_silence_tell_a_dead_holder(clock, procs):
    store = IngestStore(clock=clock, procs=procs.table)
    conn = Conn()
    post(store, clock, doc(100, proc=f"0a0b0c0d:{NS}:5"), conn)  # another node (boot id): /proc cannot tell
    with pytest.raises(IngestError):  # connection open: alive
        post(store, clock, doc(200))
    conn.closed = True
    clock.now += CLOSED_QUIET - 1
    with pytest.raises(IngestError):  # closed a moment ago: a live hook reconnects within its flush interval
        post(store, clock, doc(200))
    clock.now += 1
    post(store, clock, doc(200))
    assert dict(store.part().counters.takeovers) == {"connection_closed": 1}
    assert series(store)["disruptions"] == 1


def test_another_pid_namespace_is_not_read_in_this_proc(procs):
    proc = procs.run(100, ticks=5)
    assert procs.table.alive("100", proc) is True
    assert procs.table.alive("100", proc.replace(NS, "4026532000")) is None
    assert procs.table.alive("100", "") is None
    assert procs.table.alive("101", proc) is False
    assert ProcTable(procs.root / "missing").alive("100", proc) is None


def test_a_restart_after_a_finish_is_no_disruption_and_its_gap_no_time_of_the_job(clock, procs):
    store = IngestStore(clock=clock, procs=procs.table)
    post(store, clock, {**doc(100, index=1, started=T0 - 10), "final": True})
    clock.now += 30
    post(store, clock, doc(200, index=2, started=clock.now - 5))
    found = series(store)
    assert found["disruptions"] == 0 and found["downtime"] == 0
    assert found["startup"] == pytest.approx(10 - 1 + 5 - 1)  # each process: start to its first step
    assert found["goodput"] == pytest.approx(2.0)
    assert dict(store.part().counters.takeovers) == {"finished": 1}


def test_after_a_silent_death_the_restart_pays_downtime_and_redoes_work(clock, procs):
    store = IngestStore(clock=clock, procs=procs.table, stalled_after=120)
    post(store, clock, doc(100, index=7, started=T0 - 1))  # step 7 ends at T0
    clock.now += 200  # silent: stalled
    post(store, clock, doc(200, index=7, started=clock.now - 3))
    found = series(store)
    assert found["downtime"] == pytest.approx(197)
    assert found["startup"] == pytest.approx(0 + 2)
    assert found["lost_progress"] == pytest.approx(1.0) and found["goodput"] == pytest.approx(1.0)
    assert dict(store.part().counters.takeovers) == {"stalled": 1}


# --- what one process sends ----------------------------------------------------------------------


def test_repeated_indices_in_one_process_are_one_step_in_parts(clock):
    store = IngestStore(clock=clock)
    steps = [{"duration": 0.5, "index": 3, "end": T0 - 1}, {"duration": 0.5, "index": 3, "end": T0 - 0.5}]
    post(store, clock, {"job_name": "run", "rank": 0, "steps": steps})
    assert series(store)["goodput"] == pytest.approx(1.0)


def test_an_index_going_backwards_is_counted_and_ignored(clock):
    store = IngestStore(clock=clock)
    steps = [{"duration": 0.5, "index": 9, "end": T0 - 2}, {"duration": 0.5, "index": 4, "end": T0 - 1}]
    assert post(store, clock, {"job_name": "run", "rank": 0, "steps": steps}) == 2
    assert series(store)["goodput"] == pytest.approx(1.0)
    assert store.part().counters.index_regressions == 1


def test_a_rank_that_never_sends_an_index_or_a_start_still_gets_goodput(clock):
    store = IngestStore(clock=clock)
    steps = [{"duration": 0.4, "end": T0 - 2, "phases": {"data": 0.1}}, {"duration": 0.4, "end": T0 - 1}]
    post(store, clock, {"job_name": "run", "rank": 0, "steps": steps})
    found = series(store)
    assert found["goodput"] == pytest.approx(0.7) and found["data_wait"] == pytest.approx(0.1)
    assert found["idle"] == pytest.approx(0.6) and found["startup"] == 0  # no start: from its first step


def test_phases_between_steps_count_by_their_word(clock):
    store = IngestStore(clock=clock)
    outside = [
        {"end": T0 - 9, "phases": {"Save Checkpoint": 1.0}},
        {"end": T0 - 8, "phases": {"restore": 1.0}},
        {"end": T0 - 7, "phases": {"dataloader": 1.0}},
        {"end": T0 - 5, "phases": {"eval": 0.5, "no_such_word": 0.5}},
    ]
    post(store, clock, {"job_name": "run", "rank": 0, "steps": [], "outside": outside})
    found = series(store)
    assert (found["checkpoint_save"], found["checkpoint_restore"], found["data_wait"], found["other"]) == (1.0, 1.0, 1.0, 1.0)
    assert found["idle"] == pytest.approx(1.0)  # eval + no_such_word start 1 s after the data phase ended
    found_phases = {n for (n, _ls) in render(JobCollector(), store.part()) if n == "npu_job_phase_seconds_total"}
    assert not found_phases  # outside phases are not phases of the steps


def test_ledger_memory_is_a_few_numbers_per_rank():
    ledger = Ledger(T0)
    for index in range(10_000):
        ledger.step(T0 + index + 1, 1.0, (("forward", 0.9),), index)
    assert not hasattr(ledger, "__dict__") and len(ledger.badput) == len(KINDS)
    assert ledger.accounted() == pytest.approx(10_000)


def test_every_kind_is_served_from_zero(clock):
    store = IngestStore(clock=clock)
    post(store, clock, {"job_name": "run", "rank": 0, "steps": [{"duration": 1.0}]})
    found = series(store)
    assert set(found) == {"goodput", "disruptions", *KINDS}
    assert found["disruptions"] == 0


def test_bad_goodput_fields_are_refused(clock):
    limits = IngestLimits()
    for bad in (
        {"steps": [{"duration": 1, "index": -1}]},
        {"steps": [{"duration": 1, "index": 1.5}]},
        {"steps": [], "started": float("nan")},
        {"steps": [], "started": T0 + 3600},
        {"steps": [], "proc": "not a proc"},
        {"steps": [], "outside": [{"end": T0}]},
        {"steps": [], "outside": [{"phases": {"save": -1}}]},
        {"steps": [], "outside": [{"phases": {"save": 50_000, "restore": 50_000}}]},
        {"steps": [], "outside": [{"phases": {"save": 1}, "duration": 1}]},
    ):
        body = json.dumps({"job_name": "run", "rank": 0, **bad}, allow_nan=True).encode()
        with pytest.raises(IngestError) as refused:
            parse_batch(body, limits, T0)
        assert refused.value.status == 400, bad
