"""The phase vocabulary: the names training loops give their phases, and the stage of the
step each one belongs to (the stages the health indicators are computed over).

A phase is served under the word the loop wrote (label `phase`) with its stage beside it
(label `stage`): dashboards and `diagnose` show the word, rules and verdicts sum by stage.
Spellings are folded (case, `-`, spaces and dots become `_`), so `Forward`, `all-reduce` and
`data loading` are understood. A name outside the table is served as `other` and counted.
"""

from __future__ import annotations

# The guide's stages of a training step, in the order a step runs them.
STAGES = ("data", "h2d", "compute", "communication", "d2h", "framework", "other")

_WORDS: dict[str, tuple[str, ...]] = {
    "data": (
        "data",
        "dataloader",
        "data_loader",
        "data_loading",
        "dataload",
        "data_load",
        "load",
        "loading",
        "load_batch",
        "next_batch",
        "batch",
        "fetch",
        "input",
        "inputs",
        "input_pipeline",
        "preprocess",
        "preprocessing",
        "collate",
        "augment",
        "augmentation",
    ),
    "h2d": ("h2d", "htod", "host_to_device", "to_device", "copy_in", "upload", "memcpy_h2d"),
    "compute": (
        "compute",
        "forward",
        "fwd",
        "forward_pass",
        "backward",
        "bwd",
        "backward_pass",
        "loss",
        "optimizer",
        "optimizer_step",
        "optim",
        "opt_step",
        "zero_grad",
        "clip_grad",
        "grad_clip",
        "gradient_clipping",
        "recompute",
        "model",
    ),
    "communication": (
        "communication",
        "comm",
        "comms",
        "collective",
        "allreduce",
        "all_reduce",
        "reduce_scatter",
        "reducescatter",
        "all_gather",
        "allgather",
        "all_to_all",
        "alltoall",
        "broadcast",
        "barrier",
        "send",
        "recv",
        "p2p",
        "grad_sync",
        "gradient_sync",
        "hccl",
        "nccl",
    ),
    "d2h": ("d2h", "dtoh", "device_to_host", "to_host", "copy_out", "memcpy_d2h"),
    "framework": ("framework", "overhead", "host", "python", "dispatch", "launch", "compile", "graph_compile", "jit"),
    "other": (
        "other",
        "checkpoint",
        "checkpointing",
        "ckpt",
        "save",
        "save_checkpoint",
        "checkpoint_save",
        "save_ckpt",
        "ckpt_save",
        "load_checkpoint",
        "checkpoint_load",
        "load_ckpt",
        "ckpt_load",
        "restore",
        "restore_checkpoint",
        "checkpoint_restore",
        "resume",
        "eval",
        "evaluate",
        "evaluation",
        "validation",
        "validate",
        "logging",
        "log",
        "metrics",
    ),
}

# word -> stage: the one table the ingest, the collector and `diagnose` read.
VOCABULARY: dict[str, str] = {word: stage for stage, words in _WORDS.items() for word in words}

# The words of the `other` stage that time checkpoints (goodput.py counts them as badput, inside
# a step or outside): saving one, and restoring (loading, resuming from) one.
CHECKPOINT_SAVE_WORDS = ("checkpoint", "checkpointing", "ckpt", "save", "save_checkpoint", "checkpoint_save", "save_ckpt", "ckpt_save")
CHECKPOINT_RESTORE_WORDS = (
    "load_checkpoint",
    "checkpoint_load",
    "load_ckpt",
    "ckpt_load",
    "restore",
    "restore_checkpoint",
    "checkpoint_restore",
    "resume",
)

# A rank's phase series: every stage name, plus at most this many other words (a word past
# the cap is served under its stage's name).
MAX_WORDS_PER_RANK = 10
PHASE_SERIES_PER_RANK = len(STAGES) + MAX_WORDS_PER_RANK

_FOLD = str.maketrans({"-": "_", " ": "_", ".": "_"})
_MAX_NAME = 64  # longer names are no word of the table


def word_of(name: str) -> str | None:
    """The table's word for a phase name as written, or None when it is not in the table."""
    if len(name) > _MAX_NAME:
        return None
    word = name.strip().lower().translate(_FOLD)
    return word if word in VOCABULARY else None


def stage_of(word: str) -> str:
    """The stage a served phase word belongs to (`other` for a word outside the table)."""
    return VOCABULARY.get(word, "other")


def is_stage(word: str) -> bool:
    return VOCABULARY.get(word) == word
