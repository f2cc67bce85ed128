"""Pure renderers: NodeState -> the exact text npu-smi prints.

Layouts follow Huawei's printer (npu_info_print.c; docs/formats/npu-smi.md describes them)
and are checked byte for byte against the real outputs in tests/fixtures/npu-smi: the printf field widths are kept as Python format
specs so a 5-digit `used` touches the slash (`59189/ 65536`) exactly as on hardware.
Callers validate ids first; every renderer returns text ending in a newline.
"""

from __future__ import annotations

from exporter.simulator.faultevents import render_current_fault_event
from exporter.simulator.hardware import HARDWARE_RENDERERS
from exporter.simulator.models import FAMILY_310P, FAMILY_910_93, NodeModel
from exporter.simulator.record import Record, replace
from exporter.simulator.scenarios import CardState, ChipState, MemoryEcc, NodeState

USAGE_INFO = "Usage: npu-smi info <watch|proc|-h|-m|-l|-t type> [Options...]"
USAGE_TOP = "Usage: npu-smi <Command|-h|-v>"
INVALID_CARD_ID = f"Invalid card id.\nError parameter of -i\n{USAGE_INFO}\n"
INVALID_TYPE = "Error parameter of -t\n"
NO_CARD = "There is no NPU card on this server.\n"

# First line depends on who runs npu-smi; the container/root form is the common one.
_DCMI_PREFIX = "DrvMngGetConsoleLogLevel failed. (g_conLogLevel=3)\n"
_DCMI_TEXTS = {
    -8005: "dcmi module initialize failed. ret is -8005\n",
    -8020: "dcmi model initialized failed, because the device is used. ret is -8020\n",
}

# The 23.0.rc2 help text (info-h__910B1__23.0.rc2__1), printed for `info -h`.
INFO_HELP = f"""{USAGE_INFO}

Commands:
       watch          Show all device's status in scrolling format
       proc           Show device's matrix process status in scrolling format
       -h, --help     Show this help text and exit
       -m             Show all device's mapping information
       -l             Show all device's topology information
       -t type        Show information for type
                      type: board, flash, memory, usages, sensors, temp, power, volt, mac-addr,
                            common, health, product, ecc, ip, sys-time, i2c_check, work-mode,
                            ecc-enable, p2p-enable, ssh-enable, license, customized-info,
                            device-share, nve-level, aicpu-config, pcie-err, mcu-monitor,
                            err-count, boot-area, vnpu-mode, info-vnpu, vnpu-svm, cpu-num-cfg,
                            first-power-on-date, proc-mem, phyid-remap, vnpu-cfg-recover, key-manage,
                            template-info, pkcs-enable, p2p-mem-cfg, pwm-mode, pwm-duty-ratio,
                            boot-select, topo.

Options:
       -i %d          Card ID
       -c %d          Chip ID
       -p %d          Chip Physical ID
"""


def dcmi_error(code: int) -> str:
    """The two-line dcmi init failure (error-dcmi-init-* fixtures)."""
    return _DCMI_PREFIX + _DCMI_TEXTS.get(code, f"dcmi module initialize failed. ret is {code}\n")


def render_version(state: NodeState) -> str:
    return f"npu-smi version: {state.model.tool_version}\n"


def join_lines(lines: Iterable[str]) -> str:
    return "".join(line + "\n" for line in lines)


def is_910(model: NodeModel) -> bool:
    """910B and A3 share the HBM table and the 910-only keys."""
    return model.family != FAMILY_310P


def _num(value: float | None) -> str:
    """`%.1f`, or npu-smi's NA for a value it could not read."""
    return "NA" if value is None else f"{value:.1f}"


# --- npu-smi info: the overview table ----------------------------------------------------


class _Overview(Record):
    """One family's `npu-smi info` table: its rules, headers and row formats."""

    rule: str  # the full-width line above the version
    cols: str  # a line with column breaks
    eq: str  # the === line closing a header and an NPU
    version: str  # format of the version line: tool version, driver version
    head1: str
    head2: str
    chip_rows: Callable[[NodeModel, ChipState], list[str]]
    between_chips: str  # the line between two chips of one NPU
    proc_head: str
    process: str  # format of a process row, of ``p``
    idle_pad: int  # the width padding an NPU's "No running processes" line


