"""PyTorch Lightning adapter: a Callback reporting every training batch.

    from exporter.hooks.lightning import CannExporterCallback
    trainer = lightning.Trainer(callbacks=[CannExporterCallback(job_name="vit-b16")])

Batches are timed on the device (see exporter.hooks.torch). Samples come from
``batch_size_fn(batch)`` when given, else from the leading dimension of the batch's first
tensor (reading a shape never synchronises). Each batch carries ``trainer.global_step`` as its
index (batches of one optimizer step share it; after a resume, steps an earlier process
completed are re-done work). Checkpoint saves (from ``on_save_checkpoint`` to the next batch,
epoch or the end), a resumed run's restore (from ``setup`` to its first batch) and validation
runs are reported as phases between steps.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from time import perf_counter as _perf
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # one Callback type to check against; at run time either package's
    from lightning.pytorch import Callback
else:
    try:
        from lightning.pytorch import Callback
    except ImportError:  # the older package name
        try:
            from pytorch_lightning import Callback
        except ImportError as exc:  # pragma: no cover - exercised only without lightning
            raise ImportError("exporter.hooks.lightning needs lightning (pip install lightning)") from exc

from exporter.hooks.lifecycle import finish_training
from exporter.hooks.torch import TorchMonitor

__all__ = ["CannExporterCallback", "batch_size"]


def batch_size(batch: Any) -> int | None:
    """Leading dimension of the first tensor found in a tensor, sequence or mapping."""
    shape = getattr(batch, "shape", None)
    if shape is not None:
        return int(shape[0]) if len(shape) else None
    if isinstance(batch, dict):
        batch = list(batch.values())
    if isinstance(batch, (list, tuple)):
        for item in batch:
            found = batch_size(item)
            if found is not None:
                return found
    return None


class CannExporterCallback(Callback):
    def __init__(
        self,
        job_name: str | None = None,
        batch_size_fn: Callable[[Any], int | None] | None = None,
        monitor: TorchMonitor | None = None,
        *,
        profile_every: float | None = None,
        profile_steps: int | None = None,
        **monitor_kwargs: Any,
    ) -> None:
        """``profile_every``/``profile_steps``: TorchMonitor's profiling windows (else the environment's)."""
        self.job_name = job_name
        self.batch_size_fn = batch_size_fn or batch_size
        self.monitor = monitor
        self._owned = monitor is None
        self._monitor_kwargs = {"profile_every": profile_every, "profile_steps": profile_steps, **monitor_kwargs}
        self._set_up: float | None = None  # perf_counter time of setup: a resumed run restores from here
        self._restoring: float | None = None
        self._saving: float | None = None  # a checkpoint save began (on_save_checkpoint) and has not ended
        self._validating: float | None = None

    def setup(self, trainer: Any, pl_module: Any, stage: str) -> None:
        self._set_up = _perf()

    def on_train_start(self, trainer: Any, pl_module: Any) -> None:
        if self.monitor is None:
            kw = {"framework": "lightning", **self._monitor_kwargs}
            kw.setdefault("rank", trainer.global_rank)
            kw.setdefault("world_size", trainer.world_size)
            kw.setdefault("device", trainer.strategy.root_device)
            self.monitor = TorchMonitor(self.job_name, **kw)
        if (getattr(trainer, "global_step", 0) or 0) > 0:  # resumed: the checkpoint was restored since setup
            self._restoring = self._set_up if self._set_up is not None else _perf()

    def on_save_checkpoint(self, trainer: Any, pl_module: Any, checkpoint: dict[str, Any]) -> None:
        if self.monitor is not None and self._saving is None:
            self._saving = _perf()  # the state is gathered; the file is written after this hook

    def _between(self) -> None:
        """A boundary between steps: a save or restore in progress has ended."""
        if self.monitor is None:
            return
        if self._restoring is not None:
            self._phase("load_checkpoint", self._restoring)
            self._restoring = None
        if self._saving is not None:
            self._phase("save_checkpoint", self._saving)
            self._saving = None

    def _phase(self, name: str, since: float) -> None:
        assert self.monitor is not None
        self.monitor.record_phase(name, _perf() - since, end=time.time())

    def on_train_batch_start(self, trainer: Any, pl_module: Any, batch: Any, batch_idx: int) -> None:
        if self.monitor is not None:
            self._between()
            self.monitor.begin_step()

    def on_train_batch_end(self, trainer: Any, pl_module: Any, outputs: Any, batch: Any, batch_idx: int) -> None:
        if self.monitor is not None:
            try:
                samples = self.batch_size_fn(batch)
            except Exception:
                samples = None
            self.monitor.end_step(samples, index=getattr(trainer, "global_step", None))

    def on_train_epoch_start(self, trainer: Any, pl_module: Any) -> None:
        self._between()

    def on_train_epoch_end(self, trainer: Any, pl_module: Any) -> None:
        self._between()

    def on_validation_start(self, trainer: Any, pl_module: Any) -> None:
        if self.monitor is not None and not getattr(trainer, "sanity_checking", False):
            self._between()
            self._validating = _perf()

    def on_validation_end(self, trainer: Any, pl_module: Any) -> None:
        if self.monitor is not None and self._validating is not None:
            self._phase("validation", self._validating)
            self._validating = None

    def on_train_end(self, trainer: Any, pl_module: Any) -> None:
        self._between()
        self.monitor = finish_training(self.monitor, self._owned)
