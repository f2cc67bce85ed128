"""Scheduled profiling windows: every ``every`` seconds the next ``steps`` steps run under the
framework's profiler, and the window's summary reaches the exporter (POST /api/v1/profiles).

The training thread pays one ``perf_counter`` read per step while no window is due. A window
opens before a step begins and closes after a step ends, never inside one. Everything else
happens on a background thread: the profiler's export, the summary (a child process,
``python -m exporter.profiles.window``, so it reads the files with the exporter's own
indicator code, at low priority, with its memory and any crash kept out of the training
process), the POST, and removing the window's files, which happens whatever went wrong.

At most one window is in flight: a window due while the previous summary is still being made
is skipped and counted. A profiler that is missing or fails, a summary that cannot be made or
an exporter that refuses it disables profiling for this process with one warning; the loop
goes on. After ``fork()`` the child starts with no window and no thread.
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from collections.abc import Callable
from time import perf_counter as _perf
from typing import Any, Protocol

from exporter.hooks.identity import Identity
from exporter.hooks.transport import PROFILES_PATH, Transport, redacted

log = logging.getLogger("exporter.hooks")

DEFAULT_STEPS = 5
DIR_PREFIX = "cann-exporter-profile-"
_STALE = re.compile(re.escape(DIR_PREFIX) + r"(\d+)-")
# The directory holding the `exporter` package: the summary child imports it from there too.
_PACKAGE_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class ProfilerSession(Protocol):
    """One window's profiler, started by :meth:`ProfilerBackend.start`."""

    def step_begin(self, number: int) -> None: ...  # the loop thread, before a step
    def step_end(self) -> None: ...  # the loop thread, after it
    def stop(self) -> None: ...  # the loop thread, after the window's last step
    def export(self) -> None: ...  # the background thread, after stop()


class ProfilerBackend(Protocol):
    name: str  # cpu, cuda or npu: what the summary reads

    def start(self, directory: str) -> ProfilerSession: ...


class ProfilingFailed(Exception):
    """Profiling cannot go on in this process; the message says why."""


def parse_every(text: str | None) -> float | None:
    """`600`, `600s`, `10m`, `1h` -> seconds; None for unset, 0 or off."""
    text = (text or "").strip().lower()
    if text in ("", "0", "off", "none", "false", "no"):
        return None
    scale = {"s": 1.0, "m": 60.0, "h": 3600.0}.get(text[-1], 0.0)
    number = text[:-1] if scale else text
    try:
        seconds = float(number) * (scale or 1.0)
    except ValueError:
        log.warning("cann-exporter hooks: ignoring profile interval %r (expected seconds, e.g. 600 or 10m)", text)
        return None
    return seconds if seconds > 0 and seconds == seconds and seconds != float("inf") else None


