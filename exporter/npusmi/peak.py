"""Peak FLOP/s per chip and precision, each figure with where it comes from (its ``source``).

- ``config``: a node's ``npu_smi.peak_flops`` entries (``MODEL:PRECISION=FLOPS``), which add to or
  replace the figures below, per model and precision;
- ``published``: the shipped table (peak_flops.yaml), published figures only, each with its
  public source. A model listed there gets nothing derived: the table is its whole answer;
- ``derived``: for a model the table does not list, the fp16/bf16 dense cube peak of the chip
  itself, from npu-smi `-t common`: ``Aicore Count`` x rated ``Aicore Freq(MHZ)`` x 4096 x 2
  (the cube unit does 16 x 16 x 16 FP16/BF16 multiply-adds per cycle per AI core, two FLOPs
  each). No int8 figure is derived: no public per-chip source gives the int8 rate of these
  cubes. A chip printing neither figure (310P, 310B) has no derived peak.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from functools import cache
from pathlib import Path
from typing import Any

from exporter.core.yamlfile import read_yaml

TABLE_PATH = Path(__file__).with_name("peak_flops.yaml")
PRECISIONS = ("fp32", "bf16", "fp16", "int8")
TERA = 1e12
MAX_FLOPS = 1e18  # far above any chip (an exaFLOP/s per chip is a typo)
CONFIG, PUBLISHED, DERIVED = "config", "published", "derived"  # the `source` label, strongest first
CUBE_MACS_PER_CYCLE = 16 * 16 * 16  # FP16/BF16 multiply-adds per cycle per AI core (CANN: cube m, n, k = 16)
DERIVED_PRECISIONS = ("bf16", "fp16")  # what the cube rule gives; int8 has no public per-chip rule
MAX_AICORES = 1024  # far above any chip (910B: 20-24, 950: 32)
MAX_AICORE_HZ = 10e9  # a rated clock above 10 GHz is a misread

MAX_ENTRIES = 256  # models in the table, items in npu_smi.peak_flops: far above the chips there are
MAX_MODEL_CHARS = 64  # npu-smi's Name is a short token: 910B3, Ascend910, 310P3, Ascend950PR
MODEL_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]*")  # as npu-smi `info` prints it in its Name column

Peaks = Mapping[str, Mapping[str, tuple[float, str]]]  # model -> precision -> (FLOP/s, source)
Peak = tuple[str, float, str]  # (precision, FLOP/s, source) of one chip


def table_from(document: Any) -> dict[str, dict[str, float]]:
    """The ``models`` of a table document, figures in FLOP/s; ValueError naming a bad entry."""
    models = document.get("models") if isinstance(document, dict) else None
    if not isinstance(models, dict):
        raise ValueError("expected a mapping `models`")
    if len(models) > MAX_ENTRIES:
        raise ValueError(f"{len(models)} models; at most {MAX_ENTRIES}")
    out: dict[str, dict[str, float]] = {}
    for model, entry in models.items():
        if problem := model_problem(str(model)):
            raise ValueError(problem)
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


def model_problem(model: str) -> str | None:
    """What is wrong with a model name, naming it (cut to 40 characters); None when it is fine."""
    shown = repr(model[:40]) + ("..." if len(model) > 40 else "")
    if len(model) > MAX_MODEL_CHARS:
        return f"model {shown}: {len(model)} characters; at most {MAX_MODEL_CHARS}"
    if not MODEL_NAME.fullmatch(model):
        return f"model {shown}: expected the name npu-smi prints (letters, digits, '.', '_', '+', '-')"
    return None


def parse_override(item: str) -> tuple[str, str, float]:
    """``MODEL:PRECISION=FLOPS`` (FLOPS in FLOP/s, e.g. 3.13e14)."""
    target, eq, number = item.partition("=")
    model, colon, precision = target.strip().rpartition(":")
    if not eq or not colon or not model:
        raise ValueError(f"{item[:80]!r}: expected MODEL:PRECISION=FLOPS, e.g. 910B3:bf16=3.13e14")
    if problem := model_problem(model):
        raise ValueError(problem)
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
    """A YAML list or a comma-separated string of MODEL:PRECISION=FLOPS: at most MAX_ENTRIES,
    each model and precision once (ValueError naming the repeated one)."""
    items = [str(item) for item in (value if isinstance(value, list | tuple) else str(value).split(",")) if str(item).strip()]
    if len(items) > MAX_ENTRIES:
        raise ValueError(f"{len(items)} entries; at most {MAX_ENTRIES}")
    out: dict[tuple[str, str], float] = {}
    for item in items:
        model, precision, flops = parse_override(item)
        if (model, precision) in out:
            raise ValueError(
                f"{model}:{precision} is given twice ({out[model, precision]:g} and {flops:g}); give each model and precision once"
            )
        out[model, precision] = flops
    return tuple((model, precision, flops) for (model, precision), flops in out.items())


def merged(
    overrides: Iterable[tuple[str, str, float]], table: Mapping[str, Mapping[str, float]] | None = None
) -> dict[str, dict[str, tuple[float, str]]]:
    """The shipped (published) table with a node's overrides (config) applied, each figure with its source."""
    published = shipped() if table is None else table
    out = {model: {p: (flops, PUBLISHED) for p, flops in figures.items()} for model, figures in published.items()}
    for model, precision, flops in overrides:
        out.setdefault(model, {})[precision] = (flops, CONFIG)
    return out


