"""Chip owners: who holds each chip, on any node, through the cgroup of each process npu-smi
shows on it (Kubernetes pods, Docker, containerd and Podman containers, Slurm jobs, systemd
services, or the host), and through a Slurm prolog's mapping directory where cgroups do not
show the job.

parse.py (cgroup, stat, status, passwd and mapping-file text in, frozen records out) ->
procfs.py (the bounded reads under `owners.procfs`) and engine.py (container names from a
Docker-compatible socket) -> source.py (schedule, caches, health) -> part.py (records joined
to npu-smi's chips and the kubelet's pods) -> collector.py, with the metric specs in
metrics.py and `owners.*` in options.py. The formats: docs/formats/owners.md.
"""
