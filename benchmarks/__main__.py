"""`python -m benchmarks [names...]`: run the benchmarks and write benchmarks/RESULTS.md.

Discovers every module benchmarks/<name>.py (not starting with ``_``), runs each in its
own child process (``python -m benchmarks --child NAME OUT``) with a timeout, one after
another so they do not disturb each other's timings, and collects the dict its ``run()``
returns. A module that fails to import, has no ``run()``, raises, crashes or times out is
skipped with a note; the others still run. Exit status 0 unless the arguments are wrong
(or, with --strict, a goal was missed or a module skipped).
"""

from __future__ import annotations

import argparse
import compileall
import contextlib
import datetime as dt
import importlib
import importlib.metadata
import json
import math
import os
import pkgutil
import platform
import shlex
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

PACKAGE_DIR = Path(__file__).resolve().parent
REPO = PACKAGE_DIR.parent
DEFAULT_OUT = PACKAGE_DIR / "RESULTS.md"
DEFAULT_TIMEOUT = 300.0
DEFAULT_BUDGET = 900.0
# "section": a heading of its own for the module's part of the report (e.g. "Under abuse").
KNOWN_KEYS = ("title", "summary", "figures", "tables", "raw", "notes", "command", "section")


OPT_IN = frozenset({"soak"})  # long-running, its own report (benchmarks/SOAK.md): `make soak`
# Modules that need longer than --timeout at their default scale: their own limit, added to the
# run's budget when they are in the run (fleet_capacity backfills and queries a month of a
# 1,000-node fleet: about 3 hours on 2 cores, most of it promtool backfilling the rules;
# npusmi_cadence serves two nodes for over two minutes each at npu-smi's real latency).
LONG_RUNNING = {"fleet_capacity": 4 * 3600.0, "npusmi_cadence": 900.0}


def discover() -> list[str]:
    return sorted(
        m.name for m in pkgutil.iter_modules([str(PACKAGE_DIR)]) if not m.name.startswith("_") and not m.ispkg and m.name not in OPT_IN
    )


# --- the child: import one module, run it, write JSON ----------------------------------------------


def _on_sigterm(signum: int, frame: Any) -> None:
    raise SystemExit(128 + signum)  # unwinds `finally` blocks, so started processes are stopped


def _traceback() -> str:
    """The current exception's traceback with paths relative to the repository: the report is
    read on other machines, where this checkout's location means nothing."""
    return traceback.format_exc().replace(f"{REPO.resolve()}/", "").replace(f"{REPO}/", "")


def child(name: str, out_path: str) -> int:
    signal.signal(signal.SIGTERM, _on_sigterm)
    record: dict[str, Any]
    try:
        module = importlib.import_module(f"benchmarks.{name}")
    except BaseException:  # noqa: BLE001 - any import failure is a note, not a crash
        record = {"status": "import_error", "error": _traceback()}
    else:
        run = getattr(module, "run", None)
        if not callable(run):
            record = {"status": "no_run", "error": "no run() function"}
        else:
            start = time.monotonic()
            try:
                result = run()
            except BaseException:  # noqa: BLE001
                record = {"status": "error", "error": _traceback()}
            else:
                if not isinstance(result, dict):
                    result = {"raw": {"value": result}}
                record = {"status": "ok", "result": result}
            record["seconds"] = time.monotonic() - start
    Path(out_path).write_text(json.dumps(record, default=str), encoding="utf-8")
    return 0


# --- the parent: run every module in its own process group ------------------------------------------


def _kill_group(proc: subprocess.Popen[bytes], grace: float) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        pass
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)  # also strays the module left in its group
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(5)


