"""Training-loop hooks: report iteration timings to the node's cann-exporter.

Standard library only, so it can be imported in any training image::

    from exporter.hooks import Monitor
    mon = Monitor(job_name="bert-large")
    for batch in loader:
        with mon.step(samples=len(batch)):
            with mon.phase("h2d"): ...
            with mon.phase("compute"): ...
    mon.close()

Framework adapters (each needs its framework, imported only when used):
``exporter.hooks.torch`` (device-event timing), ``exporter.hooks.hf`` (transformers
TrainerCallback), ``exporter.hooks.lightning`` (Lightning Callback),
``exporter.hooks.mindspore`` (MindSpore Callback).
"""

from exporter.hooks.identity import Identity, resolve_identity
from exporter.hooks.monitor import DEFAULT_URL, Monitor
from exporter.hooks.wire import PHASES

__all__ = ["DEFAULT_URL", "PHASES", "Identity", "Monitor", "resolve_identity"]