def _hbm_rows(model: NodeModel, chip: ChipState) -> list[str]:
    power = "-" if chip.power_watts is None else f"{chip.power_watts:.1f}"
    first = (
        f"| {chip.npu_id:<5d} {chip.name:<20}| {chip.health:<13} | {power:<11} "
        f"{chip.temperature_celsius:<17d} {chip.hugepages_used:<5d}/ {chip.hugepages_total:<13d} |"
    )
    ident = f"{chip.chip_id:<5d} {chip.phy_id:<20d}" if model.family == FAMILY_910_93 else f"{chip.chip_id:<26d}"
    second = (
        f"| {ident}| {chip.bus_id:<13} | {chip.aicore_percent:<11d} "
        f"{chip.ddr_used_mb:<5d}/ {chip.ddr_total_mb:<10d} {chip.hbm_used_mb:<5d}/ {chip.hbm_total_mb:<13d} |"
    )
    return [first, second]


def _ddr_rows(model: NodeModel, chip: ChipState) -> list[str]:
    return [
        f"| {chip.npu_id:<7d} {chip.name:<22}| {chip.health:<15} | {'NA':<12} "
        f"{chip.temperature_celsius:<17d} {chip.hugepages_used:<6d}/ {chip.hugepages_total:<13d} |",
        f"| {chip.chip_id:<7d} {chip.logic_id:<22d}| {chip.bus_id:<15} | {chip.aicore_percent:<12d} "
        f"{chip.ddr_used_mb:<5d}/ {chip.ddr_total_mb:<32d} |",
    ]


# 910B and A3: 98 wide; A3 dies of one NPU are split by a full-width rule, NPUs by the === line.
_HBM_RULE = "+" + "-" * 96 + "+"
_HBM = _Overview(
    rule=_HBM_RULE,
    cols="+---------------------------+---------------+----------------------------------------------------+",
    eq="+===========================+===============+====================================================+",
    version="| npu-smi {:<24} Version: {:<52} |",
    head1="| NPU   Name                | Health        | Power(W)    Temp(C)           Hugepages-Usage(page)|",
    head2="| Chip                      | Bus-Id        | AICore(%)   Memory-Usage(MB)  HBM-Usage(MB)        |",
    chip_rows=_hbm_rows,
    between_chips=_HBM_RULE,
    proc_head="| NPU     Chip              | Process id    | Process name             | Process memory(MB)      |",
    process="| {p.npu_id:<7d} {p.chip_id:<18d}| {p.pid:<13d} | {p.name:<24} | {p.memory_mb:<23d} |",
    idle_pad=54,
)
_A3 = replace(_HBM, head2="| Chip  Phy-ID              | Bus-Id        | AICore(%)   Memory-Usage(MB)  HBM-Usage(MB)        |")
# 310P cards: 106 wide, chips of one card split by a line with column breaks.
_DDR_COLS = "+-------------------------------+-----------------+------------------------------------------------------+"
_DDR = _Overview(
    rule="+" + "-" * 104 + "+",
    cols=_DDR_COLS,
    eq="+===============================+=================+======================================================+",
    version="| npu-smi {:<40} Version: {:<44} |",
    head1="| NPU     Name                  | Health          | Power(W)     Temp(C)           Hugepages-Usage(page) |",
    head2="| Chip    Device                | Bus-Id          | AICore(%)    Memory-Usage(MB)                        |",
    chip_rows=_ddr_rows,
    between_chips=_DDR_COLS,
    proc_head="| NPU     Chip                  | Process id      | Process name             | Process memory(MB)        |",
    process="| {p.npu_id:<7d} {p.chip_id:<22d}| {p.pid:<15d} | {p.name:<24} | {p.memory_mb:<25d} |",
    idle_pad=62,
)

# typing is for type checkers only here: importing it costs every simulated call ~7 ms.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable


