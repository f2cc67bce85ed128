"""npu-smi: every chip's identity, utilization, memory, power, temperature, health, ECC and
processes, read through the bounded subprocess runner.

parse/ (text -> records) -> source.py (what to call, when) -> part.py (records -> DevicesPart)
-> collector.py (DevicesPart -> families), with the metric specs in metrics.py and the
`npu_smi.*` options in options.py.
"""
