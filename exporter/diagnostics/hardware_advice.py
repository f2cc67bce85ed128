"""Advice by alert: the runbooks' first steps (likely causes, then what to do), said where
`diagnose` gives a verdict for an alert without a row in the threshold table (the hardware
alerts, a stalled or regressing job, a straggler rank). The indicators of the table carry
their own causes and levers. A
failing read is advised by the tool that failed (npu-smi, hccn_tool, the kubelet, profile
exports): ``advice_key``."""

from __future__ import annotations

from exporter.diagnostics.model import Finding

READ_FAILURE = "read_failure"  # the check of a failing read (CANNExporterSourceFailing)
SOURCE_FAILING = "CANNExporterSourceFailing"
# The tool behind a source (cann_exporter_source_subject_failing{source}), by the source's name.
SOURCE_TOOLS = (("npu_smi", "npu-smi"), ("hccn", "hccn_tool"), ("podresources", "kubelet"), ("profiles", "profiles"))


def source_tool(source: str) -> str:
    return next((tool for prefix, tool in SOURCE_TOOLS if source.startswith(prefix)), "source")


def advice_key(f: Finding) -> str:
    """The ADVICE entry of a hardware finding: its alert, and for a failing read the alert with
    the tool whose read failed (the source ends the subject: "node-1:9435: hccn")."""
    if f.check == READ_FAILURE and f.alert == SOURCE_FAILING:
        return f"{SOURCE_FAILING}:{source_tool(f.subject.rsplit(': ', 1)[-1])}"
    return f.alert or f.check


