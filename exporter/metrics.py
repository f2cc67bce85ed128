"""Metric names, types, labels and help texts: defined once, used by collectors,
generators, docs and tests (the metric contract of DESIGN.md)."""

from __future__ import annotations

from dataclasses import dataclass

CHIP_LABELS = ("npu", "chip", "device")
HEALTH_STATES = ("OK", "Warning", "Alarm", "Critical", "Unknown")


@dataclass(frozen=True)
class MetricSpec:
    name: str              # full exposition name (counters end in _total)
    kind: str              # gauge, counter, histogram
    help: str
    labels: tuple[str, ...] = ()

    @property
    def family_name(self) -> str:
        """Name handed to prometheus_client, which appends `_total` to counters itself."""
        return self.name.removesuffix("_total") if self.kind == "counter" else self.name


def _chip(name: str, help: str, *extra: str, kind: str = "gauge") -> MetricSpec:
    return MetricSpec(name, kind, help, CHIP_LABELS + extra)


# --- devices (npu-smi) -------------------------------------------------------------------
DEVICE_INFO = _chip("npu_device_info", "Chip identity; value 1.", "model", "bus_id", "phy_id", "vdie_id")
DRIVER_INFO = MetricSpec("npu_driver_info", "gauge", "npu-smi and driver versions; value 1.", ("version", "tool_version"))
DEVICES = MetricSpec("npu_devices", "gauge", "Chips seen in the latest npu-smi overview.")
UP = _chip("npu_up", "1 if the latest read of this chip succeeded, else 0.")
HEALTH = _chip("npu_health", "Chip health as a stateset: 1 for the current state.", "state")
HEALTH_ERROR = _chip(
    "npu_health_error_info",
    "An error code npu-smi reports for a chip that is not OK (`-t health` Error Code); value 1.", "code",
)
AICORE = _chip("npu_aicore_utilization_ratio", "AI Core busy share (device utilization), 0..1.")
AIVECTOR = _chip("npu_aivector_utilization_ratio", "AI Vector core busy share, 0..1.")
AICUBE = _chip("npu_aicube_utilization_ratio", "AI Cube core busy share, 0..1.")
AICPU = _chip("npu_aicpu_utilization_ratio", "AI CPU busy share, 0..1.")
CTRLCPU = _chip("npu_ctrlcpu_utilization_ratio", "Control CPU busy share, 0..1.")
NPU_UTIL = _chip("npu_utilization_ratio", "Overall NPU utilization as npu-smi reports it, 0..1.")
HBM_USED = _chip("npu_hbm_used_bytes", "HBM in use, bytes.")
HBM_TOTAL = _chip("npu_hbm_total_bytes", "HBM capacity, bytes.")
HBM_BW = _chip("npu_hbm_bandwidth_utilization_ratio", "HBM bandwidth utilization, 0..1.")
MEM_USED = _chip("npu_memory_used_bytes", "DDR memory in use, bytes.")
MEM_TOTAL = _chip("npu_memory_total_bytes", "DDR memory capacity, bytes.")
DDR_BW = _chip("npu_ddr_bandwidth_utilization_ratio", "DDR bandwidth utilization, 0..1.")
HUGEPAGES_USED = _chip("npu_hugepages_used", "Huge pages in use, pages.")
HUGEPAGES_TOTAL = _chip("npu_hugepages_total", "Huge pages available, pages.")
POWER = _chip("npu_power_watts", "Power draw, watts (card power on 310P, die 0 on A3).")
TEMPERATURE = _chip("npu_temperature_celsius", "Chip temperature, degrees Celsius.")
HBM_TEMPERATURE = _chip("npu_hbm_temperature_celsius", "HBM temperature, degrees Celsius.")
AICORE_FREQ = _chip("npu_aicore_frequency_hertz", "Current AI Core clock, hertz.")
AICORE_RATED_FREQ = _chip("npu_aicore_rated_frequency_hertz", "Rated AI Core clock, hertz.")
VOLTAGE = _chip("npu_voltage_volts", "Chip voltage, volts.")
ECC_ERRORS = _chip("npu_ecc_errors_total", "ECC errors counted by the chip.", "memory", "type", kind="counter")
PROCESS_MEMORY = _chip("npu_process_memory_bytes", "Device memory held by a process, bytes.", "pid", "process")
POD_INFO = _chip("npu_pod_info", "Pod the chip is allocated to (kubelet pod-resources); value 1.", "namespace", "pod", "container")

