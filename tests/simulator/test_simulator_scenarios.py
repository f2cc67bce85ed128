"""Scenario properties: the numbers each scenario promises, determinism and plausible motion."""

from __future__ import annotations

import pytest

from exporter.simulator import render, watch
from exporter.simulator.models import MODEL_NAMES, MODELS, get_model
from exporter.simulator.npusmi import EXIT_DCMI, EXIT_INVALID, Command, execute
from exporter.simulator.scenarios import (
    DEGRADED_CRITICAL_LOGIC_ID,
    DEGRADED_FAILING_LOGIC_ID,
    SAWTOOTH_PERIOD_S,
    SCENARIOS,
    UNDERUTILIZED_LOGIC_IDS,
    scenario_plan,
    simulate,
)

T0 = 1_780_000_000.0
TIMES = [T0 + 17.0 * k for k in range(20)]  # five minutes, off the noise knots


@pytest.fixture(params=MODEL_NAMES)
def model(request):
    return MODELS[request.param]


def test_names_are_exposed():
    assert SCENARIOS == ("healthy", "underutilized", "sawtooth", "degraded", "idle")
    assert set(MODEL_NAMES) >= {"910b3", "a3", "310p-duo"}


def test_model_shapes():
    assert [c.npu_id for c in MODELS["910b3"].chips] == list(range(8))
    a3 = MODELS["a3"]
    assert len(a3.chips) == 16 and a3.chips_per_npu == 2
    assert [c.phy_id for c in a3.chips] == list(range(16)) == [c.logic_id for c in a3.chips]
    duo = MODELS["310p-duo"]
    assert len(duo.chips) == 8 and duo.npu_ids != tuple(range(len(duo.npu_ids)))
    assert all(c.hbm_total_mb is None and c.ddr_total_mb > 40000 for c in duo.chips)


def test_healthy_keeps_every_chip_busy(model):
    for t in TIMES:
        state = simulate(model, "healthy", t)
        assert len(state.chips) == len(model.chips)
        assert all(chip.aicore_percent > 85 for chip in state.chips)
        assert {(p.npu_id, p.chip_id) for p in state.processes} == {(c.npu_id, c.chip_id) for c in state.chips}
        assert all(chip.health == "OK" for chip in state.chips)


def test_underutilized_lowers_exactly_the_documented_chips(model):
    for t in TIMES:
        state = simulate(model, "underutilized", t)
        low = {chip.logic_id for chip in state.chips if chip.aicore_percent < 60}
        assert low == set(UNDERUTILIZED_LOGIC_IDS)
        assert all(chip.aicore_percent > 85 for chip in state.chips if chip.logic_id not in low)
        busy = {(p.npu_id, p.chip_id) for p in state.processes}
        assert all((c.npu_id, c.chip_id) in busy for c in state.chips if c.logic_id in low)


def test_sawtooth_swings_with_a_60s_period(model):
    start = T0 - T0 % SAWTOOTH_PERIOD_S
    series = [simulate(model, "sawtooth", start + s).chips[0].aicore_percent for s in range(0, 60, 2)]
    assert min(series) <= 15 and max(series) >= 90
    again = [simulate(model, "sawtooth", start + 60 + s).chips[0].aicore_percent for s in range(0, 60, 2)]
    assert all(abs(a - b) <= 6 for a, b in zip(series, again))


def test_degraded_has_critical_missing_and_failing(model):
    state = simulate(model, "degraded", T0)
    critical = [c for c in state.chips if c.health == "Critical"]
    assert [c.logic_id for c in critical] == [DEGRADED_CRITICAL_LOGIC_ID]
    assert critical[0].error_codes and critical[0].ecc.hbm.double_bit + critical[0].ecc.ddr.double_bit > 0

    missing_npu = model.chips[-1].npu_id
    assert missing_npu not in state.npu_ids
    assert state.missing == tuple((c.npu_id, c.chip_id) for c in model.chips_of(missing_npu))
    present = {str(n) for n in state.npu_ids}
    chip_map = render.render_chip_map(state).splitlines()[1:]
    card_list = [line.split(":")[1].strip() for line in render.render_card_list(state).splitlines() if "NPU ID" in line]
    watched = watch.render_watch_rows(state, watch.watch_letters(model)).splitlines()
    assert {line.split()[0] for line in chip_map} == present == set(card_list)
    assert {line.split()[0] for line in watched} == present
    for key in ("usages", "board"):
        assert execute(Command(key, npu_id=missing_npu), state).code == EXIT_INVALID

    failing = model.chip_by_logic_id(DEGRADED_FAILING_LOGIC_ID).npu_id
    for key in ("usages", "common"):
        result = execute(Command(key, npu_id=failing), state)
        assert result.code == EXIT_DCMI and "dcmi module initialize failed. ret is -8005" in result.text
    assert execute(Command("power", npu_id=failing), state).code == 0
    assert execute(Command("usages", npu_id=state.npu_ids[0]), state).code == 0
    assert scenario_plan(model, "degraded").missing_npu_ids == (missing_npu,)