_DRAIN = "drain the chip or node (cordon in Kubernetes) and move the workload before it fails"
ADVICE: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "NPUUnhealthy": (
        ("a hardware or driver fault the chip reports (error codes)",),
        (
            _DRAIN,
            "npu-smi info -t health -i <npu> -c <chip> on the node: the error text of each code",
            ("reset the chip or reboot the node as the Ascend documentation of the code prescribes; replace hardware that stays Critical"),
        ),
    ),
    "NPUNeedsIsolation": (
        ("a hardware fault whose code the fault-code table handles by taking the chip out of service",),
        (
            _DRAIN,
            "npu-smi info -t health -i <npu> -c <chip> on the node: the error text of each code",
            "have the card repaired or replaced (docs/runbooks.md, Fault levels)",
        ),
    ),
    "NPUMissing": (
        ("a chip dropped off the bus (driver, power, PCIe link) or is held by another container",),
        (
            _DRAIN,
            "npu-smi info and lspci on the node; dmesg for the driver's messages",
            "reboot the node; replace the card if the chip stays missing",
        ),
    ),
    f"{SOURCE_FAILING}:npu-smi": (
        ("npu-smi cannot read a card (driver or dcmi error, the reason above)",),
        (
            "run the failing npu-smi command on the node (npu-smi info -t <kind> -i <npu>) and read its error",
            "dcmi_init_failed: the exporter lacks the devices (container privileges, /dev/davinci*, driver mounts); "
            "on one card only, that card's driver or firmware: npu-smi info -t health -i <npu>",
            "timeout: npu-smi hangs (a driver problem; raise npu_smi.timeout only if calls are merely slow); "
            "a kind the card does not support can be left out of npu_smi.details",
        ),
    ),
    f"{SOURCE_FAILING}:hccn_tool": (
        (
            "hccn_tool cannot read a port (the reason above): no access to the devices (permission_denied), the tool "
            "busy or hanging (busy, timeout: a driver problem or a device it waits 300 s on), or a query the product "
            "does not answer",
        ),
        (
            "run the failing hccn_tool query on the node as the exporter's user (hccn_tool -i <phy id> -<query> -g) and read its error",
            "permission_denied: give the exporter the devices (/dev/davinci*, the driver's mounts); not_found: set hccn.path; "
            "timeout: check the chip's health with npu-smi info -t health -i <npu> before raising hccn.timeout",
            "while it fails the network and optics checks of that port see nothing: its link, errors and optical lanes are not judged",
        ),
    ),
    f"{SOURCE_FAILING}:kubelet": (
        ("the kubelet's pod-resources socket cannot be read (not mounted, no permission, kubelet restarting)",),
        ("check podresources.socket is mounted into the exporter's pod and readable; the kubelet's own log",),
    ),
    f"{SOURCE_FAILING}:profiles": (
        ("profile exports under profiles.dirs cannot be read (permissions, files too large or still being written)",),
        ("the exporter's log names each refused file and its reason (docs/formats/profiler-exports.md)",),
    ),
    f"{SOURCE_FAILING}:source": (
        ("one of the exporter's sources cannot read what it reads (the reason above)",),
        ("the exporter's log names the failing subject and its reason; docs/runbooks.md, CANNExporterSourceFailing",),
    ),
    "unreadable": (("the chip's latest npu-smi read failed",), ("npu-smi info -t usages -i <npu> on the node", _DRAIN)),
    "NPUNetworkLinkDown": (
        ("cable, optical module or switch port down",),
        ("hccn_tool -i <device> -link -g on the node; reseat or replace the cable or module", "check the switch port"),
    ),
    "NPUNetworkLinkFlapping": (("a marginal cable or optical module",), ("replace the cable or the optical module",)),
    "NPUNetworkErrors": (
        ("bad cable or module, congestion",),
        ("hccn_tool -i <device> -stat -g: which counters grow", "replace the cable or module if fcs/crc errors grow"),
    ),
    "NPUNetworkUnhealthy": (
        ("the RoCE probe cannot reach its detect address: link, address or switch",),
        ("hccn_tool -i <device> -net_health -g and -ip -g on the node", "check /etc/hccn.conf and the switch"),
    ),
    "NPUOpticalPowerOutOfRange": (
        ("a dirty, loose or failing optical module or fibre (a dark lane reads 0)",),
        ("hccn_tool -i <device> -optical -g; clean or reseat the fibre, replace the module",),
    ),
    "NPUOpticalTemperatureHigh": (("cooling of the module's cage",), ("check airflow; replace the module",)),
    "NPUTemperatureHigh": (("cooling: fans, airflow, inlet temperature",), ("check the node's fans and airflow",)),
    "NPUECCDoubleBitErrors": (("failing HBM",), (_DRAIN, "npu-smi info -t ecc -i <npu>; replace the chip's card")),
    "NPUHCCSLinkDown": (
        ("a chip-to-chip (HCCS) link's PCS or HDLC layer is in error: HCCL collectives through the chip fail or take a slower path",),
        (
            "drain the chip and the jobs using it (cordon in Kubernetes): multi-chip jobs slow down or stop",
            "npu-smi info -t hccs -i <npu> -c <chip>: health status, lane mode per link, first error lane "
            "(the link with fewer lanes than the others is the failing one)",
            "reset the chip through the vendor procedure; a link still NOK after a reset needs board or connector service",
        ),
    ),
    "NPUHCCSErrors": (
        ("a marginal HCCS link: each CRC error is a retransmission, and a rising count precedes the link going down",),
        (
            "npu-smi info -t hccs -i <npu> -c <chip> twice a minute apart: which link's error count grows",
            "watch for NPUHCCSLinkDown; plan a reset or board service while the count keeps growing",
        ),
    ),
    "NPUSIOErrors": (
        ("the die-to-die (SIO) link between the NPU's two dies is failing: work split over the dies slows or breaks",),
        (
            "npu-smi info -t sio-info -i <npu> -c <chip> twice a minute apart",
            "drain the NPU (both dies) and follow the vendor procedure: reset, then service",
        ),
    ),
    "NPUPCIeErrors": (
        ("a marginal PCIe link (riser, cable, slot): every replay slows host-device copies; a failing link drops the chip off the bus",),
        (
            "npu-smi info -t pcie-err -i <npu> -c <chip> twice a minute apart: which type rises; lspci -vvv -s <bus id> for the "
            "negotiated speed and width, dmesg for AER messages",
            "reseat or replace the riser or cable at the next maintenance window; drain the chip first if the link trained "
            "below its rated width or speed",
        ),
    ),
    "NPUSensorTemperatureHigh": (
        ("the junction at its published limit: cooling (fans, airflow, inlet temperature) or a chip drawing more than it should",),
        (_DRAIN, "check the node's fans and airflow; npu-smi info -t sensors -i <npu> -c <chip>"),
    ),
    "NPUHBMAlmostFull": (
        ("the job's memory grows toward the chip's HBM (batch size, activations, a leak) or several processes share the chip",),
        (
            "npu-smi info -t usages -i <npu> and the processes on the chip (npu_process_memory_bytes)",
            "lower the micro-batch, recompute activations, or move a process to another chip before an out-of-memory",
        ),
    ),
    "NPUNetworkPFCStorm": (
        ("a congested or stuck receiver pausing the fabric",),
        (
            "hccn_tool -i <device> -stat -g: mac_tx_pfc_pkt_num against mac_rx_pfc_pkt_num, which side pauses",
            "check the switch's PFC and ECN settings",
        ),
    ),
    "CANNExporterMemoryHigh": (
        ("the exporter holds many series (chips, processes, pods, job ranks, profiles) or leaks",),
        (
            "raise the limit (the DaemonSet's resources.limits.memory, the unit's MemoryMax=) or hold less "
            "(ingest.max_series, ingest.ttl, fewer profiles.dirs)",
            "memory growing with a flat series count: keep the log and /metrics of that period and report a leak",
        ),
    ),
    "CANNExporterFileDescriptorsHigh": (
        ("a low descriptor maximum, hanging npu-smi or hccn_tool calls, or scrape clients that never close",),
        (
            "raise the maximum (ulimit -n, the unit's LimitNOFILE=); ls -l /proc/<pid>/fd on the node: what they point to",
            "hanging calls: see the read failures and the driver; many connections: web.max_connections (docs/web-config.md)",
        ),
    ),
    "CANNExporterSimulated": (
        ("the exporter runs its built-in simulator (--simulate, CANN_EXPORTER_SIMULATOR_SCENARIO, simulator.scenario)",),
        (
            "on a real node remove --simulate and give the exporter the driver's npu-smi (docs/install.md); check-config names what is missing",
        ),
    ),
    "NPUMemoryPagesIsolated": (
        ("HBM (or DDR) degrading: the driver takes pages out of use after ECC errors at the same address",),
        (
            "warning: watch the chip; npu-smi info -t ecc -i <npu> and its health codes; plan maintenance if pages keep coming",
            "abnormal: " + _DRAIN + "; rerun jobs that ran on it since the first double-bit error from an earlier checkpoint",
            "reset the chip as the vendor procedure prescribes; replace it if the count stays high or grows again",
        ),
    ),
    "NPUTrainingStalled": (
        ("a hung job: a collective waiting for a dead rank, a deadlock, a data source that blocks, a very long checkpoint",),
        (
            "py-spy dump --pid <pid> on the rank (or the framework's own stack dump): where it waits",
            "restart the job from its last checkpoint; fix the rank that died (a chip alert on its node?)",
        ),
    ),
    "NPUIterationTimeRegression": (
        ("a code, configuration or software (CANN, driver, framework) change, another tenant, or a throttled chip",),
        (
            "compare the step's phases and a profile now with the baseline run's: which phase or operator grew",
            "roll back the change that coincides with the regression; a new batch size or input makes a new baseline",
        ),
    ),
    "NPUJobStragglerRank": (
        ("one rank slower outside communication: a throttled or faulty chip, its data loader, NUMA placement, uneven input",),
        (
            "move the rank off a throttled or faulty chip (temperature, health on its node), bind its process to the chip's NUMA node",
            "give its data loader more workers, or balance the input (sequence lengths per rank)",
        ),
    ),
    "CANNExporterDown": (
        ("the exporter or its node was down, or Prometheus could not scrape it",),
        ("the exporter's logs and the target's last error on Prometheus' /targets page",),
    ),
}
