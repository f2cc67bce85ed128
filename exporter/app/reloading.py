"""What a SIGHUP applies without a restart: the table in docs/reloading.md, generated from the
options declared ``live`` (one source of truth with `--help` and the reload itself)."""

from __future__ import annotations

from exporter.app.settings import OPTIONS
from exporter.core.options import Option

HEADER = """# Reloading the configuration (SIGHUP)

Generated from the options' declarations (`option(..., live=True)`); do not edit by hand.

`systemctl reload cann-exporter` (the systemd unit's `ExecReload`) or `kill -HUP PID` makes
`serve` re-read its files without a restart. The web config is re-read and applied; the `--config` file is checked again
with the environment and flags of the start. A problem keeps what runs and is logged by key; a
valid change is applied at once where the table says so, and otherwise logged, naming its keys,
as taking effect at the next restart. A SIGHUP never ends the exporter.

| what | on SIGHUP |
|---|---|
| the web config file's contents (`web.config_file`): users, TLS certificates and settings, headers | re-read and applied at once; switching TLS on or off needs a restart |
"""


def _row(option: Option) -> str:
    return f"| `{option.key}`: {option.help} | applied at once |\n"


def reload_doc() -> str:
    """The text of docs/reloading.md."""
    live = [o for o in OPTIONS if o.live]
    return HEADER + "".join(_row(o) for o in live) + "| every other option | checked; a change takes effect at the next restart |\n"