DEVICE_METRICS = (
    DEVICE_INFO, DRIVER_INFO, DEVICES, UP, HEALTH, HEALTH_ERROR, AICORE, AIVECTOR, AICUBE, AICPU, CTRLCPU, NPU_UTIL,
    HBM_USED, HBM_TOTAL, HBM_BW, MEM_USED, MEM_TOTAL, DDR_BW, HUGEPAGES_USED, HUGEPAGES_TOTAL, POWER,
    TEMPERATURE, HBM_TEMPERATURE, AICORE_FREQ, AICORE_RATED_FREQ, VOLTAGE, ECC_ERRORS, PROCESS_MEMORY,
)

# --- self ------------------------------------------------------------------------------
BUILD_INFO = MetricSpec("cann_exporter_build_info", "gauge", "Exporter build; value 1.", ("version", "python_version"))
SIMULATED = MetricSpec("cann_exporter_simulated", "gauge", "1 when the data comes from the built-in simulator.", ("scenario", "model"))
SOURCE_SUCCESS = MetricSpec("cann_exporter_source_success", "gauge", "1 if the source's latest run succeeded.", ("source",))
SOURCE_DURATION = MetricSpec("cann_exporter_source_duration_seconds", "gauge", "Duration of the source's latest run, seconds.", ("source",))
SOURCE_ERRORS = MetricSpec("cann_exporter_source_errors_total", "counter", "Source failures by reason.", ("source", "reason"))
SOURCE_LAST_SUCCESS = MetricSpec("cann_exporter_source_last_success_timestamp_seconds", "gauge", "Unix time of the source's latest successful run.", ("source",))
SOURCE_RUNS = MetricSpec("cann_exporter_source_runs_total", "counter", "Runs of the source.", ("source",))
STALE_DROPPED = MetricSpec("cann_exporter_stale_chips", "gauge", "Chips whose data is older than max age and is not served.")

SELF_METRICS = (BUILD_INFO, SIMULATED, SOURCE_SUCCESS, SOURCE_DURATION, SOURCE_ERRORS, SOURCE_LAST_SUCCESS, SOURCE_RUNS, STALE_DROPPED)

# --- web config (--web.config.file: TLS, basic auth; present only when it is set) ----------
WEB_CONFIG_RELOAD_SUCCESS = MetricSpec("cann_exporter_web_config_last_reload_success", "gauge", "1 if the latest load of the web config file (and the files it names) succeeded; 0: the last good one is still in force.")
WEB_CONFIG_RELOAD_TIME = MetricSpec("cann_exporter_web_config_last_reload_success_timestamp_seconds", "gauge", "Unix time of the latest successful load of the web config file.")
WEB_CONFIG_RELOADS = MetricSpec("cann_exporter_web_config_reloads_total", "counter", "Reloads of the web config file after a change, by result (success, failure).", ("result",))
WEB_AUTH_FAILURES = MetricSpec("cann_exporter_web_auth_failures_total", "counter", "Requests refused by the web config, by reason (no_credentials, wrong_credentials, client_san).", ("reason",))
WEB_METRICS = (WEB_CONFIG_RELOAD_SUCCESS, WEB_CONFIG_RELOAD_TIME, WEB_CONFIG_RELOADS, WEB_AUTH_FAILURES)



