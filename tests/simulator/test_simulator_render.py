"""Renderers against the real npu-smi fixtures: layout for every scenario, bytes for known values."""

from __future__ import annotations

import pytest

from exporter.simulator import render, watch
from exporter.simulator.models import MODEL_NAMES, MODELS, get_model
from exporter.simulator.npusmi import Command, execute
from exporter.simulator.record import replace
from exporter.simulator.scenarios import (
    SCENARIOS,
    NodeState,
    ProcessState,
    simulate,
    without_npu,
)

T0 = 1_780_000_000.0  # a fixed instant in 2026, after the ECC epoch
OVERVIEW_FIXTURES = {
    "910b3": "info__910B3__25.5.1__1",
    "a3": "info__910_93-A3__25.2.0__1",
    "310p-duo": "info__310P3-300IDuo__24.1.rc2__1",
}


def _commands(state: NodeState) -> list[Command]:
    """Every command the simulator answers, for every present NPU (and chip)."""
    commands = [Command(key) for key in ("info", "m", "l", "version", "help")]
    for npu_id in state.npu_ids:
        for key in render.RENDERERS:
            commands.append(Command(key, npu_id=npu_id))
            commands += [Command(key, npu_id=npu_id, chip_id=c.chip_id) for c in state.chips_of(npu_id)]
    return commands


@pytest.mark.parametrize("scenario", SCENARIOS)
@pytest.mark.parametrize("model", MODEL_NAMES)
def test_every_model_and_scenario_renders(model, scenario):
    state = simulate(MODELS[model], scenario, T0)
    for command in _commands(state):
        result = execute(command, state)
        assert result.text.endswith("\n"), command
    letters = watch.watch_letters(state.model)
    rows = watch.render_watch_rows(state, letters).splitlines()
    assert len(rows) == len(state.chips)
    assert all(len(row) == len(rows[0]) for row in rows)


def _separators(lines: list[str]) -> set[str]:
    return {line for line in lines if line.startswith("+")}


@pytest.mark.parametrize("scenario", SCENARIOS)
@pytest.mark.parametrize("model", MODEL_NAMES)
def test_overview_layout_matches_real_fixture(model, scenario, fixture_text):
    real = fixture_text(OVERVIEW_FIXTURES[model]).splitlines()
    ours = render.render_info(simulate(MODELS[model], scenario, T0)).splitlines()
    assert {len(line) for line in ours} == {len(line) for line in real}
    assert ours[:6] == real[:6]  # version line and the two-row column header
    assert _separators(ours) <= _separators(real)
    process_header = real.index(next(line for line in real if "Process id" in line))
    assert real[process_header - 1 : process_header + 2] == ours[ours.index(real[process_header]) - 1 :][:3]


def test_a3_separates_dies_with_full_width_rule():
    lines = render.render_info(simulate(MODELS["a3"], "healthy", T0)).splitlines()
    assert lines.count("+" + "-" * 96 + "+") == 1 + 8  # top rule + one between the dies of each NPU


# --- byte-exact reproductions of real captures ------------------------------------------------


def _set_chips(state: NodeState, values: dict[tuple[int, int], dict]) -> NodeState:
    chips = tuple(replace(c, **values.get((c.npu_id, c.chip_id), {})) for c in state.chips)
    return replace(state, chips=chips)


def _set_card(state: NodeState, npu_id: int, **changes) -> NodeState:
    cards = tuple(replace(c, **changes) if c.npu_id == npu_id else c for c in state.cards)
    return replace(state, cards=cards)


def _keep_npus(state: NodeState, keep: set[int]) -> NodeState:
    for npu_id in state.npu_ids:
        if npu_id not in keep:
            state = without_npu(state, npu_id)
    return state