def render_info(state: NodeState) -> str:
    """`npu-smi info`: 98 wide on 910B/A3, 106 wide on 310P (cards print processes too)."""
    model = state.model
    table = _DDR if not is_910(model) else _A3 if model.family == FAMILY_910_93 else _HBM
    lines = [table.rule, table.version.format(model.tool_version, model.driver_version), table.cols, table.head1, table.head2, table.eq]
    for npu_id in state.npu_ids:
        chips = state.chips_of(npu_id)
        for index, chip in enumerate(chips):
            lines += table.chip_rows(model, chip)
            lines.append(table.between_chips if index < len(chips) - 1 else table.eq)
    lines += [table.cols, table.proc_head, table.eq]
    for npu_id in state.npu_ids:
        rows = [table.process.format(p=p) for chip in state.chips_of(npu_id) for p in state.processes_of(npu_id, chip.chip_id)]
        lines += rows or [f"| No running processes found in NPU {npu_id:<7d}{'':{table.idle_pad}}|"]
        lines.append(table.eq)
    return join_lines(lines)


# --- npu-smi info -m / -l -----------------------------------------------------------------


def render_chip_map(state: NodeState) -> str:
    """`-m`: `\\t%-30s ` columns; header and Mcu rows keep their trailing padding."""
    if not state.cards:
        return NO_CARD
    a3 = state.model.family == FAMILY_910_93
    head = ("NPU ID", "Chip ID", "Chip Logic ID") + (("Chip Phy-ID",) if a3 else ()) + ("Chip Name",)
    lines = ["\t" + " ".join(f"{h:<30}" for h in head)]
    for card in state.cards:
        for chip in state.chips_of(card.npu_id):
            ids = (chip.npu_id, chip.chip_id, chip.logic_id) + ((chip.phy_id,) if a3 else ())
            lines.append("\t" + "".join(f"{i:<30d} " for i in ids) + state.model.map_name)
        mcu = (str(card.npu_id), str(state.model.chips_per_npu), "-") + (("-",) if a3 else ()) + ("Mcu",)
        lines.append("\t" + " ".join(f"{c:<30}" for c in mcu))
    return join_lines(lines)


def render_card_list(state: NodeState) -> str:
    """`-l`: servers of the 910 family omit Product Name and Serial Number."""
    if not state.cards:
        return NO_CARD
    lines = [_kv("Total Count", len(state.cards)), ""]
    for card in state.cards:
        lines.append(_kv("NPU ID", card.npu_id))
        if not (is_910(state.model) and state.model.is_server):
            lines += [_kv("Product Name", state.model.board.product_name), _kv("Serial Number", card.serial_number)]
        lines += [_kv("Chip Count", card.chip_count), ""]
    return join_lines(lines)


# --- npu-smi info -t <type> -i <id> [-c <chip>] -------------------------------------------


def _kv(key: str, value: object, width: int = 30) -> str:
    return f"\t{key:<{width}} : {value}"


def _selected(state: NodeState, npu_id: int, chip_id: int | None) -> tuple[ChipState, ...]:
    return tuple(c for c in state.chips_of(npu_id) if chip_id is None or c.chip_id == chip_id)


def _blocks(state: NodeState, npu_id: int, chip_id: int | None, body: Callable[[ChipState], list[str]], width: int = 30) -> str:
    """The common shape: NPU ID, Chip Count, blank, then per chip its fields, `Chip ID`, blank."""
    card = state.card(npu_id)
    lines = [_kv("NPU ID", npu_id, width), _kv("Chip Count", card.chip_count, width), ""]
    for chip in _selected(state, npu_id, chip_id):
        lines += body(chip)
        lines += [_kv("Chip ID", chip.chip_id, width), ""]
    return join_lines(lines)


def render_usages(state: NodeState, npu_id: int, chip_id: int | None = None) -> str:
    return _blocks(state, npu_id, chip_id, lambda chip: _usages_fields(state.model, chip))