class Profiling:
    """The schedule, one window at a time, and the background summary of each."""

    def __init__(
        self,
        backend: ProfilerBackend,
        identity: Callable[[], Identity],
        url: str,
        token: str | None,
        every: float,
        steps: int = DEFAULT_STEPS,
        *,
        timeout: float = 5.0,
        summary_timeout: float = 600.0,
        export_wait: float = 300.0,
        max_bytes: int = 2 << 30,
        workdir: str | None = None,
    ) -> None:
        self.backend = backend
        self.identity = identity
        self.url = url
        self.token = token
        self.every = every
        self.steps = max(1, steps)
        self.timeout = timeout
        self.summary_timeout = summary_timeout
        self.export_wait = export_wait
        self.max_bytes = max_bytes
        self.workdir = workdir
        self.windows = 0  # summaries the exporter accepted
        self.skipped = 0  # windows due while the previous summary was being made
        self.send_errors = 0
        self.disabled: str | None = None
        self.last_error: str | None = None
        self._fresh_state()
        _INSTANCES.add(self)

    def _fresh_state(self) -> None:
        self.overhead = 0.0  # seconds the windows took in the training thread (start, step marks, stop)
        self._next = _perf() + self.every
        self._session: ProfilerSession | None = None
        self._directory: str | None = None
        self._count = 0
        self._busy = False  # a window's summary is being made
        self._thread: threading.Thread | None = None
        self._child: subprocess.Popen[bytes] | None = None
        self._summarising: str | None = None  # the directory of the window being summarised
        self._skipped_sent = 0
        self._closed = False
        self._stale_checked = False

    # --- the loop thread ------------------------------------------------------------------
    def before_step(self) -> None:
        session = self._session
        now = _perf()
        if session is None:
            if now < self._next or self.disabled is not None or self._closed:
                return
            session = self._open()
            if session is None:
                self.overhead += _perf() - now
                return
        try:
            session.step_begin(self._count)
        except Exception as exc:
            self._abort(f"the profiler failed at a step: {exc!r}")
        self.overhead += _perf() - now

    def after_step(self) -> None:
        session = self._session
        if session is None:
            return
        now = _perf()
        try:
            session.step_end()
        except Exception as exc:
            self._abort(f"the profiler failed at a step: {exc!r}")
        else:
            self._count += 1
            if self._count >= self.steps:
                self._close_window()
        self.overhead += _perf() - now

    def _open(self) -> ProfilerSession | None:
        self._next = _perf() + self.every
        if self._busy:
            self.skipped += 1
            return None
        try:
            if not self._stale_checked:
                self._stale_checked = True
                remove_stale(self.workdir or tempfile.gettempdir())
            self._directory = tempfile.mkdtemp(prefix=f"{DIR_PREFIX}{os.getpid()}-", dir=self.workdir)
            self._session = self.backend.start(self._directory)
        except Exception as exc:  # no profiler, no permission, no disk: stop trying
            self._abort(f"cannot start the {self.backend.name} profiler: {exc!r}")
            return None
        self._count = 0
        return self._session

    def _close_window(self) -> None:
        session, directory = self._session, self._directory
        self._session = self._directory = None
        self._next = _perf() + self.every
        try:
            assert session is not None and directory is not None
            session.stop()
        except Exception as exc:
            self._directory = directory
            self._abort(f"cannot stop the {self.backend.name} profiler: {exc!r}")
            return
        self._busy = True
        self._summarising = directory
        closed_at, steps = time.time(), self._count
        try:
            self._thread = threading.Thread(
                target=self._summarise, args=(session, directory, closed_at, steps), name="cann-exporter-profile", daemon=True
            )
            self._thread.start()
        except Exception as exc:
            self._busy = False
            shutil.rmtree(directory, ignore_errors=True)
            self._disable(f"cannot start the summary thread: {exc!r}")

    def _abort(self, message: str) -> None:
        """A failure in the loop thread: drop the window, remove its files, stop profiling."""
        self._drop_window()
        self._disable(message)

    def _drop_window(self) -> None:
        """Stop the open window's profiler (whatever it raises) and remove its files."""
        session, directory = self._session, self._directory
        self._session = self._directory = None
        if session is not None:
            try:
                session.stop()
            except Exception:
                pass
        if directory is not None:
            shutil.rmtree(directory, ignore_errors=True)

    # --- the background thread --------------------------------------------------------------
    def _summarise(self, session: ProfilerSession, directory: str, closed_at: float, steps: int) -> None:
        try:
            session.export()
            size = directory_bytes(directory)
            if size > self.max_bytes:
                raise ProfilingFailed(f"a window wrote {size >> 20} MiB, over the {self.max_bytes >> 20} MiB bound (profile fewer steps)")
            doc = self._summary(directory)
            ident = self.identity()
            skipped = self.skipped
            doc.update(
                job_name=ident.job_name,
                rank=ident.rank,
                world_size=ident.world_size,
                framework=ident.framework,
                pid=ident.pid,
                finished_at=round(closed_at, 3),
                steps=steps,
                skipped=skipped - self._skipped_sent,
            )
            if self._post(doc):
                self._skipped_sent = skipped
        except ProfilingFailed as exc:
            self._disable(str(exc))
        except Exception as exc:  # a bug here costs profiling, never the loop
            self._disable(f"the profile summary failed: {exc!r}")
        finally:
            shutil.rmtree(directory, ignore_errors=True)
            self._summarising = None
            self._busy = False

    def _summary(self, directory: str) -> dict[str, Any]:
        ident = self.identity()
        argv = [
            sys.executable,
            "-m",
            "exporter.profiles.window",
            directory,
            "--backend",
            self.backend.name,
            "--job-name",
            ident.job_name,
            "--rank",
            str(ident.rank),
            "--wait",
            str(self.export_wait),
        ]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (_PACKAGE_ROOT, os.environ.get("PYTHONPATH")) if p)}
        try:
            child = self._child = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, close_fds=True
            )
        except OSError as exc:
            raise ProfilingFailed(f"cannot run the profile summary: {exc}") from None
        try:
            out, err = child.communicate(timeout=self.summary_timeout)
        except subprocess.TimeoutExpired:
            child.kill()
            child.communicate()
            raise ProfilingFailed(f"the profile summary took over {self.summary_timeout:g} s") from None
        finally:
            self._child = None
        if child.returncode != 0:
            tail = err.decode(errors="replace").strip().splitlines()[-1:] or [f"exit status {child.returncode}"]
            raise ProfilingFailed(f"the profile summary failed: {tail[0][:300]}")
        doc = json.loads(out)
        if not isinstance(doc, dict):
            raise ProfilingFailed("the profile summary printed no JSON object")
        return doc

    def _post(self, doc: dict[str, Any]) -> bool:
        transport = Transport(self.url, self.token, self.timeout, PROFILES_PATH)
        try:
            reply = transport.post(json.dumps(doc, separators=(",", ":")).encode())
        except Exception as exc:  # unreachable (NotSent) or lost on the way: the next window tries again
            self.send_errors += 1
            self.last_error = f"exporter unreachable at {redacted(self.url)}: {exc}"
            return False
        finally:
            transport.close()
        if reply.status == 200:
            self.windows += 1
            return True
        body = reply.body[:300].decode(errors="replace")
        raise ProfilingFailed(f"the exporter refused a profile summary ({reply.status}): {body}")

    def _disable(self, message: str) -> None:
        self.last_error = message
        if self.disabled is None:
            self.disabled = message
            log.warning("cann-exporter hooks: profiling disabled for this process: %s; steps are still reported", message)

    # --- lifecycle --------------------------------------------------------------------------
    def close(self, timeout: float = 5.0) -> None:
        """Drop an open window and end a summary still being made (bounded); their files go too."""
        self._closed = True
        self._drop_window()
        thread = self._thread
        if thread is not None and thread.is_alive():
            thread.join(timeout)
            child = self._child
            if thread.is_alive() and child is not None:
                child.kill()  # the thread then removes the window's files
                thread.join(1.0)
            directory = self._summarising
            if thread.is_alive() and directory is not None:  # stuck in the profiler's export: remove them here
                shutil.rmtree(directory, ignore_errors=True)

    def stats(self) -> dict[str, Any]:
        return {
            "profile_windows": self.windows,
            "profile_windows_skipped": self.skipped,
            "profile_in_window": self._session is not None,
            "profiling_disabled": self.disabled,
            "profile_send_errors": self.send_errors,
            "profiling_overhead_seconds": self.overhead,
        }