def test_910b3_overview_is_byte_exact(fixture_text):
    rows = [
        (99.4, 34, 59189),
        (91.1, 32, 59184),
        (86.9, 33, 59186),
        (93.2, 35, 59186),
        (88.7, 37, 59932),
        (91.5, 37, 59944),
        (94.9, 37, 59021),
        (90.1, 39, 19319),
    ]
    procs = [
        (3233241, "VLLMWorker_TP", 55844),
        (3233701, "VLLMWorker_TP", 55840),
        (3234962, "VLLMWorker_TP", 55842),
        (3235553, "VLLMWorker_TP", 55842),
        (3232170, "VLLMEngineCor", 56588),
        (3231929, "VLLMEngineCor", 56600),
        (2895155, "VLLMEngineCor", 55671),
        (1886762, "VLLMEngineCor", 15975),
    ]
    state = _set_chips(
        simulate(MODELS["910b3"], "idle", T0),
        {
            (npu, 0): {"power_watts": p, "temperature_celsius": temp, "hbm_used_mb": hbm, "aicore_percent": 0}
            for npu, (p, temp, hbm) in enumerate(rows)
        },
    )
    state = replace(state, processes=tuple(ProcessState(npu, 0, pid, name, mem) for npu, (pid, name, mem) in enumerate(procs)))
    assert render.render_info(state) == fixture_text("info__910B3__25.5.1__1")


def test_a3_overview_is_byte_exact(fixture_text):
    state = _keep_npus(simulate(MODELS["a3"], "idle", T0), {0, 1})
    state = _set_chips(
        state,
        {
            (0, 0): {"power_watts": 162.8, "temperature_celsius": 37, "hbm_used_mb": 3133},
            (0, 1): {"temperature_celsius": 37, "hbm_used_mb": 2876},
            (1, 0): {"power_watts": 167.1, "temperature_celsius": 38, "hbm_used_mb": 3116},
            (1, 1): {"temperature_celsius": 38, "hbm_used_mb": 10568},
        },
    )
    state = replace(state, processes=(ProcessState(1, 1, 990711, "python", 7746),))
    assert render.render_info(state) == fixture_text("info__910_93-A3__25.2.0__1")


def test_300i_duo_overview_is_byte_exact(fixture_text):
    state = _keep_npus(simulate(MODELS["310p-duo"], "idle", T0), {1792})
    state = _set_chips(
        state,
        {
            (1792, 0): {"logic_id": 0, "temperature_celsius": 36, "ddr_used_mb": 1821},
            (1792, 1): {"logic_id": 1, "temperature_celsius": 36, "ddr_used_mb": 1041},
        },
    )
    assert render.render_info(state) == fixture_text("info__310P3-300IDuo__24.1.rc2__1")


def test_910b3_chip_map_is_byte_exact(fixture_text):
    state = simulate(MODELS["910b3"], "healthy", T0)
    assert render.render_chip_map(state) == fixture_text("info-m__910B3__25.5.1__1")


def test_a3_chip_map_matches_partial_fixture(fixture_text):
    """The fixture stands 4 spaces for the TAB and drops trailing padding."""
    real = fixture_text("info-m__910_93-A3__unknown__1__partial").splitlines()
    ours = render.render_chip_map(simulate(MODELS["a3"], "healthy", T0)).splitlines()
    assert [line.replace("\t", "    ").rstrip() for line in ours[: len(real)]] == real


def test_310p_chip_map_uses_31_wide_columns(fixture_text):
    real = fixture_text("info-m__310P-300IDuo-x4-anon__unknown__1").splitlines()
    ours = render.render_chip_map(simulate(MODELS["310p-duo"], "healthy", T0)).splitlines()
    assert ours[0].lstrip("\t").rstrip() == real[0]
    assert [line.count("Mcu") for line in ours] == [line.count("Mcu") for line in real]
    assert ours[3] == "\t" + f"{224:<30} {2:<30} {'-':<30} {'Mcu':<30}"


def test_910b3_card_list_matches_fixture(fixture_text):
    """The fixture's TABs were expanded to 8 spaces and its final blank line dropped."""
    ours = render.render_card_list(simulate(MODELS["910b3"], "healthy", T0))
    assert ours.replace("\t", " " * 8) == fixture_text("info-l__910B-8card__25.5.1__1") + "\n"


