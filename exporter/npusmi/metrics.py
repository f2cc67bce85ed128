"""The npu-smi metrics: name, type, help, labels and the DevicesPart field that fills each."""

from __future__ import annotations

from exporter.core import faultlevels
from exporter.core.metric import CHIP_LABELS, MetricSpec, spec


def _chip(name: str, help: str, *extra: str, field: str | tuple[str, ...], kind: str = "gauge") -> MetricSpec:
    return spec(name, kind, help, CHIP_LABELS + extra, field=field)


def _node(name: str, help: str, *labels: str, field: str | tuple[str, ...]) -> MetricSpec:
    return spec(name, "gauge", help, labels, field=field)


# Per chip (ChipSample fields); a chip that cannot be read now keeps only npu_device_info and npu_up 0.
DEVICE_INFO = _chip(
    "npu_device_info", "Chip identity; value 1.", "model", "bus_id", "phy_id", "vdie_id", field=("model", "bus_id", "phy_id", "vdie_id")
)
UP = _chip("npu_up", "1 if the latest read of this chip succeeded, else 0.", field="up")
HEALTH = _chip("npu_health", "Chip health as a stateset: 1 for the current state.", "state", field="health")
HEALTH_ERROR = _chip(
    "npu_health_error_info",
    "An error code npu-smi reports for a chip that is not OK (`-t health` Error Code) or an active fault event id "
    "(`-t current-fault-event`, Ascend 950), with its handling level from "
    'the fault-code table (level="unknown" when the table does not list it); value 1.',
    "code",
    "level",
    field="health_errors",
)
FAULT_LEVEL = _chip(
    "npu_fault_level",
    "The most severe handling level of the chip's fault codes as a stateset: 1 for the current level "
    '("none": no code); absent while the codes of a chip that is not OK are unread.',
    "level",
    field="fault_level",
)
AICORE = _chip("npu_aicore_utilization_ratio", "AI Core busy share (device utilization), 0..1.", field="aicore_utilization_ratio")
AIVECTOR = _chip("npu_aivector_utilization_ratio", "AI Vector core busy share, 0..1.", field="aivector_utilization_ratio")
AICUBE = _chip("npu_aicube_utilization_ratio", "AI Cube core busy share, 0..1.", field="aicube_utilization_ratio")
AICPU = _chip("npu_aicpu_utilization_ratio", "AI CPU busy share, 0..1.", field="aicpu_utilization_ratio")
CTRLCPU = _chip("npu_ctrlcpu_utilization_ratio", "Control CPU busy share, 0..1.", field="ctrlcpu_utilization_ratio")
NPU_UTIL = _chip("npu_utilization_ratio", "Overall NPU utilization as npu-smi reports it, 0..1.", field="npu_utilization_ratio")
HBM_USED = _chip("npu_hbm_used_bytes", "HBM in use, bytes.", field="hbm_used_bytes")
HBM_TOTAL = _chip("npu_hbm_total_bytes", "HBM capacity, bytes.", field="hbm_total_bytes")
HBM_BW = _chip("npu_hbm_bandwidth_utilization_ratio", "HBM bandwidth utilization, 0..1.", field="hbm_bandwidth_utilization_ratio")
MEM_USED = _chip("npu_memory_used_bytes", "DDR memory in use, bytes.", field="memory_used_bytes")
MEM_TOTAL = _chip("npu_memory_total_bytes", "DDR memory capacity, bytes.", field="memory_total_bytes")
DDR_BW = _chip("npu_ddr_bandwidth_utilization_ratio", "DDR bandwidth utilization, 0..1.", field="ddr_bandwidth_utilization_ratio")
HUGEPAGES_USED = _chip("npu_hugepages_used_pages", "Huge pages in use.", field="hugepages_used")
HUGEPAGES_TOTAL = _chip("npu_hugepages_total_pages", "Huge pages available.", field="hugepages_total")
POWER = _chip("npu_power_watts", "Power draw, watts (card power on 310P, die 0 on A3).", field="power_watts")
TEMPERATURE = _chip("npu_temperature_celsius", "Chip temperature, degrees Celsius.", field="temperature_celsius")
HBM_TEMPERATURE = _chip("npu_hbm_temperature_celsius", "HBM temperature, degrees Celsius.", field="hbm_temperature_celsius")
AICORE_FREQ = _chip("npu_aicore_frequency_hertz", "Current AI Core clock, hertz.", field="aicore_frequency_hertz")
AICORE_RATED_FREQ = _chip("npu_aicore_rated_frequency_hertz", "Rated AI Core clock, hertz.", field="aicore_rated_frequency_hertz")
VOLTAGE = _chip("npu_voltage_volts", "Chip supply voltage, volts (npu-smi `-t volt`).", field="voltage_volts")
# Plain per-chip gauges, in the order they are rendered.
CHIP_GAUGES = (
    AICORE,
    AIVECTOR,
    AICUBE,
    AICPU,
    CTRLCPU,
    NPU_UTIL,
    HBM_USED,
    HBM_TOTAL,
    HBM_BW,
    MEM_USED,
    MEM_TOTAL,
    DDR_BW,
    HUGEPAGES_USED,
    HUGEPAGES_TOTAL,
    POWER,
    TEMPERATURE,
    HBM_TEMPERATURE,
    AICORE_FREQ,
    AICORE_RATED_FREQ,
    VOLTAGE,
)

