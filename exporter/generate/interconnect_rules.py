"""Alert builders for the chip's links and sensors: PCIe, HCCS, SIO (die to die) and the
`-t sensors` temperatures (npu_pcie_errors_total, npu_hccs_*, npu_sio_errors_total,
npu_sensor_temperature_celsius). Spec + table -> (expr, summary, description); rules.py puts
the groups together."""

from __future__ import annotations

from exporter.generate.common import Built
from exporter.generate.texts import CHIP_SHORT, CHIP_TEXT
from exporter.thresholds.table import AlertSpec, GenerateError, Thresholds, num

LINK_TEXT = f"HCCS link {{{{ $labels.link }}}} of {CHIP_TEXT}"
LINK_SHORT = f"HCCS link {{{{ $labels.link }}}} of {CHIP_SHORT}"


def _rising(metric: str, spec: AlertSpec, by: str) -> str:
    """New counts within the range, summed over ``by`` (labels a page does not split on)."""
    summed = f"increase({metric}[{spec.range}])"
    return f"sum without ({by}) (\n  {summed}\n) > {num(spec.threshold)}" if by else f"{summed} > {num(spec.threshold)}"


def pcie_errors(spec: AlertSpec, table: Thresholds) -> Built:
    return (
        _rising("npu_pcie_errors_total", spec, "type"),
        f"PCIe errors on NPU {CHIP_SHORT}",
        (
            f'The PCIe link of {CHIP_TEXT} counted {{{{ $value | printf "%.0f" }}}} new error(s) or retries within '
            f"{spec.range} (npu-smi -t pcie-err: tx, rx, LCRC, ECRC, retries; 310-class cards their own counters): "
            "host-device copies slow down and a failing link drops the chip off the bus."
        ),
    )


def hccs_link_down(spec: AlertSpec, table: Thresholds) -> Built:
    return (
        "npu_hccs_healthy == 0",
        f"HCCS links of NPU {CHIP_SHORT} are not healthy",
        (
            f"npu-smi -t hccs has reported the HCCS health of {CHIP_TEXT} as NOK for {spec.window}: a link's PCS "
            "or HDLC layer is in error. Collective communication (HCCL) through the chip fails or falls back to a "
            "slower path; npu_hccs_link_info shows which link lost lanes."
        ),
    )


def hccs_errors(spec: AlertSpec, table: Thresholds) -> Built:
    return (
        _rising("npu_hccs_errors_total", spec, ""),
        f"HCCS errors on {LINK_SHORT}",
        (
            f'{LINK_TEXT[0].upper()}{LINK_TEXT[1:]} counted {{{{ $value | printf "%.0f" }}}} new CRC error(s) within '
            f"{spec.range} (npu-smi -t hccs error count): each one is a retransmission, and a rising count precedes "
            "the link going down."
        ),
    )


def sio_errors(spec: AlertSpec, table: Thresholds) -> Built:
    return (
        _rising("npu_sio_errors_total", spec, "direction"),
        f"Die-to-die (SIO) errors on NPU {CHIP_SHORT}",
        (
            f'The die-to-die (SIO) link of {CHIP_TEXT} counted {{{{ $value | printf "%.0f" }}}} new CRC error(s) '
            f"within {spec.range} (npu-smi -t sio-info): the two dies of the NPU exchange data over it."
        ),
    )


def sensor_temperature(spec: AlertSpec, table: Thresholds) -> Built:
    sensors = tuple(spec.param("sensors", ("soc_max",)))
    if not sensors or not all(isinstance(s, str) and s.isidentifier() for s in sensors):
        raise GenerateError(f"{spec.alert}: params.sensors: expected a list of sensor names, got {list(sensors)!r}")
    expr = f'npu_sensor_temperature_celsius{{sensor=~"{"|".join(sensors)}"}} > {num(spec.threshold)}'
    return (
        expr,
        f"NPU {CHIP_SHORT} sensor {{{{ $labels.sensor }}}} is at its limit",
        (
            f"The {{{{ $labels.sensor }}}} temperature of {CHIP_TEXT} is {{{{ $value }}}} °C, above "
            f"{num(spec.threshold)} °C for {spec.window}: the published junction limit."
        ),
    )


BUILDERS = {
    "NPUPCIeErrors": pcie_errors,
    "NPUHCCSLinkDown": hccs_link_down,
    "NPUHCCSErrors": hccs_errors,
    "NPUSIOErrors": sio_errors,
    "NPUSensorTemperatureHigh": sensor_temperature,
}
NO_THRESHOLD = {"NPUHCCSLinkDown"}
NEEDS_RANGE = {"NPUPCIeErrors", "NPUHCCSErrors", "NPUSIOErrors"}
GROUP = ("cann-exporter-interconnect", tuple(BUILDERS))