def _usages_fields(model: NodeModel, chip: ChipState) -> list[str]:
    if not is_910(model):
        return [
            _kv("DDR Capacity(MB)", chip.ddr_total_mb),
            _kv("DDR Usage Rate(%)", chip.ddr_usage_percent),
            _kv("DDR Hugepages Total(page)", chip.hugepages_total),
            _kv("DDR Hugepages Usage Rate(%)", 0),
            _kv("Aicore Usage Rate(%)", chip.aicore_percent),
            _kv("Aicpu Usage Rate(%)", chip.aicpu_percent),
            _kv("Ctrlcpu Usage Rate(%)", chip.ctrlcpu_percent),
            _kv("Vectorcore Usage Rate(%)", chip.aivector_percent),
            _kv("DDR Bandwidth Usage Rate(%)", chip.ddr_bandwidth_percent),
        ] + [_kv(f"DVPP {unit} Usage Rate(%)", 0) for unit in ("VDEC", "VPC", "VENC", "JPEGE", "JPEGD")]
    return [
        _kv("DDR Capacity(MB)", 0),  # HBM-only chips: npu-smi prints the DDR keys as 0
        _kv("DDR Usage Rate(%)", 0),
        _kv("DDR Hugepages Total(page)", 0),
        _kv("DDR Hugepages Usage Rate(%)", 0),
        _kv("HBM Capacity(MB)", chip.hbm_total_mb),
        _kv("HBM Usage Rate(%)", chip.hbm_usage_percent),
        _kv("Aicore Usage Rate(%)", chip.aicore_percent),
        _kv("Aivector Usage Rate(%)", chip.aivector_percent),
        _kv("Aicpu Usage Rate(%)", chip.aicpu_percent),
        _kv("Ctrlcpu Usage Rate(%)", chip.ctrlcpu_percent),
        _kv("DDR Bandwidth Usage Rate(%)", chip.ddr_bandwidth_percent),
        _kv("HBM Bandwidth Usage Rate(%)", chip.hbm_bandwidth_percent),
        _kv("NPU Utilization(%)", chip.npu_util_percent),
        _kv("Aicube Usage Rate(%)", chip.aicube_percent),
    ]


def render_common(state: NodeState, npu_id: int, chip_id: int | None = None) -> str:
    """`-t common`: `Chip ID` opens each block; the MCU block closes the card (310P: card power)."""
    model, card = state.model, state.card(npu_id)
    lines = [_kv("NPU ID", npu_id), _kv("Chip Count", card.chip_count)]
    for chip in _selected(state, npu_id, chip_id):
        lines += ["", _kv("Chip ID", chip.chip_id), _kv("Memory Usage Rate(%)", chip.ddr_usage_percent)]
        if is_910(model):
            lines.append(_kv("HBM Usage Rate(%)", chip.hbm_usage_percent))
        lines += [
            _kv("Aicore Usage Rate(%)", chip.aicore_percent),
            _kv("Aicore Freq(MHZ)", chip.aicore_freq_mhz),
            _kv("Aicore curFreq(MHZ)", chip.aicore_cur_freq_mhz),
        ]
        if is_910(model):
            lines.append(_kv("Aicore Count", model.aicore_count))
        lines.append(_kv("Temperature(C)", chip.temperature_celsius))
        if is_910(model):
            lines.append(_kv("NPU Real-time Power(W)", _num(chip.power_watts)))
    if chip_id is None:
        lines += ["", _kv("Chip Name", "mcu"), _kv("Temperature(C)", card.mcu_temperature_celsius)]
        if not is_910(model):
            lines.append(_kv("NPU Real-time Power(W)", _num(card.power_watts)))
    return join_lines(lines)


def render_memory(state: NodeState, npu_id: int, chip_id: int | None = None) -> str:
    model = state.model

    def fields(chip: ChipState) -> list[str]:
        if not is_910(model):
            return [
                _kv("Total DDR Capacity(MB)", model.ddr_physical_mb),
                _kv("DDR Capacity(MB)", chip.ddr_total_mb),
                _kv("DDR Clock Speed(MHz)", model.ddr_clock_mhz),
            ]
        return [
            _kv("DDR Capacity(MB)", 0),
            _kv("DDR Clock Speed(MHz)", 0),
            _kv("HBM Capacity(MB)", chip.hbm_total_mb),
            _kv("HBM Clock Speed(MHz)", model.hbm_clock_mhz),
            _kv("HBM Temperature(C)", chip.hbm_temperature_celsius),
            _kv("HBM Manufacturer ID", f"0x{model.hbm_manufacturer_id:X}"),
        ]

    return _blocks(state, npu_id, chip_id, fields)


