"""Simulated node models: the static hardware facts npu-smi prints.

Each model mirrors a real host captured in tests/fixtures/npu-smi (driver version,
ids, names, capacities, table family); the per-sample numbers come from scenarios.py.
Standard library only: the simulator imports nothing else from ``exporter``.
"""

from __future__ import annotations

from exporter.simulator.record import Record, replace

# hashlib's sha256 without hashlib's OpenSSL bindings, which cost every simulated call ~2 ms.
try:
    from _sha2 import sha256  # Python 3.12 on
except ImportError:
    try:
        from _sha256 import sha256
    except ImportError:  # an interpreter built without them
        from hashlib import sha256

# npu-smi's print branches (npu_info_print.c): they decide columns, keys and widths.
FAMILY_910B = "910b"  # Atlas A2 (910B1-4): 98-wide table, HBM only
FAMILY_910_93 = "910_93"  # Atlas A3: two dies per NPU, "Chip  Phy-ID", die 1 power "-"
FAMILY_310P = "310p"  # 310P cards: 106-wide table, DDR only, power NA


class ChipSpec(Record):
    """One chip (die) as the driver enumerates it."""

    npu_id: int  # the -i id (card id)
    chip_id: int  # index within the card
    logic_id: int  # `-m` Chip Logic ID: what frameworks call the device
    phy_id: int | None  # A3 Chip Phy-ID; None where npu-smi does not print one
    bus_id: str
    vdie_id: str  # `-t board -c` VDie ID / Die ID: five 8-hex words
    ndie_id: str
    hbm_total_mb: int | None  # None: no HBM (310P)
    ddr_total_mb: int  # 0 on HBM-only chips (npu-smi forces 0/0)


class BoardSpec(Record, kw_only=True):
    """Card-level `-t board` / `-l` facts shared by every NPU of the model; a default is what
    every modelled card prints."""

    product_name: str
    model: str = "NA"
    manufacturer: str = "Huawei"
    firmware_version: str
    board_id: int
    main_board_id: int | None = None  # A3 only
    pcb_id: str = "A"
    bom_id: int = 1
    pci_device_id: int
    subsystem_vendor_id: int = 0x19E5  # Huawei
    subsystem_device_id: int
    chip_version: str = "V1"
    npu_name: str | None = None  # A3 `-t board -c` "NPU Name"


class NodeModel(Record):
    """A whole node: what `npu-smi info -m` would enumerate plus static properties."""

    name: str
    family: str
    chip_name: str  # table "Name" and board "Chip Name": 910B3, Ascend910, 310P3
    map_name: str  # `-m` "Chip Name": "Ascend 910B3", "Ascend910", "Ascend 310P3"
    tool_version: str
    driver_version: str
    is_server: bool  # servers omit Product Name/Serial in -l, print "NPU Temperature (C)"
    chips: tuple[ChipSpec, ...]
    board: BoardSpec
    idle_power_watts: float  # per chip; A3 die 0 prints the sum of both dies
    busy_power_watts: float
    reserved_memory_mb: int  # driver reservation on an idle chip (HBM, or DDR on 310P)
    job_memory_mb: int  # a busy chip's process memory in total
    aicore_count: int | None  # `-t common` "Aicore Count" (910 family only)
    aicore_freq_mhz: int
    aicore_idle_freq_mhz: int
    hbm_clock_mhz: int
    hbm_manufacturer_id: int
    ddr_clock_mhz: int
    ddr_physical_mb: int  # 310P `-t memory` "Total DDR Capacity(MB)"
    process_names: tuple[str, ...]
    processes_per_chip: int = 1

    @property
    def npu_ids(self) -> tuple[int, ...]:
        return tuple(dict.fromkeys(chip.npu_id for chip in self.chips))

    @property
    def chips_per_npu(self) -> int:
        return len(self.chips) // len(self.npu_ids)

    @property
    def has_hbm(self) -> bool:
        return self.family != FAMILY_310P

    def chips_of(self, npu_id: int) -> tuple[ChipSpec, ...]:
        return tuple(chip for chip in self.chips if chip.npu_id == npu_id)

    def chip_by_logic_id(self, logic_id: int) -> ChipSpec:
        return next(chip for chip in self.chips if chip.logic_id == logic_id)


def _die_id(*parts: object) -> str:
    """Stable five-word hex die id (gpustack uses VDie ID as the device UUID)."""
    digest = sha256(":".join(map(str, parts)).encode()).hexdigest().upper()
    return " ".join(digest[i : i + 8] for i in range(0, 40, 8))


def _chips(
    model: str, layout: tuple[tuple[int, str], ...], per_npu: int, *, phy: bool, hbm_mb: int | None, ddr_mb: tuple[int, ...] = (0,)
) -> tuple[ChipSpec, ...]:
    """Chips numbered like the driver does: logic ids (and A3 phy ids) count across the box."""
    chips = []
    for npu_index, (npu_id, _) in enumerate(layout):
        for chip_id in range(per_npu):
            logic_id = npu_index * per_npu + chip_id
            base_bus = layout[npu_index][1]
            # A3 dies are separate PCIe functions; 300I Duo chips share their card's bus id.
            bus = _a3_die_bus(base_bus, chip_id) if phy else base_bus
            chips.append(
                ChipSpec(
                    npu_id=npu_id,
                    chip_id=chip_id,
                    logic_id=logic_id,
                    phy_id=logic_id if phy else None,
                    bus_id=bus,
                    vdie_id=_die_id(model, "vdie", logic_id),
                    ndie_id=_die_id(model, "ndie", logic_id),
                    hbm_total_mb=hbm_mb,
                    ddr_total_mb=ddr_mb[chip_id % len(ddr_mb)],
                )
            )
    return tuple(chips)