def _npu0(**chip) -> NodeState:
    return _set_chips(simulate(MODELS["910b3"], "idle", T0), {(0, 0): chip})


def test_910b3_usages_is_byte_exact(fixture_text):
    state = _npu0(
        hbm_used_mb=59189,
        aicore_percent=0,
        aivector_percent=0,
        aicpu_percent=0,
        ctrlcpu_percent=7,
        hbm_bandwidth_percent=0,
        npu_util_percent=0,
        aicube_percent=0,
    )
    assert render.render_usages(state, 0) == fixture_text("info-t-usages__910B3__25.5.1__1")


def test_910b3_common_is_byte_exact(fixture_text):
    state = _npu0(hbm_used_mb=59189, aicore_percent=0, aicore_cur_freq_mhz=800, temperature_celsius=33, power_watts=99.7)
    state = _set_card(state, 0, mcu_temperature_celsius=31)
    assert render.render_common(state, 0) == fixture_text("info-t-common__910B3__25.5.1__1")


def test_910b3_memory_power_temp_are_byte_exact(fixture_text):
    assert render.render_memory(_npu0(hbm_temperature_celsius=31), 0) == fixture_text("info-t-memory__910B3__25.5.1__1")
    assert render.render_power(_npu0(power_watts=99.4), 0) == fixture_text("info-t-power__910B3__25.5.1__1")
    state = _set_card(_npu0(temperature_celsius=33), 0, board_sensors=(("LM75A_TE", 31), ("LM75B_TE", 33)))
    assert render.render_temp(state, 0) == fixture_text("info-t-temp__910B3__25.5.1__1")


def test_910b3_proc_mem_is_byte_exact(fixture_text):
    state = replace(_npu0(), processes=(ProcessState(0, 0, 3233241, "VLLMWorker_TP", 55844),))
    assert render.render_proc_mem(state, 0) == fixture_text("info-t-proc-mem__910B3__25.5.1__1")


def test_empty_process_name_keeps_the_field_width(fixture_text):
    real = fixture_text("info-t-proc-mem__910_93-A3__unknown__1__partial").splitlines()[3].strip()
    state = replace(_npu0(), processes=(ProcessState(0, 0, 3229095, "", 48208),))
    assert render.render_proc_mem(state, 0).splitlines()[3].strip() == real


def test_910b3_board_is_byte_exact(fixture_text):
    state = _set_card(_npu0(), 0, serial_number="1023C7991472", slot_id=0)
    assert render.render_board(state, 0) == fixture_text("info-t-board__910B3__25.5.1__1")


def test_board_chip_follows_the_910_layout(fixture_text):
    real = fixture_text("info-t-board-chip__910A__23.0.5__1").splitlines()
    ours = render.render_board(simulate(MODELS["910b3"], "healthy", T0), 0, 0).splitlines()
    assert [line.split(":")[0] for line in ours] == [line.split(":")[0] for line in real]


def test_health_is_byte_exact(fixture_text):
    assert render.render_health(_npu0(), 0, 0) == fixture_text("info-t-health__910A__23.0.x__1")
    alarm = _npu0(
        health="Alarm",
        error_codes=("A4025021", "8C03A000", "8C084E00"),
        error_information=(
            "ascend_monitor adda heart beat lost error",
            "node type=process-manager, sensor type=General Software, event state=The process start failed or exit abnormally",
            "node type=adda, sensor type=Heartbeat Sensor, event state=Heartbeat Lost.",
        ),
    )
    assert render.render_health(alarm, 0, 0) == fixture_text("info-t-health__910A__23.0.7__2")