# --- training jobs (hooks ingest, POST /api/v1/steps) -------------------------------------
JOB_LABELS = ("job_name", "rank")
# Step phases a hook may report; anything else is rejected by the ingest (the client maps
# unknown names to "other" before sending).
JOB_PHASES = ("data", "h2d", "compute", "communication", "d2h", "framework", "other")
# Iteration time spans milliseconds (small models) to minutes (huge pipelines); roughly
# x1.5-2 apart so histogram_quantile p50/p99 stay within ~25% anywhere in that range.
JOB_DURATION_BUCKETS = (
    0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.25, 0.4, 0.6, 1.0, 1.5, 2.5, 4.0, 6.0, 10.0, 20.0, 60.0, 300.0,
)

JOB_INFO = MetricSpec("npu_job_info", "gauge", "Training process reporting through the hooks; value 1. `device` is the chip logic id (joins npu_device_info).", JOB_LABELS + ("device", "world_size", "framework", "pid"))
JOB_ITERATION_DURATION = MetricSpec("npu_job_iteration_duration_seconds", "histogram", "Iteration (training step) duration, seconds.", JOB_LABELS)
JOB_ITERATIONS = MetricSpec("npu_job_iterations_total", "counter", "Iterations (training steps) completed.", JOB_LABELS)
JOB_SAMPLES = MetricSpec("npu_job_samples_total", "counter", "Samples processed, as reported with each step.", JOB_LABELS)
JOB_PHASE_SECONDS = MetricSpec("npu_job_phase_seconds_total", "counter", "Time spent in each phase of the iterations, seconds.", JOB_LABELS + ("phase",))
JOB_LAST_ITERATION = MetricSpec("npu_job_last_iteration_timestamp_seconds", "gauge", "Unix time the latest iteration ended (stall detection).", JOB_LABELS)
JOB_MEMORY_ALLOCATED = MetricSpec("npu_job_memory_allocated_bytes", "gauge", "Device memory held by the framework's allocator (torch memory_allocated), bytes.", JOB_LABELS)
JOB_MEMORY_MAX_ALLOCATED = MetricSpec("npu_job_memory_max_allocated_bytes", "gauge", "Peak of npu_job_memory_allocated_bytes since the process started (torch max_memory_allocated), bytes.", JOB_LABELS)

JOB_METRICS = (
    JOB_INFO, JOB_ITERATION_DURATION, JOB_ITERATIONS, JOB_SAMPLES, JOB_PHASE_SECONDS, JOB_LAST_ITERATION,
    JOB_MEMORY_ALLOCATED, JOB_MEMORY_MAX_ALLOCATED,
)

# --- ingest self-metrics -----------------------------------------------------------------
INGEST_REJECT_REASONS = (
    "unauthorized", "content_type", "too_large", "malformed_json", "invalid", "unknown_phase",
    "out_of_range", "bad_label", "too_many_jobs", "too_many_ranks",
)
INGEST_REQUESTS = MetricSpec("cann_exporter_ingest_requests_total", "counter", "Batches accepted on POST /api/v1/steps.")
INGEST_STEPS = MetricSpec("cann_exporter_ingest_steps_total", "counter", "Steps accepted on POST /api/v1/steps.")
INGEST_REJECTED = MetricSpec("cann_exporter_ingest_rejected_total", "counter", "Batches rejected on POST /api/v1/steps, by reason.", ("reason",))
INGEST_DROPPED = MetricSpec("cann_exporter_ingest_client_dropped_steps_total", "counter", "Steps the hook clients reported dropping (buffer full, exporter unreachable).")
INGEST_EXPIRED = MetricSpec("cann_exporter_ingest_expired_total", "counter", "Job ranks removed after their TTL without reports.")
INGEST_RANKS = MetricSpec("cann_exporter_ingest_ranks", "gauge", "Job ranks currently held by the ingest store.")

INGEST_METRICS = (INGEST_REQUESTS, INGEST_STEPS, INGEST_REJECTED, INGEST_DROPPED, INGEST_EXPIRED, INGEST_RANKS)

# --- profiles (finished profiler exports; latest per job_name/rank wins) -----------------
PROFILE_LABELS = ("job_name", "rank")