def _a3_die_bus(bus: str, die: int) -> str:
    """Die buses two apart, as on real A3 hosts (0000:9C:00.0 / 0000:9E:00.0)."""
    number = int(bus[5:7], 16) + 2 * die
    return f"{bus[:5]}{number:02X}{bus[7:]}"


# 8 x 910B3 (Atlas 800I/800T A2), as info__910B3__25.5.1__1.
_910B3_BUSES = ("C1", "C2", "81", "82", "01", "02", "41", "42")
MODEL_910B3 = NodeModel(
    name="910b3",
    family=FAMILY_910B,
    chip_name="910B3",
    map_name="Ascend 910B3",
    tool_version="25.5.1",
    driver_version="25.5.1",
    is_server=True,
    chips=_chips("910b3", tuple((i, f"0000:{b}:00.0") for i, b in enumerate(_910B3_BUSES)), 1, phy=False, hbm_mb=65536),
    board=BoardSpec(
        product_name="IT21HMDC_Bin6",
        firmware_version="7.7.0.6.236",
        board_id=0x62,
        pci_device_id=0xD802,
        subsystem_device_id=0x3000,
    ),
    idle_power_watts=90.0,
    busy_power_watts=310.0,
    reserved_memory_mb=3300,
    job_memory_mb=55800,
    aicore_count=20,
    aicore_freq_mhz=1800,
    aicore_idle_freq_mhz=800,
    hbm_clock_mhz=1600,
    hbm_manufacturer_id=0x57,
    ddr_clock_mhz=0,
    ddr_physical_mb=0,
    process_names=("VLLMWorker_TP", "python3.10", "VLLMEngineCor", ""),
)

# Atlas A3 (910_93): 8 NPUs x 2 dies "Ascend910", as info__910_93-A3__25.2.0__1.
_A3_BUSES = ("9C", "37", "BC", "57", "1C", "B7", "3C", "D7")
MODEL_A3 = NodeModel(
    name="a3",
    family=FAMILY_910_93,
    chip_name="Ascend910",
    map_name="Ascend910",
    tool_version="25.2.0",
    driver_version="25.2.0",
    is_server=True,
    chips=_chips("a3", tuple((i, f"0000:{b}:00.0") for i, b in enumerate(_A3_BUSES)), 2, phy=True, hbm_mb=65536),
    board=BoardSpec(
        product_name="IT22SMDB",
        firmware_version="7.7.0.3.220",
        board_id=0x66,
        main_board_id=0x68,
        pci_device_id=0xD803,
        subsystem_device_id=0x3005,
        npu_name="Ascend910_9392",
    ),
    idle_power_watts=81.0,
    busy_power_watts=290.0,
    reserved_memory_mb=2900,
    job_memory_mb=56500,
    aicore_count=24,
    aicore_freq_mhz=1800,
    aicore_idle_freq_mhz=800,
    hbm_clock_mhz=1600,
    hbm_manufacturer_id=0x56,
    ddr_clock_mhz=0,
    ddr_physical_mb=0,
    process_names=("python", "python3.11", "VLLMWorker_TP", ""),
)

# 4 x Atlas 300I Duo (2 x 310P3 per card, both chips on one bus id), as
# info__310P3-300IDuo__24.1.rc2__1; card ids are large and non-contiguous on real hosts.
_DUO_CARDS = ((224, "0000:3B:00.0"), (1792, "0000:07:00.0"), (2144, "0000:86:00.0"), (32896, "0000:D8:00.0"))
MODEL_310P_DUO = NodeModel(
    name="310p-duo",
    family=FAMILY_310P,
    chip_name="310P3",
    map_name="Ascend 310P3",
    tool_version="24.1.rc2",
    driver_version="24.1.rc2",
    is_server=False,
    chips=_chips("310p-duo", _DUO_CARDS, 2, phy=False, hbm_mb=None, ddr_mb=(44280, 43693)),
    board=BoardSpec(
        product_name="Atlas 300I Duo",
        firmware_version="7.5.0.3.220",
        board_id=0x9C,
        pci_device_id=0xD500,
        subsystem_device_id=0x0110,
    ),
    idle_power_watts=21.0,
    busy_power_watts=70.0,
    reserved_memory_mb=1500,
    job_memory_mb=30000,
    aicore_count=None,
    aicore_freq_mhz=1080,
    aicore_idle_freq_mhz=960,
    hbm_clock_mhz=0,
    hbm_manufacturer_id=0,
    ddr_clock_mhz=4266,
    ddr_physical_mb=49152,
    process_names=("python3", "mindie_llm_back", "gunicorn", ""),
)

MODELS: dict[str, NodeModel] = {m.name: m for m in (MODEL_910B3, MODEL_A3, MODEL_310P_DUO)}
MODEL_NAMES: tuple[str, ...] = tuple(MODELS)


def get_model(name: str, processes_per_chip: int | None = None) -> NodeModel:
    """The named model, optionally with N processes per busy chip (benchmarks: a3 with 4 = 64)."""
    try:
        model = MODELS[name]
    except KeyError:
        raise ValueError(f"unknown model {name!r}; choose from {', '.join(MODEL_NAMES)}") from None
    if processes_per_chip is not None:
        if processes_per_chip < 0:
            raise ValueError("processes per chip must be >= 0")
        model = replace(model, processes_per_chip=processes_per_chip)
    return model
