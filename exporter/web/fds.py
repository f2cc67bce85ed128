"""The open-file limit checked against the connection cap at start.

Every connection is a descriptor, and so is every pipe of an npu-smi or hccn_tool call: with
the cap above the limit, a flood of connections leaves nothing for the tools (their spawns
fail with EMFILE) and accept() fails in a loop. At start the soft limit is raised, within
the hard limit, to fit ``web.max_connections`` + ``web.health_connections`` + :data:`FD_RESERVE`;
where the hard limit is lower, the cap is lowered to fit, with a warning.
"""

from __future__ import annotations

import errno
import logging
import resource
from dataclasses import dataclass, replace

from exporter.web.options import WebOptions

log = logging.getLogger("exporter.web")

# Descriptors besides connections: npu-smi and hccn_tool pipes at their concurrency bounds
# (three per call), the kubelet socket, profile files being read, logs, the event loop,
# Python's own, and headroom.
FD_RESERVE = 128
# What a failing accept() reports when the process or the host runs out (counted by name).
RESOURCE_ERRNOS = (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM)


def errno_reason(exc: OSError) -> str:
    """A label-safe reason: the errno's name in lower case (emfile, enfile, ...)."""
    name = errno.errorcode.get(exc.errno or 0)
    return name.lower() if name else "other"


def accept_error_counts() -> dict[str, int]:
    """Failed accept() calls by reason, every usual reason present from the start."""
    return {errno_reason(OSError(number, "")): 0 for number in RESOURCE_ERRNOS}


@dataclass(frozen=True)
class FdPlan:
    soft_limit: int | None  # the soft limit to set; None: keep it
    max_connections: int  # the cap that fits


def _finite(limit: int) -> int | None:
    return None if limit == resource.RLIM_INFINITY else limit


def plan(options: WebOptions, soft: int, hard: int) -> FdPlan:
    """What to set for ``options`` under the limits ``soft``/``hard`` (RLIM_INFINITY: none)."""
    needed = options.max_connections + options.health_connections + FD_RESERVE
    soft_limit, hard_limit = _finite(soft), _finite(hard)
    if soft_limit is None or soft_limit >= needed:
        return FdPlan(None, options.max_connections)
    if hard_limit is None or hard_limit >= needed:
        return FdPlan(needed, options.max_connections)
    fitting = max(1, hard_limit - options.health_connections - FD_RESERVE)
    return FdPlan(hard_limit if hard_limit > soft_limit else None, fitting)


def fit_open_files(options: WebOptions) -> WebOptions:
    """``options`` with the cap that fits the open-file limit, raising the soft limit if need be."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    planned = plan(options, soft, hard)
    if planned.soft_limit is not None:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (planned.soft_limit, hard))
            log.info("raised the open-file limit for web.max_connections", extra={"from": soft, "to": planned.soft_limit})
        except (OSError, ValueError) as exc:
            log.warning("cannot raise the open-file limit", extra={"limit": soft, "error": str(exc)})
            planned = plan(options, soft, soft)
    if planned.max_connections < options.max_connections:
        log.warning(
            "open-file limit too low for web.max_connections; serving fewer connections",
            extra={
                "max_connections": planned.max_connections,
                "wanted": options.max_connections,
                "limit": planned.soft_limit or soft,
                "reserve": options.health_connections + FD_RESERVE,
            },
        )
        return replace(options, max_connections=planned.max_connections)
    return options
