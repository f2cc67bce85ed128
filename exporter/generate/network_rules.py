"""Alert builders for the NPU network ports as hccn_tool reports them (the cann-exporter-network
group): link state and flaps, packet errors, PFC storms, optical modules and the network probe.
Spec + table -> (expr, summary, description); rules.py puts the groups together."""

from __future__ import annotations

import re

from exporter.generate.common import Built, Held, dbm, too_hot
from exporter.generate.texts import COUNT, PORT_SHORT, PORT_TEXT, upper_first
from exporter.thresholds.alert_facts import OPTICAL_POWER, optical_power_limits
from exporter.thresholds.table import AlertSpec, GenerateError, Thresholds, num

_LABEL_VALUE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_ -]*$")  # no regex metacharacters, no quotes


def mw(watts: float) -> str:
    return f"{watts * 1000:g} mW"


def _label_values(spec: AlertSpec, name: str, default: tuple[str, ...]) -> tuple[str, ...]:
    values = tuple(spec.param(name, default))
    bad = [v for v in values if not _LABEL_VALUE.match(v)]
    if not values or bad:
        raise GenerateError(f"{spec.alert}: params.{name}: expected label values without regex characters, got {list(values)}")
    return values


def _link_flapping(spec: AlertSpec, table: Thresholds) -> Built:
    # Newer drivers count downs; older ones only ups (every down of a port is followed by an up).
    expr = (
        f"(\n  increase(npu_network_link_down_transitions_total[{spec.span}])\n"
        f"  or increase(npu_network_link_up_transitions_total[{spec.span}])\n) >= {num(spec.bound)}"
    )
    return (
        expr,
        f"Network link of NPU {PORT_SHORT} is flapping",
        f"The link of {PORT_TEXT} changed {COUNT} times within {spec.span} (hccn_tool -link_stat: link down count, or up count on drivers without one; threshold {num(spec.bound)}): every change interrupts the collective operations using the port.",
    )


def _per_second(selector: str, spec: AlertSpec) -> str:
    """Per port: ``selector``'s rate over the alert's range, every direction and kind, above its threshold."""
    return f"sum without (direction, kind) (\n  rate({selector}[{spec.span}])\n) > {num(spec.bound)}"


def _network_errors(spec: AlertSpec, table: Thresholds) -> Built:
    kinds = _label_values(spec, "kinds", ("roce", "fcs", "bad_packets"))
    return (
        _per_second(f'npu_network_errors_total{{kind=~"{"|".join(kinds)}"}}', spec),
        f"Network errors on NPU {PORT_SHORT}",
        f'{upper_first(PORT_TEXT)} counts {{{{ $value | printf "%.2f" }}}} bad packets per second over {spec.span} (hccn_tool -stat, kinds {", ".join(kinds)}), above {num(spec.bound)}/s for {spec.window}.',
    )


def _pfc_storm(spec: AlertSpec, table: Thresholds) -> Built:
    return (
        _per_second('npu_network_packets_total{kind="pfc"}', spec),
        f"PFC storm on NPU {PORT_SHORT}",
        f"{upper_first(PORT_TEXT)} receives and sends {COUNT} PFC pause frames per second over {spec.span}, above {num(spec.bound)}/s for {spec.window}: a congested or stuck receiver is pausing the fabric.",
    )


def _optical_power(spec: AlertSpec, table: Thresholds) -> Built:
    limits = optical_power_limits(spec)
    parts = []
    for direction, metric, _, _ in OPTICAL_POWER:
        low, high = limits[direction]
        parts.append(f'label_replace(\n  {metric} < {num(low)} or {metric} > {num(high)},\n  "direction", "{direction}", "", ""\n)')
    ranges = {d: f"{mw(lo)} to {mw(hi)} ({dbm(lo):.1f} to {dbm(hi):+.1f} dBm)" for d, (lo, hi) in limits.items()}
    lane = "lane {{ $labels.lane }}"
    return (
        "\nor\n".join(parts),
        f"Optical {{{{ $labels.direction }}}} power of NPU {PORT_SHORT} is out of range ({lane})",
        f"The optical module of {PORT_TEXT} reads {{{{ $value | humanize }}}}W {{{{ $labels.direction }}}} power on {lane} for {spec.window}, outside "
        f'{{{{ if eq $labels.direction "rx" }}}}{ranges["rx"]}{{{{ else }}}}{ranges["tx"]}{{{{ end }}}}.',
    )


def _optical_temperature(spec: AlertSpec, table: Thresholds) -> Built:
    return too_hot(
        spec, "npu_optical_temperature_celsius", f"Optical module of NPU {PORT_SHORT} is hot", f"The optical module of {PORT_TEXT} is at"
    )


def _network_unhealthy(spec: AlertSpec, table: Thresholds) -> Built:
    ok = _label_values(spec, "ok_states", ("Success", "Init"))
    return (
        f'npu_network_health{{state!~"{"|".join(ok)}"}} == 1',
        f"Network probe of NPU {PORT_SHORT} reports {{{{ $labels.state }}}}",
        f"hccn_tool -net_health has reported {{{{ $labels.state }}}} for {PORT_TEXT} for {spec.window}: the port cannot reach its detect address (netdetect in /etc/hccn.conf).",
    )


LINK_DOWN = Held(
    "npu_network_link_up == 0",
    f"Network link down on NPU {PORT_SHORT}",
    f"hccn_tool -link has reported the link of {PORT_TEXT} DOWN",
    "collective communication (HCCL) through this port fails or stalls",
)

BUILDERS = {
    "NPUNetworkLinkDown": LINK_DOWN,
    "NPUNetworkLinkFlapping": _link_flapping,
    "NPUNetworkErrors": _network_errors,
    "NPUNetworkPFCStorm": _pfc_storm,
    "NPUOpticalPowerOutOfRange": _optical_power,
    "NPUOpticalTemperatureHigh": _optical_temperature,
    "NPUNetworkUnhealthy": _network_unhealthy,
}
NO_THRESHOLD = {"NPUNetworkLinkDown", "NPUOpticalPowerOutOfRange", "NPUNetworkUnhealthy"}
NEEDS_RANGE = {"NPUNetworkLinkFlapping", "NPUNetworkErrors", "NPUNetworkPFCStorm"}
GROUP = ("cann-exporter-network", tuple(BUILDERS))
