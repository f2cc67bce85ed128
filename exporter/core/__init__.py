"""What every package builds on: errors and exit codes, the reading of numbers and durations
(values.py), the clocks, the bounded subprocess runner, per-source health, the sampler,
metric specs and render helpers, options, logging, and the exporter's own metrics.

core imports nothing else of ``exporter``.
"""