def run_one(name: str, timeout: float) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="bench-") as tmp:
        out = Path(tmp) / "result.json"
        start = time.monotonic()
        proc = subprocess.Popen([sys.executable, "-m", "benchmarks", "--child", name, str(out)], cwd=REPO, start_new_session=True)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            _kill_group(proc, grace=15)
            return {"status": "timeout", "error": f"did not finish within {timeout:g} s; stopped", "seconds": time.monotonic() - start}
        except BaseException:
            _kill_group(proc, grace=5)
            raise
        _kill_group(proc, grace=0)  # the leader is gone; reap anything left in its group
        elapsed = time.monotonic() - start
        try:
            record = json.loads(out.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {"status": "crashed", "error": f"exited with status {proc.returncode} without a result", "seconds": elapsed}
        record["wall_seconds"] = elapsed
        return record


# --- machine --------------------------------------------------------------------------------------


def interpreter() -> str:
    """Where the interpreter lives, in words that mean something on another machine."""
    if sys.prefix == sys.base_prefix:
        return "system interpreter, no venv"
    venv = Path(sys.prefix).resolve()
    try:
        return f"venv {venv.relative_to(REPO.resolve()).as_posix()}"
    except ValueError:
        return f"venv {venv.name} outside the checkout"


def machine() -> dict[str, str]:
    cpu = platform.processor() or platform.machine()
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    logical = os.cpu_count() or 0
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else logical
    physical = "?"
    memory = "?"
    with contextlib.suppress(Exception):
        import psutil

        physical = str(psutil.cpu_count(logical=False) or "?")
        memory = f"{psutil.virtual_memory().total / 2**30:.1f} GiB"
    os_name = platform.system()
    with contextlib.suppress(OSError):
        for line in Path("/etc/os-release").read_text().splitlines():
            if line.startswith("PRETTY_NAME="):
                os_name = line.split("=", 1)[1].strip().strip('"')
    versions = []
    for dist in ("cann-exporter", "aiohttp", "prometheus-client", "psutil"):
        with contextlib.suppress(importlib.metadata.PackageNotFoundError):
            versions.append(f"{dist} {importlib.metadata.version(dist)}")
    load = ", ".join(f"{v:.2f}" for v in os.getloadavg()) if hasattr(os, "getloadavg") else "?"
    return {
        "CPU": cpu,
        "Cores": f"{logical} logical ({physical} physical), {usable} usable by this process",
        "Memory": memory,
        "Python": f"{platform.python_implementation()} {platform.python_version()} ({interpreter()})",
        "OS": f"{os_name}, kernel {platform.release()} ({platform.machine()})",
        "Packages": ", ".join(versions),
        "Load average at start (1, 5, 15 min)": load,
    }


# --- RESULTS.md -----------------------------------------------------------------------------------


def fmt(value: Any) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            return str(value)
        if value.is_integer() and abs(value) < 1e15:
            return fmt(int(value))
        if abs(value) >= 10_000:
            return f"{value:,.0f}"
        if abs(value) >= 100:
            return f"{value:.1f}"
        return f"{value:.4g}"
    if isinstance(value, int):
        return f"{value:,}" if abs(value) >= 10_000 else str(value)
    return str(value).replace("|", "\\|").replace("\n", " ")


def verdict(fig: dict[str, Any]) -> str:
    if "meets_goal" not in fig and "goal" not in fig:
        return "—"
    met = fig.get("meets_goal")
    return "yes" if met is True else ("**NO**" if met is False else "?")


def figures_of(result: dict[str, Any]) -> list[dict[str, Any]]:
    figs = result.get("figures")
    if isinstance(figs, list):
        return [f for f in figs if isinstance(f, dict)]
    if any(k in result for k in ("ratio", "goal", "meets_goal")):  # a flat result
        return [
            {
                "name": result.get("name") or result.get("title") or "result",
                **{k: result.get(k) for k in ("value", "unit", "baseline_name", "baseline", "ratio", "goal", "meets_goal") if k in result},
            }
        ]
    return []


def figure_cells(fig: dict[str, Any]) -> list[str]:
    unit = fig.get("unit", "")
    value = f"{fmt(fig.get('value'))} {unit}".strip()
    baseline = ""
    if "baseline" in fig or "baseline_name" in fig:
        baseline = f"{fmt(fig.get('baseline_name', ''))}: {fmt(fig.get('baseline'))} {unit}".strip()
    ratio = fmt(fig.get("ratio")) if "ratio" in fig else ""
    return [fmt(fig.get("name", "")), value, baseline, ratio, fmt(fig.get("goal", "")), verdict(fig)]


def table(headers: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines


def flatten(value: Any, prefix: str = "") -> list[tuple[str, Any]]:
    if isinstance(value, dict):
        out: list[tuple[str, Any]] = []
        for k, v in value.items():
            out += flatten(v, f"{prefix}.{k}" if prefix else str(k))
        return out
    if isinstance(value, list) and value and all(not isinstance(v, (dict, list)) for v in value):
        return [(prefix, ", ".join(fmt(v) for v in value))]
    if isinstance(value, list):
        out = []
        for i, v in enumerate(value):
            out += flatten(v, f"{prefix}[{i}]")
        return out
    return [(prefix, value)]


def section(name: str, record: dict[str, Any]) -> list[str]:
    result = record["result"]
    title = result.get("title") or name
    if result.get("section"):
        lines = [f"## {fmt(result['section'])}", "", f"`{name}`: {fmt(title)}", ""]
    else:
        lines = [f"## {name}: {fmt(title)}", ""]
    if result.get("summary"):
        lines += [str(result["summary"]), ""]
    figs = figures_of(result)
    if figs:
        lines += table(["figure", "value", "in-run baseline", "ratio", "goal", "met"], [figure_cells(f) for f in figs])
        lines.append("")
    for caption, rows in (result.get("tables") or {}).items():
        if isinstance(rows, list) and rows and all(isinstance(r, dict) for r in rows):
            headers = list(dict.fromkeys(k for r in rows for k in r))
            lines += [f"**{caption}**", ""]
            lines += table(headers, [[fmt(r.get(h, "")) for h in headers] for r in rows])
            lines.append("")
    extra = {k: v for k, v in result.items() if k not in KNOWN_KEYS}
    if not isinstance(result.get("figures"), list) and extra:  # its own shape: show its numbers as they are
        items = flatten(extra)[:80]
        lines += table(["key", "value"], [[fmt(k), fmt(v)] for k, v in items])
        lines.append("")
    notes = result.get("notes") or []
    if isinstance(notes, str):
        notes = [notes]
    if notes:
        lines += [f"- {fmt(n)}" for n in notes]
        lines.append("")
    command = result.get("command") or f".venv/bin/python -m benchmarks {name}"
    lines += [
        f"Reproduce alone: `{command}` (or `.venv/bin/python -m benchmarks.{name}`). "
        f"Took {record.get('wall_seconds', record.get('seconds', 0)):.0f} s.",
        "",
    ]
    payload: Any = dict(extra)
    if "raw" in result:
        payload = {"raw": result["raw"], **extra} if extra else result["raw"]
    if payload:
        lines += [
            "<details><summary>raw numbers</summary>",
            "",
            "```json",
            json.dumps(payload, indent=1, default=str),
            "```",
            "",
            "</details>",
            "",
        ]
    return lines


def render(records: dict[str, dict[str, Any]], info: dict[str, str], started: dt.datetime, finished: dt.datetime, argv: list[str]) -> str:
    ok = {n: r for n, r in records.items() if r.get("status") == "ok"}
    skipped = {n: r for n, r in records.items() if r.get("status") != "ok"}
    this_run = " ".join(shlex.quote(a) for a in [".venv/bin/python", "-m", "benchmarks", *argv])
    lines = [
        "# cann-exporter benchmarks",
        "",
        "Generated by `python -m benchmarks`; do not edit, rerun to regenerate. Every ratio is against a "
        "baseline measured in the same run on the same machine.",
        "",
        f"- Date: {started:%Y-%m-%d %H:%M:%S} UTC (took {(finished - started).total_seconds():.0f} s)",
        f"- Modules run: {', '.join(records) or 'none'}",
        "",
        "## Reproduce",
        "",
        "```sh",
        "make bench                                   # installs the test extras, then runs every benchmark",
        'make bench ARGS="exporter_scrape"            # only some modules (names: python -m benchmarks --list)',
        f"{this_run:<44} # this run",
        ".venv/bin/python -m benchmarks.exporter_scrape  # any one module alone, printing its JSON",
        "```",
        "",
        "## Machine",
        "",
    ]
    lines += table(["", ""], [[k, fmt(v)] for k, v in info.items()])
    lines += ["", "## Summary", ""]
    rows = []
    for name, record in ok.items():
        figs = figures_of(record["result"])
        if not figs:
            rows.append([name, "(see its section)", "", "", "", "", "—"])
        for fig in figs:
            rows.append([name, *figure_cells(fig)])
    lines += table(["benchmark", "figure", "value", "in-run baseline", "ratio", "goal", "met"], rows)
    lines.append("")
    if skipped:
        lines += ["## Skipped", ""]
        for name, record in skipped.items():
            error = str(record.get("error", "")).strip().splitlines()
            last = error[-1] if error else ""
            lines.append(f"- **{name}**: {record.get('status')}: {fmt(last)}")
        lines.append("")
        for name, record in skipped.items():
            if record.get("error"):
                lines += [
                    f"<details><summary>{name}: {record.get('status')}</summary>",
                    "",
                    "```",
                    str(record["error"]).strip(),
                    "```",
                    "",
                    "</details>",
                    "",
                ]
    for name, record in ok.items():
        lines += section(name, record)
    return "\n".join(lines).rstrip() + "\n"


def main(argv: list[str] | None = None) -> int:
    args_list = sys.argv[1:] if argv is None else argv
    if args_list[:1] == ["--child"]:
        if len(args_list) != 3:
            print("usage: python -m benchmarks --child NAME OUT", file=sys.stderr)
            return 2
        return child(args_list[1], args_list[2])
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="modules to run (default: all); see --list")
    parser.add_argument("--list", action="store_true", help="list the benchmark modules and exit")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"report path (default {DEFAULT_OUT.relative_to(REPO)})")
    parser.add_argument(
        "--timeout",
        type=float,
        default=DEFAULT_TIMEOUT,
        help=f"seconds per module (default %(default)g; {', '.join(f'{n} {t:g}' for n, t in LONG_RUNNING.items())})",
    )
    parser.add_argument(
        "--budget",
        type=float,
        default=DEFAULT_BUDGET,
        help="seconds for the whole run, plus the long-running modules' own limits; a module gets at "
        "most what is left (default %(default)g)",
    )
    parser.add_argument("--strict", action="store_true", help="exit 1 if a goal is missed or a module is skipped")
    args = parser.parse_args(args_list)
    available = discover()
    if args.list:
        print("\n".join(available))
        return 0
    unknown = [n for n in args.names if n not in available]
    if unknown:
        print(f"unknown benchmark(s): {', '.join(unknown)}; available: {', '.join(available)}", file=sys.stderr)
        return 2
    names = args.names or available
    # Byte-compiled as an installed package is, whatever PYTHONDONTWRITEBYTECODE says: else every
    # simulated npu-smi call compiles the simulator again, and the exporter pays for it in CPU.
    compileall.compile_dir(REPO / "exporter", quiet=1)
    signal.signal(signal.SIGTERM, _on_sigterm)  # stop the running module's process group too
    started = dt.datetime.now(dt.timezone.utc)
    info = machine()
    records: dict[str, dict[str, Any]] = {}
    deadline = time.monotonic() + args.budget + sum(LONG_RUNNING.get(name, 0.0) for name in names)
    for name in names:
        left = deadline - time.monotonic()
        if left < 10:
            records[name] = {"status": "not_run", "error": f"the run's --budget of {args.budget:g} s was used up"}
            print(f"[benchmarks] {name}: not run (budget used up)", flush=True)
            continue
        print(f"[benchmarks] {name} ...", flush=True)
        records[name] = record = run_one(name, min(max(args.timeout, LONG_RUNNING.get(name, 0.0)), left))
        status = record.get("status")
        print(
            f"[benchmarks] {name}: {status} in {record.get('wall_seconds', record.get('seconds', 0)):.0f} s"
            + ("" if status == "ok" else f" ({str(record.get('error', '')).strip().splitlines()[-1:]})"),
            flush=True,
        )
    finished = dt.datetime.now(dt.timezone.utc)
    args.out.write_text(render(records, info, started, finished, args_list), encoding="utf-8")
    for name, record in records.items():
        for fig in figures_of(record.get("result") or {}) if record.get("status") == "ok" else []:
            name_, value, baseline, ratio_, goal, met = figure_cells(fig)
            print(
                f"[benchmarks] {name}: {name_}: {value}"
                + (f" vs {baseline} (ratio {ratio_})" if baseline else "")
                + (f"; goal {goal}: {met}" if goal else "")
            )
    print(f"[benchmarks] wrote {args.out}")
    missed = any(f.get("meets_goal") is False for r in records.values() if r.get("status") == "ok" for f in figures_of(r["result"]))
    skipped = any(r.get("status") != "ok" for r in records.values())
    return 1 if args.strict and (missed or skipped) else 0


if __name__ == "__main__":
    sys.exit(main())
