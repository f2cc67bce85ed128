"""The toy source's metric."""

from __future__ import annotations

from exporter.core.metric import spec

READING = spec("npu_toy_reading", "gauge", "The number read from toy.path.", field="reading")
TOY_METRICS = (READING,)