def directory_bytes(directory: str) -> int:
    total = 0
    for root, _, files in os.walk(directory):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_size
            except OSError:
                pass
    return total


STALE_AFTER = 3600.0  # seconds: far longer than any window and its summary


def remove_stale(workdir: str, now: float | None = None) -> None:
    """Window directories left by processes that died mid-window: their pid is gone and they
    are untouched for an hour (a process of another PID namespace sharing the directory may
    be alive under a pid we do not see)."""
    now = time.time() if now is None else now
    try:
        names = os.listdir(workdir)
    except OSError:
        return
    for name in names:
        match = _STALE.match(name)
        path = os.path.join(workdir, name)
        try:
            old = now - os.lstat(path).st_mtime > STALE_AFTER
        except OSError:
            continue
        if match and old and not _alive(int(match.group(1))):
            shutil.rmtree(path, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # someone else's process
    return True


_INSTANCES: weakref.WeakSet[Profiling] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for profiling in list(_INSTANCES):
        profiling._fresh_state()


def _close_all_at_exit() -> None:
    # Bounded: a summary still being made at exit is ended, its files removed.
    for profiling in list(_INSTANCES):
        profiling.close(timeout=1.0)


os.register_at_fork(after_in_child=_after_fork_in_child)
atexit.register(_close_all_at_exit)
