"""The report's goodput arithmetic: a counter's growth per step from its last values (resets,
a counter that appears within the window, the restart a per-step increase() would lose) and the
NPU-hours per job and namespace (a rank on chips of two namespaces, a rank with no pod)."""

from __future__ import annotations

import pytest

from exporter.diagnostics.goodput import GOODPUT, NO_NAMESPACE, GoodputInput, analyse_goodput, goodput_findings
from exporter.diagnostics.goodput_reader import growth


def test_growth_counts_resets_and_a_counter_that_appears_but_not_the_baseline() -> None:
    # baseline at 0 (value 100: earlier than the window), then +50, a reset to 20, +30
    assert growth([(0, 100.0), (10, 150.0), (20, 20.0), (30, 50.0)], 0) == [(10, 50.0), (20, 20.0), (30, 30.0)]
    # appears at 20 with its start-up already counted: that counts
    assert growth([(20, 300.0), (30, 360.0)], 0) == [(20, 300.0), (30, 60.0)]
    # a restart counter stepping 0 -> 1 between two steps' samples is one restart
    assert sum(v for _, v in growth([(0, 0.0), (10, 0.0), (20, 1.0), (30, 1.0)], 0)) == 1.0


def test_npu_hours_per_job_and_namespace() -> None:
    a, b, c = ("n1", "llm", "0"), ("n1", "llm", "1"), ("n2", "vision", "0")
    data = GoodputInput(
        parts={
            a: {GOODPUT: {10: 3600.0, 20: 3600.0}, "checkpoint_save": {10: 360.0}},
            b: {GOODPUT: {10: 1800.0}, "downtime": {20: 1800.0}},
            c: {GOODPUT: {10: 7200.0}, "data_wait": {10: 3600.0}},
        },
        disruptions={b: 1.0},
        devices={a: {10: frozenset({"0"}), 20: frozenset({"0", "1"})}, b: {10: frozenset({"1"})}},
        pods={("n1", "0"): {10: frozenset({"x"}), 20: frozenset({"x"})}, ("n1", "1"): {10: frozenset({"y"}), 20: frozenset({"y"})}},
    )
    r = analyse_goodput(data)
    assert r is not None
    jobs = {j.name: j for j in r.jobs}
    assert jobs["llm"].total == pytest.approx(2.1 + 1.0) and jobs["llm"].ranks == 2 and jobs["llm"].disruptions == 1
    assert jobs["llm"].largest_badput == ("downtime", 0.5)
    assert jobs["vision"].share(GOODPUT) == pytest.approx(2 / 3)
    spaces = {n.name: n.total for n in r.namespaces}
    # a: step 10 in x (1.1 h), step 20 on chips of x and y (0.5 h each); b: step 10 in y, its step 20
    # without a chip named: the namespaces of its window; c: no pod
    assert spaces == pytest.approx({"x": 1.6, "y": 0.5 + 1.0, NO_NAMESPACE: 3.0})
    assert r.total.total == pytest.approx(6.1) and r.parts == (GOODPUT, "data_wait", "checkpoint_save", "downtime")
    assert goodput_findings(r)[0] == (
        "Goodput: 4.50 of 6.10 NPU-hours of training jobs (73.8%) moved training forward; "
        "the largest badput: data_wait (1.00 NPU-hours, 16.4%); 1 restart(s)."
    )
    assert analyse_goodput(GoodputInput({}, {}, {}, {})) is None
