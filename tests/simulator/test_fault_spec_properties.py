"""Property: any fault spec or simulator option set is parsed or refused with ValueError, and
a parsed one only holds finite numbers (it ends up in time.sleep and exit codes)."""

from __future__ import annotations

import math

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from exporter.simulator.faults import FAULT_KINDS, parse_faults
from exporter.simulator.npusmi import parse_sim_options

_ITEM = st.builds(
    lambda scope, kind, value: f"{scope}{kind}{value}",
    st.sampled_from(["", "info:", "usages:", "-m:", "x:", ":", "usages@3:", "usages@:", "@x:"]),
    st.one_of(st.sampled_from(FAULT_KINDS), st.text(max_size=6)),
    st.one_of(st.just(""), st.sampled_from(["=1", "=-3", "=0.5", "=inf", "=nan", "=1e400", "=x", "="])),
)


@settings(max_examples=400, deadline=None)
@given(spec=st.one_of(st.lists(_ITEM, max_size=4).map(",".join), st.text(max_size=40)))
@example(spec="slow=inf")  # was accepted, then time.sleep(inf) crashed the simulator
@example(spec="clock=nan")
def test_fault_specs(spec):
    try:
        faults = parse_faults(spec)
    except ValueError:
        return
    assert all(f.value is None or math.isfinite(f.value) for f in faults)


@pytest.mark.parametrize("spec", ["slow=inf", "slow=nan", "exit=1e400", "clock=-inf"])
def test_regression_non_finite_values_are_refused(spec):
    with pytest.raises(ValueError, match="finite"):
        parse_faults(spec)


@settings(max_examples=100, deadline=None)
@given(
    argv=st.lists(
        st.sampled_from(
            [
                "--model",
                "--scenario",
                "--seed",
                "--time",
                "--fault",
                "--processes",
                "--",
                "info",
                "a3",
                "healthy",
                "1",
                "x",
                "slow=1",
                "--time=5",
                "--seed=q",
            ]
        ),
        max_size=6,
    ),
    env=st.dictionaries(
        st.sampled_from(["CANN_SIM_MODEL", "CANN_SIM_SEED", "CANN_SIM_TIME", "CANN_SIM_FAULT"]), st.text(max_size=8), max_size=3
    ),
)
def test_simulator_options(argv, env):
    try:
        parse_sim_options(argv, env)
    except ValueError:
        pass


@pytest.mark.parametrize("value", ["inf", "nan", "-inf"])
def test_regression_a_non_finite_simulated_time_is_refused(value):
    """CANN_SIM_TIME=inf was accepted and crashed every call with an OverflowError."""
    with pytest.raises(ValueError, match="finite"):
        parse_sim_options(["info"], {"CANN_SIM_TIME": value})
