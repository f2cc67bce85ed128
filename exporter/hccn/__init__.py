"""hccn_tool: each chip's RoCE/UB network ports (link, speed, health, counters, bandwidth) and
optical modules, read through the bounded subprocess runner.

parse.py (text -> records.py) -> source.py (what to call, when) -> part.py (records ->
NetworkPart) -> collector.py, with the metric specs in metrics.py and `hccn.*` in options.py.
The chips to ask about come from the npu-smi part.
"""
