"""exporter.hooks.Monitor against a recording sink: what is sent, what is dropped, what never happens."""

from __future__ import annotations

import json
import logging
import math
import textwrap
import time

import pytest

from exporter.hooks import Monitor, resolve_identity
from exporter.hooks.transport import steps_url
from tests.support.hooks import Sink, run_script, wait_until
from tests.support.ports import free_port


def monitor(sink: Sink, **kwargs) -> Monitor:
    kwargs.setdefault("flush_interval", 0.05)
    return Monitor(kwargs.pop("job_name", "unit"), url=sink.url, **kwargs)


# --- import and identity -------------------------------------------------------------------


def test_imports_only_the_standard_library():
    proc = run_script(
        textwrap.dedent("""
        import sys
        before = set(sys.modules)
        import exporter.hooks
        from exporter.hooks import Monitor
        Monitor("x", url="http://127.0.0.1:9").close()
        outside = sorted(
            name for name in set(sys.modules) - before
            if name.split(".")[0] not in sys.stdlib_module_names
            and not (name == "exporter" or name.startswith("exporter.hooks"))
        )
        print(outside)
    """)
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


def test_identity_from_torchrun_env():
    env = {"RANK": "5", "WORLD_SIZE": "16", "LOCAL_RANK": "1", "ASCEND_RT_VISIBLE_DEVICES": "4,5,6,7"}
    ident = resolve_identity("llama", env=env)
    assert (ident.job_name, ident.rank, ident.world_size, ident.device) == ("llama", 5, 16, "5")


def test_identity_from_ascend_env():
    ident = resolve_identity("ms", env={"RANK_ID": "3", "RANK_SIZE": "8", "DEVICE_ID": "3"})
    assert (ident.rank, ident.world_size, ident.device) == (3, 8, "3")


def test_identity_defaults_and_repairs():
    ident = resolve_identity(None, env={"RANK": "3"})
    assert ident.job_name and ident.rank == 3 and ident.world_size == 4  # world size at least rank + 1
    assert ident.device is None
    assert resolve_identity("my job (v2) ü", env={}).job_name == "my_job__v2___"
    assert resolve_identity("-x", env={}).job_name == "job_-x"
    assert len(resolve_identity("a" * 500, env={}).job_name) == 128
    assert resolve_identity(None, env={"CANN_EXPORTER_JOB_NAME": "from-env"}).job_name == "from-env"
    assert resolve_identity("j", env={"LOCAL_RANK": "2"}).device == "2"
    assert resolve_identity("j", env={"LOCAL_RANK": "9", "ASCEND_RT_VISIBLE_DEVICES": "0,1"}).device is None
    assert resolve_identity("j", rank=2, world_size=4, device=7, env={"RANK": "0"}).device == "7"


def test_url_from_argument_env_or_default(monkeypatch):
    monkeypatch.setenv("CANN_EXPORTER_URL", "http://127.0.0.1:9999")
    assert Monitor("a").url == "http://127.0.0.1:9999"
    assert Monitor("a", url="http://127.0.0.1:1234").url == "http://127.0.0.1:1234"
    monkeypatch.delenv("CANN_EXPORTER_URL")
    assert Monitor("a").url == "http://127.0.0.1:9435"
    assert steps_url("127.0.0.1:9435") == ("http", "127.0.0.1", 9435, "/api/v1/steps")
    assert steps_url("https://node/prefix/") == ("https", "node", 443, "/prefix/api/v1/steps")


# --- what is sent ------------------------------------------------------------------------


def test_steps_phases_and_samples_arrive(sink):
    mon = monitor(sink, rank=1, world_size=2, device=3)
    for _ in range(50):
        with mon.step(samples=8):
            with mon.phase("h2d"):
                pass
            with mon.phase("compute"):
                sum(range(200))
            with mon.phase("compute"):  # the same phase twice in a step adds up
                pass
    mon.close()
    steps = sink.steps(job_name="unit", rank=1)
    assert len(steps) == 50
    assert all(s["samples"] == 8 and set(s["phases"]) == {"h2d", "compute"} for s in steps)
    assert all(s["phases"]["h2d"] + s["phases"]["compute"] <= s["duration"] for s in steps)
    last = sink.batches[-1]
    assert last["final"] is True and last["device"] == "3" and last["world_size"] == 2
    assert mon.stats()["sent"] == 50 and mon.stats()["dropped"] == 0


def test_record_step_is_sent_exactly(sink):
    mon = monitor(sink)
    end = round(time.time() - 10.0, 3)
    mon.record_step(0.25, samples=4, phases={"data": 0.05, "compute": 0.15}, end=end)
    mon.record_step(1.5)
    mon.close()
    first, second = sink.steps()
    assert first == {"end": end, "duration": 0.25, "samples": 4, "phases": {"data": 0.05, "compute": 0.15}}
    assert second["duration"] == 1.5 and "samples" not in second and "phases" not in second


def test_phase_names_are_sent_as_the_loop_wrote_them(sink):
    """The exporter owns the vocabulary: the hook no longer turns forward/backward into other."""
    mon = monitor(sink)
    with mon.step():
        with mon.phase("forward"):
            pass
        with mon.phase("backward"):
            pass
    mon.record_step(1.0, phases={"optimizer": 0.25, "h2d": 0.5, "loss": 0.25})
    mon.close()
    first, second = sink.steps()
    assert set(first["phases"]) == {"forward", "backward"}
    assert second["phases"] == {"optimizer": 0.25, "h2d": 0.5, "loss": 0.25}


def test_phases_outside_a_step_and_failed_steps_are_not_reported(sink):
    mon = monitor(sink)
    with mon.phase("data"):
        pass
    with pytest.raises(ZeroDivisionError):
        with mon.step(samples=1):
            raise ZeroDivisionError
    with mon.step(samples=2):
        pass
    mon.end_step(samples=99)  # no begin_step: ignored
    mon.begin_step()
    mon.end_step(samples=3)
    mon.close()
    assert [s.get("samples") for s in sink.steps()] == [2, 3]
    assert all("phases" not in s for s in sink.steps())


def test_garbage_never_raises_and_is_counted(sink):
    mon = monitor(sink)
    with mon.step(samples="many"):  # not a count: sent without samples
        with mon.phase(["unhashable"]):
            pass
        with mon.phase(None):
            pass
    mon.record_step("slow")  # not a number: dropped
    mon.record_step(-1.0)  # negative: dropped
    mon.record_step(math.nan)
    mon.record_step(10**9)  # absurd: dropped
    mon.record_step(0.1, phases=5)  # not a mapping: dropped
    mon.record_step(0.1, end="now")
    mon.record_step(0.1, samples=3.0, phases={"h2d": -1, "compute": math.inf, "d2h": 0.01})
    mon.record_memory("lots", -5)
    mon.close()
    good = sink.steps()
    assert len(good) == 2
    assert "samples" not in good[0] and set(good[0]["phases"]) == {"other"}
    assert good[1]["samples"] == 3 and good[1]["phases"] == {"d2h": 0.01}
    assert mon.stats()["dropped"] == 6
    assert sink.batches[-1]["dropped"] == 6  # the exporter hears about drops too
    assert "memory" not in sink.batches[-1]


def test_memory_is_sent_when_it_changes(sink):
    mon = monitor(sink)
    mon.record_memory(1000, 2000)
    mon.record_step(0.1)
    assert mon.flush()
    mon.record_step(0.1)
    assert mon.flush()
    mon.close()
    with_memory = [b for b in sink.batches if "memory" in b]
    assert len(with_memory) == 1 and with_memory[0]["memory"] == {"allocated_bytes": 1000, "max_allocated_bytes": 2000}


def test_token_from_env_is_sent(sink, monkeypatch):
    monkeypatch.setenv("CANN_EXPORTER_INGEST_TOKEN", "s3cret")
    mon = monitor(sink)
    mon.record_step(0.1)
    mon.close()
    assert sink.headers[0]["Authorization"] == "Bearer s3cret"


def test_disabled_monitor_sends_nothing_and_starts_no_thread(sink, monkeypatch):
    monkeypatch.setenv("CANN_EXPORTER_HOOKS", "off")
    mon = monitor(sink)
    with mon.step(samples=1):
        with mon.phase("h2d"):
            pass
    mon.record_step(0.1)
    mon.close()
    assert mon._sender.thread is None and sink.batches == []


def test_steps_after_close_are_ignored(sink):
    mon = monitor(sink)
    mon.record_step(0.1)
    mon.close()
    with mon.step():
        pass
    mon.record_step(0.1)
    assert len(sink.steps()) == 1


def test_batches_are_bounded_and_ordered(sink):
    mon = monitor(sink, batch_size=100, flush_interval=10)
    for i in range(1000):
        mon.record_step(0.001 * (i + 1))
    mon.close()
    assert all(len(b["steps"]) <= 100 for b in sink.batches)
    durations = [s["duration"] for s in sink.steps()]
    assert durations == [0.001 * (i + 1) for i in range(1000)]


# --- when the exporter misbehaves --------------------------------------------------------


def test_exporter_down_keeps_the_loop_going_and_counts_drops():
    mon = Monitor("down", url=f"http://127.0.0.1:{free_port()}", buffer_size=100, flush_interval=0.01, max_backoff=0.05)
    for _ in range(1000):
        with mon.step(samples=1):
            with mon.phase("compute"):
                pass
    mon.close(timeout=2)
    stats = mon.stats()
    assert stats["sent"] == 0 and stats["dropped"] + stats["buffered"] == 1000
    assert stats["buffered"] <= 200  # the bounded buffer plus at most one batch kept for the retry
    assert stats["send_errors"] >= 1 and "unreachable" in stats["last_error"]


def test_exporter_that_comes_up_later_gets_the_buffered_steps(caplog):
    port = free_port()
    mon = Monitor("late", url=f"http://127.0.0.1:{port}", flush_interval=0.01, max_backoff=0.05)
    with caplog.at_level(logging.INFO, logger="exporter.hooks"):
        for _ in range(30):
            mon.record_step(0.01)
        wait_until(lambda: mon.stats()["send_errors"] >= 1, what="a failed attempt")
        before = time.time()
        failing = mon.stats()
        assert "unreachable" in failing["last_error"] and failing["last_failure"] == failing["last_error"]
        late = Sink(port)
        try:
            wait_until(lambda: len(late.steps()) == 30, what="buffered steps delivered")
            mon.close()
            assert mon.stats()["dropped"] == 0
        finally:
            late.close()
    stats = mon.stats()
    # Back: last_error is gone (it used to stay for ever); the failure and its time are kept apart.
    assert stats["last_error"] is None and "unreachable" in stats["last_failure"]
    assert stats["last_failure_time"] >= before - 5
    said = [(r.levelno, r.getMessage()) for r in caplog.records if r.name == "exporter.hooks"]
    assert [level for level, text in said if "unreachable" in text] == [logging.WARNING]  # once
    assert [level for level, text in said if "reachable again" in text] == [logging.WARNING]  # at the failure's level


def test_slow_exporter_does_not_hold_the_loop(sink):
    sink.hold.clear()  # every request now waits until released
    mon = monitor(sink, timeout=0.2, max_backoff=0.05, buffer_size=500)
    done = 0
    for _ in range(5000):
        with mon.step(samples=1):
            pass
        done += 1
    assert done == 5000  # the loop ran to the end while the exporter answered nothing
    wait_until(lambda: mon.stats()["send_errors"] >= 1, what="a timed-out send")
    assert mon.stats()["dropped"] >= 1
    sink.hold.set()
    mon.close(timeout=5)


def test_rejected_batches_are_dropped_and_reported(sink):
    sink.status = 400
    mon = monitor(sink, max_backoff=0.05)
    mon.record_step(0.1)
    wait_until(lambda: mon.stats()["send_errors"] >= 1, what="a rejection")
    assert mon.stats()["dropped"] == 1
    sink.status = 200
    mon.record_step(0.1)
    mon.close()
    assert any(b["dropped"] == 1 for b in sink.batches)
    assert len(sink.steps()) == 1


def test_413_halves_the_batch_size(sink):
    sink.status = 413
    mon = monitor(sink, batch_size=64, max_backoff=0.05)
    mon.record_step(0.1)
    wait_until(lambda: mon.batch_size == 32, what="a smaller batch size")
    mon.close(timeout=1)


# --- process lifecycle -------------------------------------------------------------------


def test_unclosed_monitor_flushes_at_exit(sink):
    proc = run_script(
        textwrap.dedent(f"""
        from exporter.hooks import Monitor
        mon = Monitor("atexit", url="{sink.url}", flush_interval=60)
        for _ in range(25):
            with mon.step(samples=2):
                pass
        # no close(): the atexit hook sends what is buffered
    """)
    )
    assert proc.returncode == 0, proc.stderr
    assert len(sink.steps(job_name="atexit")) == 25
    assert sink.batches[-1]["final"] is True


def test_exit_is_not_held_up_by_a_dead_exporter():
    proc = run_script(
        textwrap.dedent(f"""
        from exporter.hooks import Monitor
        mon = Monitor("dead", url="http://127.0.0.1:{free_port()}", flush_interval=0.01)
        for _ in range(100):
            mon.record_step(0.01)
    """),
        timeout=30,
    )
    assert proc.returncode == 0, proc.stderr


FORK_SCRIPT = """
import json, os, sys, time
from exporter.hooks import Monitor

mon = Monitor("forks", url="{url}", flush_interval=0.001, batch_size=7)
children = []
for round in range(4):
    for _ in range(50):
        with mon.step(samples=1):
            with mon.phase("compute"):
                pass
    # fork while the sender thread is busy (the sink answers slowly)
    pid = os.fork()
    if pid == 0:
        for _ in range(10):
            with mon.step(samples=100):
                pass
        mon.close(timeout=10)
        os._exit(0 if mon.stats()["sent"] == 10 else 3)
    children.append(pid)
deadline = time.monotonic() + 30
for pid in children:
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            assert os.waitstatus_to_exitcode(status) == 0, status
            break
        assert time.monotonic() < deadline, "a forked child hung"
        time.sleep(0.01)
mon.close(timeout=10)
print(json.dumps({{"parent": os.getpid(), "children": children, "stats": mon.stats()}}))
"""


def test_forked_children_neither_duplicate_nor_deadlock(sink):
    sink.hold.clear()
    sink.hold_timeout = 0.02  # every request takes ~20 ms, so forks land mid-request
    proc = run_script(FORK_SCRIPT.format(url=sink.url), timeout=90)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["stats"]["sent"] == 200 and result["stats"]["dropped"] == 0
    assert len(sink.steps(pid=result["parent"])) == 200
    assert all(s["samples"] == 1 for s in sink.steps(pid=result["parent"]))
    for child in result["children"]:
        assert [s["samples"] for s in sink.steps(pid=child)] == [100] * 10
    assert len(sink.steps()) == 240
    # only the parent marks the job finished
    assert [b["pid"] for b in sink.batches if b.get("final")] == [result["parent"]]


MP_SCRIPT = """
import json, multiprocessing as mp
from exporter.hooks import Monitor

mon = Monitor("pool", url="{url}", flush_interval=0.001)

def work(i):
    with mon.step(samples=1000):
        pass
    mon.flush(timeout=10)
    return mon.stats()["sent"]

if __name__ == "__main__":
    for _ in range(100):
        with mon.step(samples=1):
            pass
    with mp.get_context("fork").Pool(2) as pool:
        sent = pool.map(work, range(8), chunksize=1)
    mon.close(timeout=10)
    print(json.dumps({{"stats": mon.stats()}}))
"""


def test_multiprocessing_fork_pool_workers(sink):
    proc = run_script(MP_SCRIPT.format(url=sink.url), timeout=90)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["stats"]["sent"] == 100
    assert len([s for s in sink.steps() if s["samples"] == 1]) == 100  # no parent step sent twice
    assert len([s for s in sink.steps() if s["samples"] == 1000]) == 8  # each worker's own step, once


def test_values_the_exporter_would_reject_never_cost_a_whole_batch(sink):
    mon = monitor(sink, framework="torch:2.13 (cpu)", device="123456")
    mon.record_step(0.1, end=1e15)  # milliseconds by mistake: the recording time instead
    mon.record_step(0.1, end=-5)
    mon.record_step(0.1, phases={"compute": 1e6})
    mon.record_step(0.1, samples=10**12)
    mon.close()
    assert len(sink.steps()) == 4
    batch = sink.batches[-1]
    assert batch["framework"] == "torch_2.13__cpu_" and "device" not in batch
    assert all(abs(s["end"] - sink.steps()[0]["end"]) < 60 for s in sink.steps())


def test_identity_ignores_non_ascii_digits():
    assert resolve_identity("j", env={"RANK": "²", "LOCAL_RANK": "١"}).rank == 0
    assert resolve_identity("j", env={"DEVICE_ID": "²"}).device is None


def test_a_crash_sends_the_steps_but_no_final_message(sink):
    """An exception ending the script flushes at exit without `final`: the exporter serves the
    rank as stalled (a crash pages) instead of finished; Ctrl-C still counts as a finish."""
    script = """
        from exporter.hooks import Monitor
        mon = Monitor("{job}", url="{url}", flush_interval=60)
        for _ in range(7):
            with mon.step(samples=2):
                pass
        raise {error}("boom")
    """
    crashed = run_script(textwrap.dedent(script.format(job="crashed", url=sink.url, error="RuntimeError")))
    assert crashed.returncode == 1 and "RuntimeError: boom" in crashed.stderr  # the previous excepthook still prints
    assert len(sink.steps(job_name="crashed")) == 7
    assert not any(b.get("final") for b in sink.batches if b["job_name"] == "crashed")
    stopped = run_script(textwrap.dedent(script.format(job="stopped", url=sink.url, error="KeyboardInterrupt")))
    assert stopped.returncode != 0 and "KeyboardInterrupt" in stopped.stderr
    assert [b.get("final") for b in sink.batches if b["job_name"] == "stopped"][-1] is True


def test_an_error_printed_through_excepthook_and_carried_on_from_is_no_crash(sink):
    """C extensions report a handled error through sys.excepthook (PyErr_Print; MindSpore's
    import does, for a NumPy ABI mismatch). Steps after it show the run went on: a finish."""
    script = """
        import sys
        from exporter.hooks import Monitor
        try:
            raise ImportError("compiled against another NumPy")
        except ImportError:
            sys.excepthook(*sys.exc_info())  # what PyErr_Print does, then the import carries on
        mon = Monitor("{job}", url="{url}", flush_interval=60)
        with mon.step(samples=2):
            pass
        {end}
    """
    for job, end in (("carried-on", ""), ("closed", "mon.close()")):
        proc = run_script(textwrap.dedent(script.format(job=job, url=sink.url, end=end)))
        assert proc.returncode == 0 and "compiled against another NumPy" in proc.stderr
        assert len(sink.steps(job_name=job)) == 1
        assert [b.get("final") for b in sink.batches if b["job_name"] == job][-1] is True, job


def test_an_exception_leaving_the_with_block_is_a_crash(sink):
    script = """
        from exporter.hooks import Monitor
        with Monitor("{job}", url="{url}", flush_interval=60) as mon:
            for _ in range(3):
                with mon.step(samples=2):
                    pass
            raise {error}("boom")
    """
    crashed = run_script(textwrap.dedent(script.format(job="with-crashed", url=sink.url, error="RuntimeError")))
    assert crashed.returncode == 1 and len(sink.steps(job_name="with-crashed")) == 3
    assert not any(b.get("final") for b in sink.batches if b["job_name"] == "with-crashed")
    stopped = run_script(textwrap.dedent(script.format(job="with-stopped", url=sink.url, error="KeyboardInterrupt")))
    assert stopped.returncode != 0
    assert [b.get("final") for b in sink.batches if b["job_name"] == "with-stopped"][-1] is True
