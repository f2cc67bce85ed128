"""Peak FLOP/s per chip model and precision: the shipped table (peak_flops.yaml) plus overrides.

The table holds only published figures, each with its source; a model or precision it lacks
has no peak (no npu_peak_flops_per_second series, no MFU), never a guess. A node's
``npu_smi.peak_flops`` entries (``MODEL:PRECISION=FLOPS``) add or replace figures.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from functools import cache
from pathlib import Path
from typing import Any

from exporter.core.yamlfile import read_yaml

TABLE_PATH = Path(__file__).with_name("peak_flops.yaml")
PRECISIONS = ("fp32", "bf16", "fp16", "int8")
TERA = 1e12
MAX_FLOPS = 1e18  # far above any chip (an exaFLOP/s per chip is a typo)

Peaks = Mapping[str, Mapping[str, float]]  # model -> precision -> FLOP/s


def table_from(document: Any) -> dict[str, dict[str, float]]:
    """The ``models`` of a table document, figures in FLOP/s; ValueError naming a bad entry."""
    models = document.get("models") if isinstance(document, dict) else None
    if not isinstance(models, dict):
        raise ValueError("expected a mapping `models`")
    out: dict[str, dict[str, float]] = {}
    for model, entry in models.items():
        if not isinstance(entry, dict) or not str(entry.get("source", "")).strip():
            raise ValueError(f"{model}: every model needs a `source`")
        figures = {}
        for precision in PRECISIONS:
            tera = entry.get(precision)
            if tera is None:
                continue
            if isinstance(tera, bool) or not isinstance(tera, int | float) or not 0 < tera * TERA <= MAX_FLOPS:
                raise ValueError(f"{model}.{precision}: expected a positive number of TFLOPS, got {tera!r}")
            figures[precision] = float(tera) * TERA
        out[str(model)] = figures
    return out


@cache
def shipped() -> dict[str, dict[str, float]]:
    """The packaged table (read once)."""
    return table_from(read_yaml(TABLE_PATH))


def parse_override(item: str) -> tuple[str, str, float]:
    """``MODEL:PRECISION=FLOPS`` (FLOPS in FLOP/s, e.g. 3.13e14)."""
    target, eq, number = item.partition("=")
    model, colon, precision = target.strip().rpartition(":")
    if not eq or not colon or not model:
        raise ValueError(f"{item!r}: expected MODEL:PRECISION=FLOPS, e.g. 910B3:bf16=3.13e14")
    if precision not in PRECISIONS:
        raise ValueError(f"{item!r}: precision must be one of {', '.join(PRECISIONS)}")
    try:
        flops = float(number)
    except ValueError:
        raise ValueError(f"{item!r}: {number.strip()!r} is not a number of FLOP/s") from None
    if not 0 < flops <= MAX_FLOPS:
        raise ValueError(f"{item!r}: FLOP/s must be above 0 and at most {MAX_FLOPS:g}")
    return model, precision, flops


def parse_overrides(value: Any) -> tuple[tuple[str, str, float], ...]:
    """A YAML list or a comma-separated string of MODEL:PRECISION=FLOPS."""
    items = value if isinstance(value, list | tuple) else str(value).split(",")
    return tuple(parse_override(str(item)) for item in items if str(item).strip())


def merged(overrides: Iterable[tuple[str, str, float]], table: Peaks | None = None) -> dict[str, dict[str, float]]:
    """The shipped table with a node's overrides applied."""
    out = {model: dict(figures) for model, figures in (shipped() if table is None else table).items()}
    for model, precision, flops in overrides:
        out.setdefault(model, {})[precision] = flops
    return out


def peaks_of(model: str | None, peaks: Peaks) -> tuple[tuple[str, float], ...]:
    """(precision, FLOP/s) known for ``model``, in PRECISIONS order."""
    figures = peaks.get(model or "", {})
    return tuple((p, figures[p]) for p in PRECISIONS if p in figures)


def table_note() -> str:
    """The metric reference's section on the shipped table: every figure with its source."""
    document = read_yaml(TABLE_PATH)["models"]
    rows = ["| model (npu-smi Name) | chip | " + " | ".join(PRECISIONS) + " | source |", "|---|---|" + "---|" * len(PRECISIONS) + "---|"]
    for model, entry in document.items():
        figures = " | ".join(f"{entry[p]} T" if p in entry else "" for p in PRECISIONS)
        rows.append(f"| `{model}` | {entry.get('name', '')} | {figures} | {entry['source']} |")
    return (
        "## Peak FLOP/s: the shipped table\n\n"
        "`npu_peak_flops_per_second{precision}` comes from `exporter/npusmi/peak_flops.yaml`, per chip and\n"
        "dense (T = 10^12 FLOP/s; int8 in OP/s). Only published figures are listed, each with its source;\n"
        "a model or precision without one has no series and its jobs no MFU. The 910B (Atlas A2),\n"
        "Atlas A3 (`Ascend910`), 310B and 950 chips are not listed for want of a published per-chip\n"
        "figure: set yours with `npu_smi.peak_flops` (`--npu-smi.peak-flops 910B3:bf16=3.13e14`), which\n"
        "adds to or replaces the table per node.\n\n" + "\n".join(rows) + "\n"
    )
