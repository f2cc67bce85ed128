"""The local node: the exporter's own sources run in-process (npu-smi or the simulator), their
snapshot rendered by the exporter's collectors and read back like a /metrics scrape, so
`diagnose` sees exactly what `serve` would serve."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from typing import Any

from exporter.app.settings import ConfigError, Settings, build_settings, load_yaml
from exporter.core.selfmetrics import STATUS
from exporter.diagnostics.model import CannotDiagnose
from exporter.diagnostics.scrape_reader import Scrape, any_chip_read, parse_exposition


def local_settings(config_text: str | None, config_origin: str, env: Mapping[str, str], flags: Mapping[str, Any]) -> Settings:
    """Settings as `serve` builds them (file < env < flags), without the hooks ingest."""
    try:
        file_values = load_yaml(config_text, config_origin) if config_text is not None else {}
        return build_settings(file_values, env, {**flags, "ingest.enabled": False}, origin=config_origin)
    except ConfigError as exc:
        raise CannotDiagnose("configuration error: " + "; ".join(exc.problems)) from None


async def scrape_local(settings: Settings, samples: int = 1, interval: float = 10.0) -> list[Scrape]:
    """Run every source ``samples`` times, ``interval`` seconds apart (bounded by the caller)."""
    from prometheus_client import generate_latest

    from exporter.node.assembly import assemble
    from exporter.npusmi.source import NpuSmiSource

    node = assemble(settings, ingest=False)
    npu_smi = node.source(NpuSmiSource)
    command = " ".join(npu_smi.command) if npu_smi else "npu-smi"
    scrapes: list[Scrape] = []
    for index in range(max(1, samples)):
        if index:
            await asyncio.sleep(interval)
        await node.sampler.run_once()
        text = generate_latest(node.registry).decode()
        scrapes.append(parse_exposition(text, time.time(), "local node"))
    if not any_chip_read(scrapes):
        status = node.publisher.sampled.get(STATUS)
        sources = status.sources if status else ()
        errors = sorted({f"{s.name}: {reason}" for s in sources for reason in s.errors})
        detail = f" ({', '.join(errors)})" if errors else ""
        raise CannotDiagnose(
            f"no NPU chip could be read through {command}{detail}; use --npu-smi PATH, --simulate, --metrics-url or --prometheus"
        )
    return scrapes
