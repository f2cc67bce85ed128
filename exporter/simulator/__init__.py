"""Built-in npu-smi simulator: npu-smi's command line in, npu-smi's exact text out.

Standard library only; imports nothing else from ``exporter`` so it can run as a
stand-alone `npu-smi` on machines without an NPU (`python -m exporter.simulator`).
`python -m exporter.simulator.hccn` answers hccn_tool's command line the same way (hccn.py,
network state in network.py).
"""

from exporter.simulator.models import MODEL_NAMES, MODELS, NodeModel, get_model
from exporter.simulator.scenarios import SCENARIOS, NodeState, simulate

__all__ = ["MODELS", "MODEL_NAMES", "NodeModel", "NodeState", "SCENARIOS", "get_model", "simulate"]
