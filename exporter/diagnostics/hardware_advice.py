"""The hardware level's advice, by alert: the runbooks' first steps (likely causes, then what
to do), said where `diagnose` gives a hardware verdict. The indicators of the threshold table
carry their own causes and levers; these are for the hardware alerts, which have no row."""

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
    "CANNExporterSourceFailing": (
        ("npu-smi cannot read a card (driver or dcmi error, the reason above)",),
        (
            "run the failing npu-smi command on the node and read its error",
            "check the driver with npu-smi info; reset the card or reboot the node",
        ),
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
    "CANNExporterDown": (
        ("the exporter or its node was down, or Prometheus could not scrape it",),
        ("the exporter's logs and the target's last error on Prometheus' /targets page",),
    ),
}