# Per chip, memory (hbm, ddr) and type (single_bit, double_bit): `-t ecc` (ChipSample EccCount fields).
ECC_ERRORS = _chip(
    "npu_ecc_errors_total",
    "ECC errors in the chip's current count, which a chip reset or npu-smi clear sets back to 0 (npu-smi Error Count).",
    "memory",
    "type",
    field="ecc",
    kind="counter",
)
ECC_AGGREGATE_ERRORS = _chip(
    "npu_ecc_aggregate_errors_total",
    "ECC errors over the chip's life, kept across clears and restarts (npu-smi Aggregate Total Err Cnt).",
    "memory",
    "type",
    field="ecc_aggregate",
    kind="counter",
)
ECC_ISOLATED_PAGES = _chip(
    "npu_ecc_isolated_pages",
    "Memory pages the driver has taken out of use after ECC errors of this type (npu-smi Isolated Pages Count).",
    "memory",
    "type",
    field="ecc_isolated_pages",
)
ECC_METRICS = (ECC_ERRORS, ECC_AGGREGATE_ERRORS, ECC_ISOLATED_PAGES)

# Health and interconnect, per chip (`-t pcie-err`, `sensors`, `hccs`, `hccs-bw`, `sio-info`, `spod-info`).
PCIE_ERRORS = _chip(
    "npu_pcie_errors_total",
    "PCIe link errors and retries of the chip (npu-smi `-t pcie-err`; `-t err-count` on Atlas 310): "
    "tx, rx, lcrc, ecrc, retry; 310-class cards: pcs_rx, phy_lane, dl_lcrc, dl_dcrc.",
    "type",
    field="pcie_errors",
    kind="counter",
)
SENSOR_TEMPERATURE = _chip(
    "npu_sensor_temperature_celsius",
    "Chip sensor temperatures, degrees Celsius (npu-smi `-t sensors`): soc_max (hottest SoC point), sfp, ndie, "
    "hbm (the same reading as npu_hbm_temperature_celsius); a sensor that reads NA is absent.",
    "sensor",
    field="sensor_temperatures",
)
HCCS_HEALTHY = _chip(
    "npu_hccs_healthy",
    "1 when npu-smi reports the chip's HCCS links healthy (`-t hccs` health status OK), 0 when NOK.",
    field="hccs_healthy",
)
HCCS_LINK_INFO = _chip(
    "npu_hccs_link_info",
    "An HCCS link's lanes in use (lane_mode), its lane bitmap (lane_list) and speed in Gbit/s (lane_mode x 56); value 1.",
    "link",
    "lane_mode",
    "lane_list",
    "speed_gbps",
    field="hccs_links",
)
HCCS_PACKETS = _chip(
    "npu_hccs_packets_total",
    "Packets sent (tx) and received (rx) on an HCCS link.",
    "link",
    "direction",
    field="hccs_links",
    kind="counter",
)
HCCS_BYTES = _chip(
    "npu_hccs_bytes_total",
    "Bytes sent (tx) and received (rx) on an HCCS link (npu-smi counts 20 bytes a packet).",
    "link",
    "direction",
    field="hccs_links",
    kind="counter",
)
HCCS_RETRIES = _chip("npu_hccs_retries_total", "Retransmissions on an HCCS link.", "link", field="hccs_links", kind="counter")
HCCS_ERRORS = _chip("npu_hccs_errors_total", "CRC errors on an HCCS link.", "link", field="hccs_links", kind="counter")
HCCS_BANDWIDTH = _chip(
    "npu_hccs_bandwidth_bytes_per_second",
    "HCCS link bandwidth, bytes per second, averaged over npu-smi's sampling time (`-t hccs-bw`).",
    "link",
    "direction",
    field="hccs_bandwidth",
)
SIO_ERRORS = _chip(
    "npu_sio_errors_total",
    "CRC errors on the die-to-die (SIO) link, by direction (npu-smi `-t sio-info`).",
    "direction",
    field="sio_errors",
    kind="counter",
)
SUPERPOD_INFO = _chip(
    "npu_superpod_info",
    "Where the chip sits in an A3/950 super pod (npu-smi `-t spod-info`); value 1.",
    "super_pod_id",
    "super_pod_size",
    "server_index",
    "sdid",
    field="superpod",
)

