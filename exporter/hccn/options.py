"""`hccn.*`: whether and how hccn_tool is asked about the chips' network ports."""

from __future__ import annotations

from dataclasses import dataclass

from exporter.core.options import auto_bool, option, parse_duration, parse_text
from exporter.core.registration import Section
from exporter.core.runner import nice_option

DEFAULT_PATH = "/usr/local/Ascend/driver/tools/hccn_tool"


@dataclass(frozen=True)
class HccnOptions:
    enabled: bool | None = option(
        "auto", auto_bool, "network/optics metrics from hccn_tool (auto: when hccn.path exists; YAML and env take auto, true, false)"
    )
    path: str = option(DEFAULT_PATH, parse_text, "hccn_tool binary (name on PATH or a path)", flag="--hccn-tool", metavar="PATH")
    timeout: float = option(
        "5s", parse_duration, "kill an hccn_tool call after this long (it can wait 300 s on an unhealthy device)", metavar="DURATION"
    )
    interval: float = option(
        "30s",
        parse_duration,
        "how often link, link_stat, speed, net_health and stat are read per chip",
        metavar="DURATION",
        serve_only=True,
    )
    slow_interval: float = option(
        "60s",
        parse_duration,
        "how often bandwidth (a ~1 s measurement), optical and ip are read per chip",
        metavar="DURATION",
        serve_only=True,
    )
    nice: int = nice_option("hccn_tool")


HCCN_OPTIONS = Section("hccn", HccnOptions)
