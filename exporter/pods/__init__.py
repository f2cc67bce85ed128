"""Pod attribution: which pod and container holds each chip, from the kubelet pod-resources
API (gRPC over a unix socket).

kubelet.py (the call and its answer) -> source.py (schedule, TTL) -> part.py (matched to
npu-smi's chips) -> collector.py, with the metric specs in metrics.py and
`podresources.*` in options.py.
"""