# How the three ECC families differ, for the metric reference.
ECC_NOTE = """\
## ECC: current count, lifetime total, isolated pages

`npu-smi info -t ecc` prints three numbers per memory (`hbm`; `ddr` on chips that have DDR) and
error type (`single_bit` correctable, `double_bit` uncorrectable); each is served only where the
chip prints it (310 and 310B print the current count only, read as DDR).

- `npu_ecc_errors_total` is the *Error Count*: the chip's current count, which a chip reset or
  npu-smi's `clear` command sets back to 0. Prometheus reads that drop as a counter reset, so
  `increase()` over it counts new errors (alert NPUECCDoubleBitErrors).
- `npu_ecc_aggregate_errors_total` is the *Aggregate Total Err Cnt*: every error over the chip's
  life, kept across resets and clears. Compare chips by it: a chip with a long history of
  correctable errors is a candidate for replacement before it fails.
- `npu_ecc_isolated_pages` is the *Isolated Pages Count*, a gauge: pages the driver took out of
  use after errors at the same address, memory the chip has lost. It grows before a failing HBM
  stack takes a job down (alert NPUMemoryPagesIsolated).
"""

# The fault levels, their precedence and the unknown rule, for the metric reference.
FAULT_NOTE = (
    """\
## Fault codes and their handling levels

Each code of `npu-smi info -t health` (read for chips whose health is not OK: in the round that finds them so, then every detail interval) and each active
event id of `-t current-fault-event` (Ascend 950) is served as
`npu_health_error_info{code,level}`, where `level` is the code's handling level in the fault-code
table: Huawei's Ascend device-plugin table, shipped with the exporter
(`exporter/npusmi/faultcodes.json`, Apache-2.0, attribution in `faultcodes.NOTICE`), or the site's
own file of the same shape named by `npu_smi.fault_codes` (it replaces the shipped table whole;
`check-config` validates it, SIGHUP re-reads it). A code the table does not list is
`level="unknown"`. A table is bounded (4 MiB, 20,000 codes) and unambiguous: a level named twice
or a code listed under two levels is refused naming it (`check-config` and a start fail; a SIGHUP
keeps the table in use and logs the problems); a code listed twice under one level is accepted.

`npu_fault_level{level}` is the chip's most severe level as a stateset (1 for the current one).
Precedence, most severe first:

| level | what to do |
|---|---|
"""
    + "".join(f"| `{level.name}` | {level.action} |\n" for level in faultlevels.LEVELS)
    + """
`unknown` ranks below every level that asks for a restart or isolation, so a known action is
never hidden behind a code the table does not place, and above the levels that ask for nothing.
Huawei's device plugin isolates a chip for an unlisted code unless the fault event calls it minor;
npu-smi's health output prints no severity, so the exporter says `unknown` and the runbook says
what to do. `none`: a chip whose health is OK, or not OK without a code. A chip not OK whose codes
could not be read has no `npu_fault_level` series.
"""
)


# Per node (DevicesPart fields).
DRIVER_INFO = _node(
    "npu_driver_info", "npu-smi and driver versions; value 1.", "version", "tool_version", field=("driver_version", "tool_version")
)
DEVICES = _node("npu_devices", "Chips seen in the latest npu-smi overview.", field="chips_seen")
EXPECTED_DEVICES = _node(
    "npu_expected_devices",
    'Chips this node should have: source="config" (npu_smi.expected_devices), source="pci" (Ascend PCI '
    "functions in sysfs times their chips, where the model gives one number).",
    "source",
    field=("expected_devices", "pci_expected_devices"),
)
PCI_FUNCTIONS = _node(
    "npu_pci_functions", "Ascend PCI functions (Huawei, accelerator class) in sysfs by PCI device id.", "device_id", field="pci_functions"
)

PEAK_FLOPS = _chip(
    "npu_peak_flops_per_second",
    'Peak dense FLOP/s of the chip at a precision (int8: OP/s): source="config" from npu_smi.peak_flops, '
    '"published" from the shipped table, "derived" (bf16, fp16) from the chip\'s AI core count x rated clock x 4096 x 2; '
    "the first of these wins; absent where none gives a figure.",
    "precision",
    "source",
    field="peak_flops",
)

