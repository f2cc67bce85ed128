"""Recognise npu-smi's error outputs (printed on stdout or stderr, exit codes unreliable)."""

from __future__ import annotations

import re

from exporter.core.text import find_message, line_at
from exporter.npusmi.parse.records import NpuSmiError

# DCMI return codes (MindCluster devmanager/dcmi/common.go) -> self-metric reason.
_DCMI_REASONS = {
    -8001: "bad_parameter",
    -8002: "permission_denied",
    -8005: "dcmi_init_failed",
    -8006: "timeout",
    -8007: "invalid_device_id",
    -8008: "no_device",
    -8012: "not_ready",
    -8013: "not_supported",
    -8020: "device_busy",
    -8255: "not_supported",
    -99999: "dcmi_load_failed",
}

_DCMI_RE = re.compile(r"dcmi mod(?:ule|el) initiali[sz]ed? failed.*?ret is (-?\d+)", re.IGNORECASE)

# Fixed messages, first match wins.
_MESSAGES = (
    ("Invalid card id", "invalid_card_id"),
    ("Error parameter of -i", "invalid_card_id"),
    ("Error parameter of -t", "invalid_type"),
    ("There is no NPU card on this server", "no_card"),
    ("There is no NPU chip on this card", "no_chip"),
    ("This device does not support", "not_supported"),
)


def detect_error(text: str) -> NpuSmiError | None:
    """The error npu-smi reported in ``text``, or None when it reads as a normal output."""
    match = _DCMI_RE.search(text)
    if match:
        code = int(match.group(1))
        return NpuSmiError(_DCMI_REASONS.get(code, "dcmi_init_failed"), line_at(text, match.start()), code)
    found = find_message(text, _MESSAGES)
    return None if found is None else NpuSmiError(*found)


def check_output(text: str) -> None:
    """Raise the error npu-smi reported in ``text``, if any."""
    error = detect_error(text)
    if error is not None:
        raise error
