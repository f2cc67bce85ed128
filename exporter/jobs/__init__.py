"""Training jobs: iteration timings the hooks in training loops POST to /api/v1/steps.

validate.py (body -> Batch, pure) -> store.py (one RankState per job and rank, TTL, JobsPart)
-> collector.py, with admission.py deciding whether a new rank fits the limits and which idle
ranks give way, the HTTP route in http.py (its contract: openapi.yaml), the metric specs in
metrics.py and `ingest.*` in options.py.
"""