# Energy: per chip (ChipSample), and the intervals too long to integrate (DevicesPart).
ENERGY = _chip(
    "npu_energy_joules_total",
    "Energy drawn since the exporter started, joules: npu_power_watts integrated over successive reads "
    "(trapezoid; intervals longer than 3 sampling periods are skipped).",
    field="energy_joules",
    kind="counter",
)
ENERGY_SKIPPED = spec(
    "cann_exporter_energy_skipped_intervals_total",
    "counter",
    "Intervals between two power reads of a chip too long to integrate into npu_energy_joules_total (more than 3 sampling periods).",
    field="energy_skipped_intervals",
)

ENERGY_NOTE = """\
## Energy: how npu_energy_joules_total is built, and how exact it is

npu-smi prints power, not energy. The exporter integrates the power it reads: between two
successive reads of a chip it adds the trapezoid `(w0 + w1) / 2 x dt` joules. Only observed
intervals count: reads further apart than 3 sampling periods (npu-smi failed or hung, the
chip was away, the exporter was stalled) add nothing, and each such interval is counted in
`cann_exporter_energy_skipped_intervals_total`. The counter starts at 0 with the process and
only grows; `rate()` and `increase()` handle a restart as a counter reset.

- **Where power is read.** `npu-smi info` Power(W) on every overview (every
  `npu_smi.interval`, 10 s by default). On Atlas A3 the first die of an NPU prints the power
  of both dies and the second prints `-`: the NPU's energy is served on its first die. On 310P
  cards the chips print `NA` and the card's power is the MCU's `NPU Real-time Power(W)` of
  `-t common` (every `npu_smi.detail_interval`, 60 s by default): the card's energy is served
  on its first chip, as its `npu_power_watts` is. Sum by `npu` for a card, never by chip alone.
- **How exact.** The trapezoid is exact for power that changes linearly between reads; over
  a window its rate equals the mean of the power reads (what `avg_over_time(npu_power_watts)`
  says). It misses what happens between two reads: on the simulator, a steady training load
  read every 10 s comes within 0.1% of the true mean power over 10 minutes, while a load that
  ramps up for 60 s and drops at once (the sawtooth scenario) reads about 7% low, because the
  trapezoid draws each drop as a 10 s slope. A shorter `npu_smi.interval` narrows that.
  Skipped intervals make the total an undercount, never an overcount:
  `cann_exporter_energy_skipped_intervals_total` says whether it happened. npu-smi's own
  power figure has the board sensor's accuracy.
- **What the recording rules make of it** (`alerts/cann-exporter.rules.yml`): watts per chip,
  node, namespace and training job (`*:npu_energy_joules:rate5m`; a job's chips are the
  devices its `npu_job_info` names), the watts of chips idle or in use below the 60%
  low-utilization bound (`chip:npu_energy_idle_joules:rate5m`), kWh over each hour
  (`*:npu_energy_kwh:sum1h`, `chip:npu_energy_idle_kwh:sum1h`: what `cann-exporter report`
  and the capacity dashboard add up), and per training job the joules per iteration
  (`job_name:npu_energy_joules_per_iteration:ratio5m`: the job's watts over its iterations
  per second, the mean of its ranks) and per sample
  (`job_name:npu_energy_joules_per_sample:ratio5m`: over its samples per second, summed over
  its ranks; only for loops that pass `samples=`). A job that stopped stepping gets no figure,
  never an infinite one.
"""

# Per process (ProcessSample fields).
PROCESS_MEMORY = _chip(
    "npu_process_memory_bytes", "Device memory held by a process, bytes.", "pid", "process", field=("memory_bytes", "pid", "name")
)

HARDWARE_METRICS = (
    PCIE_ERRORS,
    SENSOR_TEMPERATURE,
    HCCS_HEALTHY,
    HCCS_LINK_INFO,
    HCCS_PACKETS,
    HCCS_BYTES,
    HCCS_RETRIES,
    HCCS_ERRORS,
    HCCS_BANDWIDTH,
    SIO_ERRORS,
    SUPERPOD_INFO,
)
CHIP_METRICS = (
    DEVICE_INFO,
    DRIVER_INFO,
    DEVICES,
    EXPECTED_DEVICES,
    PCI_FUNCTIONS,
    UP,
    HEALTH,
    HEALTH_ERROR,
    FAULT_LEVEL,
    *CHIP_GAUGES,
    ENERGY,
    ENERGY_SKIPPED,
    PEAK_FLOPS,
    *ECC_METRICS,
    *HARDWARE_METRICS,
)
PROCESS_METRICS = (PROCESS_MEMORY,)
