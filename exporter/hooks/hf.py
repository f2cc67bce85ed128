"""HuggingFace transformers adapter: a TrainerCallback reporting every optimizer step.

    from exporter.hooks.hf import CannExporterCallback
    trainer = Trainer(..., callbacks=[CannExporterCallback(job_name="llama-sft")])

Steps are timed on the device (see exporter.hooks.torch); samples per step are
per_device_train_batch_size x gradient_accumulation_steps of this process, and each step
carries the Trainer's ``global_step`` as its index (after a resume, steps an earlier process
already completed are re-done work). Checkpoint saves (from the step's end, or the evaluation
before them, to ``on_save``) and, on a resumed run, the restore (from the Trainer's
construction to the first step) are reported as phases between steps; so are evaluations.
The job name is ``job_name``, else $CANN_EXPORTER_JOB_NAME / $JOB_NAME, else the Trainer's
``run_name`` (or the output directory's name), else the script's. The callback never reads a
loss or any device tensor, so it adds no synchronisation.
"""

from __future__ import annotations

import os
import time
from time import perf_counter as _perf
from typing import Any

try:
    from transformers import TrainerCallback
except ImportError as exc:  # pragma: no cover - exercised only without transformers
    raise ImportError("exporter.hooks.hf needs transformers (pip install transformers)") from exc

from exporter.hooks.lifecycle import finish_training
from exporter.hooks.torch import TorchMonitor

__all__ = ["CannExporterCallback"]


def run_name(args: Any) -> str | None:
    """The Trainer's name for the run: ``run_name``, else the output directory's name."""
    if getattr(args, "run_name", None):
        return str(args.run_name)
    output_dir = getattr(args, "output_dir", None)
    return os.path.basename(os.path.normpath(output_dir)) if output_dir else None


class CannExporterCallback(TrainerCallback):
    def __init__(
        self,
        job_name: str | None = None,
        monitor: TorchMonitor | None = None,
        *,
        profile_every: float | None = None,
        profile_steps: int | None = None,
        **monitor_kwargs: Any,
    ) -> None:
        """``profile_every``/``profile_steps``: TorchMonitor's profiling windows (else the environment's)."""
        self.job_name = job_name
        self.monitor = monitor
        self._owned = monitor is None
        self._monitor_kwargs = {"profile_every": profile_every, "profile_steps": profile_steps, **monitor_kwargs}
        self._built: float | None = None  # perf_counter time the Trainer was built
        self._restoring: float | None = None  # a resumed run: since when it restores
        self._since: float | None = None  # the end of the latest step, log or evaluation

    def on_init_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._built = _perf()  # a resumed run's restore (checkpoint, optimizer, data skip) runs from here

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self.monitor is None:
            kw = {"framework": "transformers", **self._monitor_kwargs}
            kw.setdefault("rank", getattr(args, "process_index", None))
            kw.setdefault("world_size", getattr(args, "world_size", None))
            kw.setdefault("device", getattr(args, "device", None))
            kw.setdefault("run_name", run_name(args))  # below the explicit name and the environment's
            self.monitor = TorchMonitor(self.job_name, **kw)
        if (getattr(state, "global_step", 0) or 0) > 0:  # resumed from a checkpoint
            self._restoring = self._built if self._built is not None else _perf()
        self._built = None

    def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self.monitor is not None:
            if self._restoring is not None:
                self._phase("load_checkpoint", self._restoring)
                self._restoring = None
            self._since = None
            self.monitor.begin_step()

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self.monitor is not None:
            samples = getattr(args, "per_device_train_batch_size", None)
            if samples is not None:
                samples *= getattr(args, "gradient_accumulation_steps", 1) or 1
            self.monitor.end_step(samples, index=getattr(state, "global_step", None))
            self._since = _perf()

    def on_log(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self._since is not None:
            self._since = _perf()  # logging is not the save that may follow

    def on_evaluate(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self.monitor is not None and self._since is not None:
            self._phase("evaluate", self._since)
            self._since = _perf()

    def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self.monitor is not None and self._since is not None:
            self._phase("save_checkpoint", self._since)
            self._since = None

    def _phase(self, name: str, since: float) -> None:
        assert self.monitor is not None
        self.monitor.record_phase(name, _perf() - since, end=time.time())

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.monitor = finish_training(self.monitor, self._owned)