def render_power(state: NodeState, npu_id: int, chip_id: int | None = None) -> str:
    """Chips that print no power of their own (A3 die 1, 310P) read NA."""
    return _blocks(state, npu_id, chip_id, lambda chip: [_kv("NPU Real-time Power(W)", _num(chip.power_watts))])


def render_temp(state: NodeState, npu_id: int, chip_id: int | None = None) -> str:
    """`-t temp`: the chip key has a space before (C); the MCU lists the board's LM75 sensors."""
    key = "NPU Temperature (C)" if state.model.is_server else "Temperature (C)"
    text = _blocks(state, npu_id, chip_id, lambda chip: [_kv(key, chip.temperature_celsius)])
    if chip_id is not None:
        return text
    card = state.card(npu_id)
    sensors = [f"\t{name:<8}{' (C)':<22} : {value}" for name, value in card.board_sensors]
    return text + join_lines(sensors + [_kv("Chip Name", "MCU"), ""])


def render_health(state: NodeState, npu_id: int, chip_id: int | None = None) -> str:
    """With -c: the three lines of info-t-health fixtures; without: one block per chip."""
    if chip_id is not None:
        return join_lines(_health_fields(_selected(state, npu_id, chip_id)[0]))
    return _blocks(state, npu_id, None, _health_fields)


def _health_fields(chip: ChipState) -> list[str]:
    if not chip.error_codes:
        return [_kv("Health Status", chip.health), _kv("Error Code", "NA"), _kv("Error Information", "NA")]
    lines = [
        _kv("Health Status", chip.health),
        _kv("Error Code", " ".join(chip.error_codes)),
        _kv("Error Information", chip.error_information[0]),
    ]
    for info in chip.error_information[1:]:
        lines += ["", _kv(" ", info)]  # printf("\n\t%-30s : %s\n", " ", ...)
    return lines


def render_ecc(state: NodeState, npu_id: int, chip_id: int | None = None) -> str:
    """`-t ecc`: keys padded to 40; 910B/A3 print two DDR lines then HBM, 310P cards DDR only."""

    def fields(chip: ChipState) -> list[str]:
        ddr = _ecc_lines("DDR", chip.ecc.ddr)
        if not is_910(state.model):
            return ddr + [_kv("DDR Single Bit Next-Isolated Pages Count", 0, 40), _kv("DDR Double Bit Next-Isolated Pages Count", 0, 40)]
        return ddr[:2] + _ecc_lines("HBM", chip.ecc.hbm)

    return _blocks(state, npu_id, chip_id, fields, width=40)


def _ecc_lines(memory: str, ecc: MemoryEcc) -> list[str]:
    """One memory's six counters, as `-t ecc` labels them."""
    return [
        _kv(f"{memory} {label}", count, 40)
        for label, count in (
            ("Single Bit Error Count", ecc.single_bit),
            ("Double Bit Error Count", ecc.double_bit),
            ("Single Bit Aggregate Total Err Cnt", ecc.single_bit_aggregate),
            ("Double Bit Aggregate Total Err Cnt", ecc.double_bit_aggregate),
            ("Single Bit Isolated Pages Count", ecc.single_bit_isolated_pages),
            ("Double Bit Isolated Pages Count", ecc.double_bit_isolated_pages),
        )
    ]


def render_proc_mem(state: NodeState, npu_id: int, chip_id: int | None = None) -> str:
    """`-t proc-mem`: process lines have no space after the colons; name field 17 + 1."""

    def fields(chip: ChipState) -> list[str]:
        procs = state.processes_of(npu_id, chip.chip_id)
        return [f"\tProcess id:{p.pid:<7d} Process name:{p.name:<17} Process memory(MB):{p.memory_mb}" for p in procs] or [
            "\tNo process in device."
        ]

    return _blocks(state, npu_id, chip_id, fields)


