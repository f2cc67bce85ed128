"""Profiler exports (torch_npu, MindSpore, msprof, msprof-analyze cluster output): the tuning
health-table indicators (docs/tuning.md) of each finished export, per job and rank.

formats/ (one file kind each -> records) -> load.py (one export -> ProfileData) ->
indicators.py (ProfileData -> ProfileSummary); layout.py finds exports and tells when one is
finished, source.py schedules scans, state.py remembers parsed exports across restarts,
part.py/collector.py/metrics.py serve them, options.py holds `profiles.*`. The formats are
described in docs/formats/profiler-exports.md.
"""
