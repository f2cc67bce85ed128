"""`listen` and `web.*`: where the exporter serves and the web config that guards it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from exporter.core.options import option, optional_text, parse_bool, parse_listen


def listen_option() -> Any:
    """The top-level `listen` key (a field of the settings class)."""
    return option(":9435", parse_listen, "address to serve /metrics on, HOST:PORT or :PORT (port 0: any free port, logged)",
                  metavar="HOST:PORT", serve_only=True)


@dataclass(frozen=True)
class WebOptions:
    config_file: str | None = option(
        None, optional_text,
        "exporter-toolkit web config (TLS, mTLS, basic auth, headers), the format node_exporter's --web.config.file reads; reloaded on change",
        flag="--web.config.file", metavar="FILE")
    auth_exempt_health: bool = option(True, parse_bool, "serve /healthz and /readyz without basic auth (kubelet probes)")
