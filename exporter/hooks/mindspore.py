"""MindSpore adapter: a ``mindspore.train.Callback`` reporting every training step.

    from exporter.hooks.mindspore import CannExporterCallback
    model.train(epochs, dataset, callbacks=[CannExporterCallback(job_name="bert-ms")])

Host time between on_train_step_begin and on_train_step_end (the callback reads no
output tensor, so it adds no synchronisation). In dataset-sink mode one callback covers
``sink_size`` iterations: they are reported as that many steps of the average duration, one
after the other. Each step carries ``cur_step_num`` as its index (after a resume, steps an
earlier process completed are re-done work). MindSpore's callbacks see no checkpoint save or
load: time them with ``monitor.phase("save_checkpoint")`` around your own.
Rank and world size come from RANK_ID/RANK_SIZE (or RANK/WORLD_SIZE), the chip from
DEVICE_ID or ASCEND_RT_VISIBLE_DEVICES.
"""

from __future__ import annotations

import time
from time import perf_counter as _perf
from typing import Any

try:
    from mindspore.train import Callback
except ImportError as exc:  # pragma: no cover - exercised only without mindspore
    raise ImportError("exporter.hooks.mindspore needs MindSpore (pip install mindspore)") from exc

from exporter.hooks.lifecycle import finish_training
from exporter.hooks.monitor import Monitor

__all__ = ["CannExporterCallback"]


def _batch_size(cb_params: Any) -> int | None:
    try:
        return int(cb_params.train_dataset.get_batch_size())
    except Exception:
        return None


class CannExporterCallback(Callback):
    def __init__(self, job_name: str | None = None, monitor: Monitor | None = None, **monitor_kwargs: Any) -> None:
        super().__init__()
        self.job_name = job_name
        self.monitor = monitor
        self._owned = monitor is None
        self._monitor_kwargs = monitor_kwargs
        self._t0: float | None = None
        self._last_step = 0
        self._samples: int | None = None

    def on_train_begin(self, run_context: Any) -> None:
        cb_params = run_context.original_args()
        if self.monitor is None:
            self.monitor = Monitor(self.job_name, **{"framework": "mindspore", **self._monitor_kwargs})
        self._last_step = int(getattr(cb_params, "cur_step_num", 0) or 0)
        self._samples = _batch_size(cb_params)

    def on_train_step_begin(self, run_context: Any) -> None:
        self._t0 = _perf()

    def on_train_step_end(self, run_context: Any) -> None:
        if self.monitor is None or self._t0 is None:
            return
        seconds = _perf() - self._t0
        self._t0 = None
        current = int(getattr(run_context.original_args(), "cur_step_num", self._last_step + 1) or 0)
        steps = max(1, current - self._last_step)
        self._last_step = current
        each, end = seconds / steps, time.time()
        for i in range(steps):  # in sink mode, one after the other, ending now
            index = current - steps + 1 + i if current > 0 else None
            self.monitor.record_step(each, samples=self._samples, end=end - (steps - 1 - i) * each, index=index)

    def on_train_end(self, run_context: Any) -> None:
        self.monitor = finish_training(self.monitor, self._owned)
