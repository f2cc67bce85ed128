"""Alert builders for the chip's links and sensors: PCIe, HCCS, SIO (die to die) and the
`-t sensors` temperatures (npu_pcie_errors_total, npu_hccs_*, npu_sio_errors_total,
npu_sensor_temperature_celsius). Spec + table -> (expr, summary, description); rules.py puts
the groups together."""

from __future__ import annotations

from dataclasses import dataclass

from exporter.generate.common import Built, Held, too_hot
from exporter.generate.texts import CHIP_SHORT, CHIP_TEXT, COUNT, upper_first
from exporter.thresholds.table import AlertSpec, GenerateError, Thresholds, num

LINK_TEXT = f"HCCS link {{{{ $labels.link }}}} of {CHIP_TEXT}"
LINK_SHORT = f"HCCS link {{{{ $labels.link }}}} of {CHIP_SHORT}"


@dataclass(frozen=True)
class _Rising:
    """An alert on new counts of a counter within the alert's range, summed over ``by`` (labels a
    page does not split on). Its description: SUBJECT counted N new WHAT within RANGE (SOURCE): MEANING."""

    metric: str
    by: str
    summary: str
    subject: str
    what: str
    source: str
    meaning: str

    def __call__(self, spec: AlertSpec, table: Thresholds) -> Built:
        summed = f"increase({self.metric}[{spec.span}])"
        expr = f"sum without ({self.by}) (\n  {summed}\n) > {num(spec.bound)}" if self.by else f"{summed} > {num(spec.bound)}"
        return expr, self.summary, f"{self.subject} counted {COUNT} new {self.what} within {spec.span} ({self.source}): {self.meaning}."


def sensor_temperature(spec: AlertSpec, table: Thresholds) -> Built:
    sensors = tuple(spec.param("sensors", ("soc_max",)))
    if not sensors or not all(isinstance(s, str) and s.isidentifier() for s in sensors):
        raise GenerateError(f"{spec.alert}: params.sensors: expected a list of sensor names, got {list(sensors)!r}")
    return too_hot(
        spec,
        f'npu_sensor_temperature_celsius{{sensor=~"{"|".join(sensors)}"}}',
        f"NPU {CHIP_SHORT} sensor {{{{ $labels.sensor }}}} is at its limit",
        f"The {{{{ $labels.sensor }}}} temperature of {CHIP_TEXT} is",
        ": the published junction limit",
    )


PCIE_ERRORS = _Rising(
    "npu_pcie_errors_total",
    "type",
    f"PCIe errors on NPU {CHIP_SHORT}",
    f"The PCIe link of {CHIP_TEXT}",
    "error(s) or retries",
    "npu-smi -t pcie-err: tx, rx, LCRC, ECRC, retries; 310-class cards their own counters",
    "host-device copies slow down and a failing link drops the chip off the bus",
)
HCCS_ERRORS = _Rising(
    "npu_hccs_errors_total",
    "",
    f"HCCS errors on {LINK_SHORT}",
    upper_first(LINK_TEXT),
    "CRC error(s)",
    "npu-smi -t hccs error count",
    "each one is a retransmission, and a rising count precedes the link going down",
)
HCCS_LINK_DOWN = Held(
    "npu_hccs_healthy == 0",
    f"HCCS links of NPU {CHIP_SHORT} are not healthy",
    f"npu-smi -t hccs has reported the HCCS health of {CHIP_TEXT} as NOK",
    "a link's PCS or HDLC layer is in error. Collective communication (HCCL) through the chip fails or falls back to a slower path; npu_hccs_link_info shows which link lost lanes",
)
SIO_ERRORS = _Rising(
    "npu_sio_errors_total",
    "direction",
    f"Die-to-die (SIO) errors on NPU {CHIP_SHORT}",
    f"The die-to-die (SIO) link of {CHIP_TEXT}",
    "CRC error(s)",
    "npu-smi -t sio-info",
    "the two dies of the NPU exchange data over it",
)


BUILDERS = {
    "NPUPCIeErrors": PCIE_ERRORS,
    "NPUHCCSLinkDown": HCCS_LINK_DOWN,
    "NPUHCCSErrors": HCCS_ERRORS,
    "NPUSIOErrors": SIO_ERRORS,
    "NPUSensorTemperatureHigh": sensor_temperature,
}
NO_THRESHOLD = {"NPUHCCSLinkDown"}
NEEDS_RANGE = {"NPUPCIeErrors", "NPUHCCSErrors", "NPUSIOErrors"}
GROUP = ("cann-exporter-interconnect", tuple(BUILDERS))