def render_board(state: NodeState, npu_id: int, chip_id: int | None = None) -> str:
    """`-t board`: the card; with -c a chip (or the Mcu, at chip id = chips per NPU)."""
    model, card = state.model, state.card(npu_id)
    if chip_id is None:
        return join_lines(_board_card(model, card, state.chips_of(npu_id)[0]))
    if chip_id == model.chips_per_npu:
        return join_lines(_board_mcu(model, npu_id, chip_id))
    return join_lines(_board_chip(model, _selected(state, npu_id, chip_id)[0]))


def _board_card(model: NodeModel, card: CardState, first: ChipState) -> list[str]:
    board = model.board
    lines = [
        _kv("NPU ID", card.npu_id),
        _kv("Product Name", board.product_name),
        _kv("Model", board.model),
        _kv("Manufacturer", board.manufacturer),
        _kv("Serial Number", card.serial_number),
        _kv("Software Version", model.driver_version),
        _kv("Firmware Version", board.firmware_version),
        _kv("Compatibility", "OK"),
        _kv("Board ID", f"0x{board.board_id:02x}"),
    ]
    if board.main_board_id is not None:
        lines.append(_kv("Main Board ID", f"0x{board.main_board_id:02x}"))
    lines += [
        _kv("PCB ID", board.pcb_id),
        _kv("BOM ID", board.bom_id),
        _kv("PCIe Bus Info", first.bus_id),
        _kv("Slot ID", card.slot_id),
        _kv("Class ID", "NA"),
        _kv("PCI Vendor ID", "0x19E5"),
        _kv("PCI Device ID", f"0x{board.pci_device_id:04X}"),
        _kv("Subsystem Vendor ID", f"0x{board.subsystem_vendor_id:04X}"),
        _kv("Subsystem Device ID", f"0x{board.subsystem_device_id:04X}"),
        _kv("Chip Count", card.chip_count),
    ]
    if not is_910(model):
        lines.append(_kv("Chip Fault", 0))  # card boards (print_npu_card_info)
    return lines


def _board_chip(model: NodeModel, chip: ChipState) -> list[str]:
    board = model.board
    lines = [_kv("NPU ID", chip.npu_id)]
    if board.npu_name is not None:
        lines.append(_kv("NPU Name", board.npu_name))
    lines.append(_kv("Chip ID", chip.chip_id))
    if model.family != FAMILY_910_93:
        lines.append(_kv("Chip Type", "Ascend"))
    lines += [_kv("Chip Name", model.chip_name), _kv("Chip Version", board.chip_version), _kv("Board ID", f"0x{board.board_id:02x}")]
    if is_910(model):
        lines += [_kv("PCB ID", "NA"), _kv("BOM ID", board.bom_id), _kv("VDie ID", chip.vdie_id), _kv("NDie ID", chip.ndie_id)]
    else:
        lines.append(_kv("Die ID", chip.vdie_id))
    return lines + [
        _kv("Chip Position ID", chip.chip_id),
        _kv("PCIe Bus Info", chip.bus_id),
        _kv("Firmware Version", board.firmware_version),
    ]


def _board_mcu(model: NodeModel, npu_id: int, chip_id: int) -> list[str]:
    return [
        _kv("NPU ID", npu_id),
        _kv("Chip ID", chip_id),
        _kv("Chip Name", "mcu"),
        _kv("Board ID", f"0x{model.board.board_id:02x}"),
        _kv("PCB ID", "NA"),
        _kv("BOM ID", model.board.bom_id),
        _kv("Chip Position ID", chip_id),
        _kv("Firmware Version", model.board.firmware_version),
    ]


RENDERERS = {
    "usages": render_usages,
    "common": render_common,
    "memory": render_memory,
    "power": render_power,
    "temp": render_temp,
    "health": render_health,
    "ecc": render_ecc,
    "board": render_board,
    "proc-mem": render_proc_mem,
    "current-fault-event": render_current_fault_event,
    **HARDWARE_RENDERERS,  # volt, pcie-err, err-count, sensors, sio-info, hccs, hccs-bw, spod-info
}
