"""Phases as loops write them: the words people use, nesting, and names nobody knows.

Against the recording sink (what the hook sends) and a real exporter process (what is served)."""

from __future__ import annotations

import logging
import time

import pytest

from exporter.hooks import Monitor
from exporter.hooks.wire import exclusive, step_json
from tests.support.hooks import wait_until

pytestmark = pytest.mark.e2e


def test_nested_phases_count_exclusive_time_and_never_exceed_the_step(sink):
    """Communication inside compute used to add up to 150% of the step."""
    mon = Monitor("nested", url=sink.url, flush_interval=0.05)
    for _ in range(5):
        with mon.step():
            with mon.phase("forward"):
                time.sleep(0.002)
                with mon.phase("all_gather"):
                    time.sleep(0.02)
                    with mon.phase("h2d"):
                        time.sleep(0.01)
            with mon.phase("backward"):
                time.sleep(0.002)
    mon.close()
    steps = sink.steps()
    assert len(steps) == 5
    for step in steps:
        phases = step["phases"]
        assert set(phases) == {"forward", "all_gather", "h2d", "backward"}
        assert sum(phases.values()) <= step["duration"]
        assert phases["h2d"] >= 0.01 and phases["all_gather"] >= 0.02
        # forward's own time excludes the 30 ms spent in what it encloses
        assert phases["forward"] < step["duration"] - phases["all_gather"] - phases["h2d"]


def test_a_phase_reentered_inside_itself_counts_once(sink):
    mon = Monitor("reentry", url=sink.url, flush_interval=0.05)
    with mon.step():
        with mon.phase("compute"):
            with mon.phase("compute"):
                time.sleep(0.005)
            with mon.phase("all_reduce"):
                time.sleep(0.005)
    mon.close()
    (step,) = sink.steps()
    assert set(step["phases"]) == {"compute", "all_reduce"}
    assert sum(step["phases"].values()) <= step["duration"]


def test_a_phase_between_steps_does_not_touch_the_step_already_buffered(sink):
    mon = Monitor("between", url=sink.url, flush_interval=60)
    with mon.step():
        with mon.phase("compute"):
            pass
    with mon.phase("checkpoint"):
        time.sleep(0.01)
    mon.close()
    (step,) = sink.steps()
    assert set(step["phases"]) == {"compute"}


def test_overlapping_hand_timed_phases_are_scaled_to_the_step():
    step = step_json((100.0, 0.2, None, {"compute": 0.2, "communication": 0.1}), 0.0)
    assert step is not None
    assert sum(step["phases"].values()) == pytest.approx(0.2)
    assert step["phases"]["compute"] == pytest.approx(2 * step["phases"]["communication"])


def test_hand_timed_phase_names_that_are_not_text_are_sent_as_other():
    step = step_json((100.0, 1.0, None, {("a", 1): 0.25, 7: 0.25, "x" * 500: 0.25}), 0.0)
    assert step is not None and step["phases"] == {"other": 0.5, "x" * 128: 0.25}


def test_exclusive_time_of_device_spans():
    spans = [("forward", 0.0, 0.05), ("all_gather", 0.01, 0.03), ("h2d", 0.02, 0.025), ("backward", 0.05, 0.09)]
    assert exclusive(spans) == pytest.approx({"forward": 0.03, "all_gather": 0.015, "h2d": 0.005, "backward": 0.04})
    # the same phase twice adds up; a span overlapping its neighbour's end only loses the overlap
    assert exclusive([("a", 0.0, 0.1), ("b", 0.08, 0.12), ("a", 0.2, 0.3)]) == pytest.approx({"a": 0.18, "b": 0.04})


def test_phase_names_are_bounded_per_monitor(sink, caplog):
    mon = Monitor("many", url=sink.url, flush_interval=0.05)
    with caplog.at_level(logging.WARNING, logger="exporter.hooks"):
        with mon.step():
            for i in range(100):
                with mon.phase(f"layer{i}"):
                    pass
    mon.close()
    (step,) = sink.steps()
    assert len(step["phases"]) == 65 and "other" in step["phases"]  # 64 names, then other
    assert sum("more than 64 phase names" in r.getMessage() for r in caplog.records) == 1


def test_the_words_people_write_are_served_with_their_stage(start_exporter, caplog):
    exporter = start_exporter()
    mon = Monitor("words", url=exporter.url, flush_interval=0.05)
    with caplog.at_level(logging.WARNING, logger="exporter.hooks"):
        for _ in range(20):
            with mon.step(samples=4):
                with mon.phase("dataloader"):
                    pass
                with mon.phase("forward"):
                    with mon.phase("all_reduce"):
                        pass
                with mon.phase("Backward"):
                    pass
                with mon.phase("optimizer"):
                    pass
                with mon.phase("fwd2"):  # nobody's word
                    pass
        assert mon.flush(10)
        wait_until(lambda: mon.stats()["unknown_phases"].get("fwd2") == 20, what="the exporter named the unknown phase")
        mon.close()
    key = {"job_name": "words", "rank": "0"}
    exporter.wait_value("npu_job_iterations_total", 20, **key)
    served = {
        (dict(labels)["phase"], dict(labels)["stage"])
        for name, labels in exporter.samples()
        if name == "npu_job_phase_seconds_total" and dict(labels)["job_name"] == "words"
    }
    assert served == {
        ("dataloader", "data"),
        ("forward", "compute"),
        ("all_reduce", "communication"),
        ("backward", "compute"),
        ("optimizer", "compute"),
        ("other", "other"),
    }
    phase_total = sum(
        v for name, labels, v in _values(exporter) if name == "npu_job_phase_seconds_total" and dict(labels)["job_name"] == "words"
    )
    assert phase_total <= exporter.value("npu_job_iteration_duration_seconds_sum", **key)
    assert exporter.value("cann_exporter_ingest_unknown_phases_total") == 20
    warnings = [r.getMessage() for r in caplog.records if "fwd2" in r.getMessage()]
    assert len(warnings) == 1 and "served as 'other'" in warnings[0]


def _values(exporter):
    found = exporter.samples()
    return [(name, labels, value) for (name, labels), value in found.items()]