def _profile(name: str, help: str, *extra: str) -> MetricSpec:
    return MetricSpec(name, "gauge", help, PROFILE_LABELS + extra)


PROFILE_STEP_DURATION = _profile("npu_profile_step_duration_seconds", "Mean device step time (Computing + Communication(Not Overlapped) + Free) in the latest profile, seconds.")
PROFILE_COMPUTE = _profile("npu_profile_compute_ratio", "Share of the step the NPU spent computing (Computing / step), 0..1.")
PROFILE_COMMUNICATION = _profile("npu_profile_communication_ratio", "Share of the step in communication not overlapped by computing, 0..1.")
PROFILE_IDLE = _profile("npu_profile_idle_ratio", "Share of the step the NPU was idle (Free; includes memory copies), 0..1.")
PROFILE_MEMCPY = _profile("npu_profile_memcpy_ratio", "Share of the step spent in memory copies (MEMCPY_ASYNC tasks), 0..1.")
PROFILE_MEMCPY_KIND = _profile("npu_profile_memcpy_kind_ratio", "Memory-copy share of the step by kind (h2d, d2h, d2d, h2d_d2h = PCIe direction not recorded, other), 0..1.", "kind")
PROFILE_FRAMEWORK = _profile("npu_profile_framework_overhead_ratio", "Host-side share of the step before device work starts (Preparing / host step), 0..1.")
PROFILE_TOP3 = _profile("npu_profile_top3_operator_ratio", "Share of device kernel time taken by the 3 most expensive operator types (communication excluded), 0..1.")
PROFILE_MAX_OPERATOR = _profile("npu_profile_max_operator_ratio", "Share of device kernel time taken by the most expensive operator type (communication excluded), 0..1.")
PROFILE_OPERATOR = _profile("npu_profile_operator_time_ratio", "Share of device kernel time of the top-k operator types, by rank position 1..k, 0..1.", "op_type", "position")
PROFILE_LAST_UPDATE = _profile("npu_profile_last_update_timestamp_seconds", "Unix time the latest profile of this job and rank was produced.")

PROFILE_METRICS = (
    PROFILE_STEP_DURATION, PROFILE_COMPUTE, PROFILE_COMMUNICATION, PROFILE_IDLE, PROFILE_MEMCPY, PROFILE_MEMCPY_KIND,
    PROFILE_FRAMEWORK, PROFILE_TOP3, PROFILE_MAX_OPERATOR, PROFILE_OPERATOR, PROFILE_LAST_UPDATE,
)

# --- pods (kubelet pod-resources) ----------------------------------------------------------
PODRESOURCES_UNMATCHED = MetricSpec(
    "cann_exporter_podresources_unmatched_devices",
    "gauge",
    "NPU devices the kubelet lists that are not attributed to any chip, by reason "
    "(no_chip: no chip with that id on this node; bad_device_id; unknown_resource).",
    ("reason",),
)
POD_METRICS = (POD_INFO, PODRESOURCES_UNMATCHED)

# --- network (hccn_tool: RoCE/UB ports, optics) ---------------------------------------------
# `port` is empty ("" = absent in Prometheus) on chips with one port; A5 ports are "<udie>/<port>".
PORT_LABELS = CHIP_LABELS + ("port",)
# hccn_tool's g_net_health_status strings (910B and 950); "Init" = no detect address configured.
NETWORK_HEALTH_STATES = (
    "Success", "Socket fail", "Receive timeout", "Unreachable", "Time exceeded", "Fault", "Init",
    "Thread error", "Detect ip set", "Unknown",
)


def _port(name: str, help: str, *extra: str, kind: str = "gauge") -> MetricSpec:
    return MetricSpec(name, kind, help, PORT_LABELS + extra)


