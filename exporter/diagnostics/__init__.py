"""`cann-exporter diagnose` and `cann-exporter report`: the three-level tuning method of docs/tuning.md
("sandwich": macro, meso, micro) and capacity planning, as commands.

Data flows one way, and each stage is its own module:

    readers (Prometheus HTTP API, /metrics text, profile exports, the local node)
      -> model.Observations (source-agnostic numbers)
      -> analysis (hardware, chip_checks, job_checks, job_ranks, profile_checks) / baseline / capacity
         (pure: numbers + threshold table in, findings out)
      -> render / charts / html (terminal, JSON, Markdown, HTML + PNG)

Every verdict comes from the one threshold table (exporter/thresholds/thresholds.yaml), the same one
the alert rules are generated from.
"""