def test_degraded_missing_npu_is_absent_from_the_table(model):
    state = simulate(model, "degraded", T0)
    missing_npu = model.chips[-1].npu_id
    rows = [
        line.split("|")[1].split()
        for line in render.render_info(state).splitlines()
        if line.startswith("| ") and "npu-smi" not in line and "No running" not in line
    ]
    assert str(missing_npu) not in {row[0] for row in rows if row}
    assert f"NPU {missing_npu} " not in render.render_info(state)


def test_idle_has_no_load_and_only_reserved_memory(model):
    state = simulate(model, "idle", T0)
    assert state.processes == ()
    for chip in state.chips:
        assert chip.aicore_percent == chip.aivector_percent == chip.aicpu_percent == 0
        assert chip.npu_util_percent in (0, None) and chip.aicube_percent in (0, None)
        used = chip.hbm_used_mb if chip.hbm_used_mb is not None else chip.ddr_used_mb
        assert 0 < used < 4000
        assert chip.aicore_cur_freq_mhz < chip.aicore_freq_mhz


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_memory_is_reservation_plus_processes(model, scenario):
    state = simulate(model, scenario, T0)
    for chip in state.chips:
        procs = state.processes_of(chip.npu_id, chip.chip_id)
        used = chip.hbm_used_mb if chip.hbm_used_mb is not None else chip.ddr_used_mb
        total = chip.hbm_total_mb if chip.hbm_total_mb is not None else chip.ddr_total_mb
        assert used < total
        # npu-smi shows process memory below the chip's usage by the driver reservation.
        assert model.reserved_memory_mb <= used - sum(p.memory_mb for p in procs) < model.reserved_memory_mb + 300


def test_values_are_deterministic_and_seeded(model):
    assert simulate(model, "healthy", T0, seed=3) == simulate(model, "healthy", T0, seed=3)
    assert simulate(model, "healthy", T0, seed=3) != simulate(model, "healthy", T0, seed=4)


def test_values_move_smoothly(model):
    states = [simulate(model, "healthy", T0 + s) for s in range(30)]
    for before, after in zip(states, states[1:]):
        for a, b in zip(before.chips, after.chips):
            assert abs(a.aicore_percent - b.aicore_percent) <= 3
            assert abs(a.temperature_celsius - b.temperature_celsius) <= 1
    assert len({s.chips[0].aicore_percent for s in states}) > 1


def test_power_tracks_utilization_and_temperature_lags_it():
    model = MODELS["910b3"]
    start = T0 - T0 % SAWTOOTH_PERIOD_S
    low, high, after_drop, mid = (simulate(model, "sawtooth", start + 60 * phase).chips[0] for phase in (0.05, 0.95, 1.02, 1.5))
    assert high.power_watts > low.power_watts + 100
    # Just after the drop the package is still hot from the peak; half a period later it has cooled.
    assert after_drop.aicore_percent < 20 and after_drop.temperature_celsius > mid.temperature_celsius


def test_card_power_lives_where_npu_smi_prints_it():
    a3 = simulate(MODELS["a3"], "healthy", T0)
    for card in a3.cards:
        die0, die1 = a3.chips_of(card.npu_id)
        assert die0.power_watts == card.power_watts and die1.power_watts is None
    duo = simulate(MODELS["310p-duo"], "healthy", T0)
    assert all(chip.power_watts is None for chip in duo.chips)
    assert all(30 < card.power_watts < 150 for card in duo.cards)


def _ecc_counts(chip):
    return [count for memory in (chip.ecc.ddr, chip.ecc.hbm) for count in vars(memory).values()]


def test_ecc_counters_never_decrease(model):
    for scenario in ("healthy", "degraded"):
        states = [simulate(model, scenario, T0 + 2400.0 * k) for k in range(40)]  # ~27 h
        for before, after in zip(states, states[1:]):
            for a, b in zip(before.chips, after.chips):
                assert all(x <= y for x, y in zip(_ecc_counts(a), _ecc_counts(b)))
        last = states[-1].chips
        assert any(sum(_ecc_counts(c)) > 0 for c in last)


def test_benchmark_variant_has_64_processes():
    state = simulate(get_model("a3", processes_per_chip=4), "healthy", T0)
    assert len(state.chips) == 16 and len(state.processes) == 64
    assert all(len(state.processes_of(c.npu_id, c.chip_id)) == 4 for c in state.chips)
    assert len({p.pid for p in state.processes}) == 64
