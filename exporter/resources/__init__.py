"""The exporter's own resources: memory, CPU, file descriptors and garbage collection of its
process (through prometheus_client's process collector), and the memory limit of the cgroup
it runs in, so an operator sees the exporter approach its limit before the kernel kills it.

cgroup.py (the limit, read like node_exporter reads /sys, from a configurable root) and
source.py (sampled on a schedule) -> part.py (ResourcesPart) -> collector.py, with the
metric specs in metrics.py.
"""
