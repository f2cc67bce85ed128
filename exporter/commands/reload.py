"""SIGHUP for `serve`: re-read the configuration files without a restart, and never exit.

The web config (and the certificates it names) is read again and applied, as when its files
change; a file that does not load keeps the last good one. The `--config` file is checked
again with the environment and flags of the start: a problem is logged with its key, and a
valid change is logged as needing a restart (the sources and the listener are built once),
naming its keys, except for the options declared ``live`` that ``apply`` takes at once (the
fault-code table, and the npu-smi intervals: each task waits by its new interval at once);
docs/reloading.md is the table, generated from those declarations.
Until the event loop runs, a SIGHUP is logged and ignored: its default action would end the
process without a word.
"""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Callable, Coroutine
from types import FrameType
from typing import Any

from exporter.app.settings import ConfigError, Settings, needs_restart
from exporter.web.security import WebSecurity

log = logging.getLogger("exporter")

Reread = Callable[[], Settings]
Apply = Callable[[Settings], None]  # takes the live part of valid re-read settings


def _early(signum: int, frame: FrameType | None) -> None:
    log.info("SIGHUP before the exporter serves: ignored (the files are being read now)")


def hold_sighup() -> None:
    """From the start of `serve` until :func:`reload_on_sighup` takes over (and after it)."""
    try:
        signal.signal(signal.SIGHUP, _early)
    except ValueError:  # not the main thread (serve run in-process by a test): its signals are not ours
        pass


def reload_on_sighup(
    settings: Settings, reread: Reread | None, security: WebSecurity | None, apply: Apply | None = None
) -> Callable[[], Coroutine[Any, Any, None]]:
    """The background task: on each SIGHUP, :func:`reload` in a thread (file reads block)."""

    async def run() -> None:
        loop = asyncio.get_running_loop()
        wake = asyncio.Event()
        try:
            loop.add_signal_handler(signal.SIGHUP, wake.set)
        except (ValueError, RuntimeError):  # a loop outside the main thread gets no signals
            return
        try:
            while True:
                await wake.wait()
                wake.clear()  # signals during a reload fold into one more
                try:
                    await asyncio.to_thread(reload, settings, reread, security, apply)
                except Exception:  # never let a reload bug end the exporter or the next SIGHUP
                    log.exception("SIGHUP: reload crashed")
        finally:
            loop.remove_signal_handler(signal.SIGHUP)
            hold_sighup()

    return run


def reload(settings: Settings, reread: Reread | None, security: WebSecurity | None, apply: Apply | None = None) -> None:
    """Re-read what SIGHUP re-reads, logging each outcome. Blocking."""
    log.info("SIGHUP: re-reading the configuration files")
    if reread is not None:
        new = _check_settings(settings, reread)
        if new is not None and apply is not None:
            apply(new)
    if security is not None:
        reloaded = security.reload_if_changed(force=True)
        log.info(
            "SIGHUP: web config re-read",
            extra={"file": str(security.path), "result": "applied" if reloaded else "refused, the last good one stays in force"},
        )


def _check_settings(settings: Settings, reread: Reread) -> Settings | None:
    """The re-read settings when they are valid (None otherwise), logging what changed."""
    try:
        new = reread()
    except ConfigError as exc:
        log.error("SIGHUP: the configuration has problems; the running one stays in force", extra={"problems": "; ".join(exc.problems)})
        return None
    changed = needs_restart(settings, new)
    if changed:
        log.warning(
            "SIGHUP: the configuration changed; the changes take effect at the next restart (what a SIGHUP applies: docs/reloading.md)",
            extra={"keys": ",".join(changed)},
        )
    else:
        log.info("SIGHUP: the configuration is valid and unchanged")
    return new