NETWORK_INFO = _port("npu_network_info", "Port address (hccn_tool -ip); value 1.", "address", "netmask")
NETWORK_LINK_UP = _port("npu_network_link_up", "1 if the port's link is up (hccn_tool -link), else 0.")
NETWORK_LINK_UP_TRANSITIONS = _port("npu_network_link_up_transitions_total", "Link-up events since driver load or the last `-link_stat -c` (hccn_tool -link_stat).", kind="counter")
NETWORK_LINK_DOWN_TRANSITIONS = _port("npu_network_link_down_transitions_total", "Link-down events since driver load or the last `-link_stat -c` (hccn_tool -link_stat; newer drivers only).", kind="counter")
NETWORK_SPEED = _port("npu_network_speed_bits_per_second", "Port speed, bits per second; absent while the speed is unknown (link down).")
NETWORK_HEALTH = _port("npu_network_health", "RoCE reachability probe (hccn_tool -net_health) as a stateset: 1 for the current state.", "state")
NETWORK_RECEIVE = _port("npu_network_receive_bytes_per_second", "Receive throughput over hccn_tool's -bandwidth window, bytes per second (MB/sec taken as 10^6 bytes).")
NETWORK_TRANSMIT = _port("npu_network_transmit_bytes_per_second", "Transmit throughput over hccn_tool's -bandwidth window, bytes per second (MB/sec taken as 10^6 bytes).")
NETWORK_PACKETS = _port("npu_network_packets_total", "Packets counted by the port's MAC/RoCE/NIC counters (hccn_tool -stat); kinds overlap (mac includes pause and pfc), never sum across kind.", "direction", "kind", kind="counter")
NETWORK_ERRORS = _port("npu_network_errors_total", "Bad, dropped, retried or rejected packets counted by the port (hccn_tool -stat), by kind.", "direction", "kind", kind="counter")
NETWORK_BYTES = _port("npu_network_bytes_total", "Bytes counted by the port's MAC/NIC counters (hccn_tool -stat *_oct_num).", "direction", "kind", kind="counter")
OPTICAL_PRESENT = _port("npu_optical_present", "1 if an optical module is plugged into the port, else 0 (hccn_tool -optical).")
OPTICAL_TEMPERATURE = _port("npu_optical_temperature_celsius", "Optical module temperature, degrees Celsius.")
OPTICAL_VOLTAGE = _port("npu_optical_voltage_volts", "Optical module supply voltage (Vcc), volts.")
OPTICAL_TX_POWER = _port("npu_optical_tx_power_watts", "Optical transmit power per lane, watts (1 mW = 0 dBm).", "lane")
OPTICAL_RX_POWER = _port("npu_optical_rx_power_watts", "Optical receive power per lane, watts (1 mW = 0 dBm).", "lane")

NETWORK_METRICS = (
    NETWORK_INFO, NETWORK_LINK_UP, NETWORK_LINK_UP_TRANSITIONS, NETWORK_LINK_DOWN_TRANSITIONS, NETWORK_SPEED,
    NETWORK_HEALTH, NETWORK_RECEIVE, NETWORK_TRANSMIT, NETWORK_PACKETS, NETWORK_ERRORS, NETWORK_BYTES,
    OPTICAL_PRESENT, OPTICAL_TEMPERATURE, OPTICAL_VOLTAGE, OPTICAL_TX_POWER, OPTICAL_RX_POWER,
)

ALL_METRICS = DEVICE_METRICS + POD_METRICS + SELF_METRICS + WEB_METRICS + JOB_METRICS + INGEST_METRICS + PROFILE_METRICS + NETWORK_METRICS


def markdown_table(specs: tuple[MetricSpec, ...] | None = None) -> str:
    """The metric reference (docs/metrics.md) from the specs above."""
    rows = ["| metric | type | labels | help |", "|---|---|---|---|"]
    for spec in ALL_METRICS if specs is None else specs:
        labels = ", ".join(f"`{name}`" for name in spec.labels)
        rows.append(f"| `{spec.name}` | {spec.kind} | {labels} | {spec.help} |")
    return "\n".join(rows) + "\n"