def derived_flops(aicore_count: int | None, rated_mhz: float | None) -> float | None:
    """The fp16/bf16 dense cube peak of a chip from its `-t common` figures; None without both
    (or with figures no chip has)."""
    if aicore_count is None or rated_mhz is None or not 0 < aicore_count <= MAX_AICORES:
        return None
    hertz = rated_mhz * 1e6
    if not 0 < hertz <= MAX_AICORE_HZ:
        return None
    return aicore_count * hertz * CUBE_MACS_PER_CYCLE * 2


def peaks_of(model: str | None, peaks: Peaks, derived: float | None = None) -> tuple[Peak, ...]:
    """(precision, FLOP/s, source) for a chip of ``model``, in PRECISIONS order: config over
    published; ``derived`` (derived_flops of the chip) fills bf16 and fp16 where neither is set,
    and only for a model the published table does not list."""
    figures = dict(peaks.get(model or "", {}))
    if derived is not None and all(source != PUBLISHED for _, source in figures.values()):
        for precision in DERIVED_PRECISIONS:
            figures.setdefault(precision, (derived, DERIVED))
    return tuple((p, *figures[p]) for p in PRECISIONS if p in figures)


def table_note() -> str:
    """The metric reference's section on the shipped table: every figure with its source."""
    document = read_yaml(TABLE_PATH)["models"]
    rows = ["| model (npu-smi Name) | chip | " + " | ".join(PRECISIONS) + " | source |", "|---|---|" + "---|" * len(PRECISIONS) + "---|"]
    for model, entry in document.items():
        figures = " | ".join(f"{entry[p]} T" if p in entry else "" for p in PRECISIONS)
        rows.append(f"| `{model}` | {entry.get('name', '')} | {figures} | {entry['source']} |")
    return (
        "## Peak FLOP/s: published, derived, configured\n\n"
        "`npu_peak_flops_per_second{precision,source}` is per chip and dense (T = 10^12 FLOP/s; int8 in\n"
        "OP/s). Its `source` says where the figure comes from; for a model and precision the first of\n"
        "these that has one wins:\n\n"
        '1. `source="config"`: the node\'s `npu_smi.peak_flops` (`--npu-smi.peak-flops 910B3:bf16=3.13e14`),\n'
        "   which adds to or replaces figures per model and precision;\n"
        '2. `source="published"`: the shipped table below (`exporter/npusmi/peak_flops.yaml`), published\n'
        "   figures only, each with its public source. A model listed there gets nothing derived;\n"
        '3. `source="derived"`: for a model the table does not list, bf16 and fp16 from the chip\'s own\n'
        "   npu-smi `-t common`: `Aicore Count` x rated `Aicore Freq(MHZ)` x 4096 x 2. The cube unit of\n"
        "   an AI core does 16 x 16 x 16 FP16/BF16 multiply-adds per cycle, two FLOPs each (`cube_m_size`,\n"
        "   `cube_n_size`, `cube_k_size` = 16 under `[AICoreSpec]` in CANN's platform files,\n"
        "   `platform_config/Ascend910B*.ini`). npu-smi prints both figures on the 910 family (910B,\n"
        "   Atlas A3) and the 950, so their jobs have MFU with no configuration: a 910B3 (20 x 1800\n"
        "   MHz) 294.9 T, a 910B1 or B2 (24 x 1800 MHz) 353.9 T, a 950 (32 x 1650 MHz) 432.5 T. The\n"
        "   rule checks against the first-generation 910 (32 x 1000 MHz: 262 T against its published\n"
        "   256 T); the 950's figure is not checked against a published one. No int8 figure is derived\n"
        "   (no public per-chip rule gives these cubes' int8 rate), and the 310P and 310B print no\n"
        "   core count: no derived peak there.\n\n"
        "A model or precision with none of the three has no series and its jobs no MFU.\n\n" + "\n".join(rows) + "\n"
    )