def test_ecc_keys_are_padded_to_40(fixture_text):
    """910B/A3 print the two DDR counts and the six HBM lines of the 910 doc sample."""
    real = fixture_text("info-t-ecc__910-doc__unknown__1").splitlines()
    ours = render.render_ecc(simulate(MODELS["910b3"], "healthy", T0), 0).splitlines()

    def keys(lines, word):
        return [line.split(" : ")[0].strip("\t") for line in lines if line.strip().startswith(word)]

    assert keys(ours, "HBM") == keys(real, "HBM")
    assert keys(ours, "DDR") == keys(real, "DDR")[:2]
    assert keys(ours, "NPU ID") == keys(real, "NPU ID")
    assert all(line.index(" : ") == 41 for line in ours if line)


def test_errors_and_version_are_byte_exact(fixture_text):
    assert render.INVALID_CARD_ID == fixture_text("error-invalid-card-id__910A__23.0.7__1")
    assert render.dcmi_error(-8005) == fixture_text("error-dcmi-init-8005__container__unknown__1")
    assert render.dcmi_error(-8020) == fixture_text("error-dcmi-init-8020__container__unknown__1").split("\n", 1)[1]
    version = render.render_version(simulate(get_model("910b3"), "idle", T0))
    assert version.replace("25.5.1", "x.x.x") == fixture_text("version-v__doc__unknown__1")
    assert render.INFO_HELP == fixture_text("info-h__910B1__23.0.rc2__1")


def test_watch_header_and_rows_are_byte_exact(fixture_text):
    real = fixture_text("info-watch-i__910B-likely__unknown__1").splitlines()
    model = MODELS["910b3"]
    state = _set_chips(
        simulate(model, "idle", T0),
        {
            (2, 0): {
                "power_watts": 90.1,
                "temperature_celsius": 34,
                "aicore_percent": 0,
                "aicpu_percent": 0,
                "ctrlcpu_percent": 2,
                "hbm_used_mb": 3300,
                "hbm_bandwidth_percent": 0,
            }
        },
    )
    letters = watch.watch_letters(model, "ptaicmb")  # the pre-24.x column set
    assert watch.render_watch_header(model, letters) == real[0] + "\n"
    assert watch.render_watch_rows(state, letters, npu_id=2) == real[1] + "\n"


def test_watch_adds_wide_columns_on_new_910_builds(fixture_text):
    """Column names as in the 950 doc sample; spacing from the print source (" %-12s"),
    since the doc's 15-wide cells come from the 950 (V2) printer."""
    real_header = fixture_text("info-watch__950-Atlas350-doc__unknown__1").splitlines()[0]
    ours = watch.render_watch_header(MODELS["a3"], watch.watch_letters(MODELS["a3"]))
    names = [name for _, name in watch.WATCH_COLUMNS]
    assert [real_header.index(name) for name in names] == sorted(real_header.index(name) for name in names)
    assert ours == (
        "NpuID(Idx)  ChipId(Idx) Pwr(W)      Temp(C)     AI Core(%)  AI Cpu(%)   "
        "Ctrl Cpu(%) Memory(%)   Memory BW(%) NPU Util(%)  AI Cube(%)  \n"
    )
    state = simulate(MODELS["a3"], "healthy", T0)
    die1 = watch.render_watch_rows(state, "p", npu_id=0, chip_id=1)
    assert die1 == f"{0:<12}{1:<12}{'-':<12}\n"
    assert watch.render_watch_rows(simulate(MODELS["310p-duo"], "healthy", T0), "p").split()[2] == "NA"


def test_64_process_a3_table_keeps_width():
    state = simulate(get_model("a3", processes_per_chip=4), "healthy", T0)
    lines = render.render_info(state).splitlines()
    assert len(state.processes) == 64
    assert sum(1 for line in lines if line.startswith("| ") and line.split("|")[2].strip().isdigit()) == 64
    assert {len(line) for line in lines} == {98}


def test_no_card_left_prints_the_real_message():
    state = simulate(MODELS["910b3"], "idle", T0)
    empty = replace(state, chips=(), cards=(), processes=())
    assert render.render_chip_map(empty) == render.NO_CARD
    assert render.render_card_list(empty) == render.NO_CARD
