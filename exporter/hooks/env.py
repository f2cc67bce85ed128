"""The `CANN_EXPORTER_*` environment variables the training hooks read.

Named once here: the hooks read them, and the exporter accepts them beside its own options
(a pod or unit may set both), while it refuses any other `CANN_EXPORTER_*` name as a typo.
"""

URL = "CANN_EXPORTER_URL"  # the exporter's base URL (default: the node-local one)
HOOKS = "CANN_EXPORTER_HOOKS"  # off/0/false: the hooks do nothing
JOB_NAME = "CANN_EXPORTER_JOB_NAME"  # the job_name label (else $JOB_NAME, else the script)
TOKEN = "CANN_EXPORTER_INGEST_TOKEN"  # the same names as the exporter's ingest options
TOKEN_FILE = "CANN_EXPORTER_INGEST_TOKEN_FILE"
PROFILE_EVERY = "CANN_EXPORTER_PROFILE_EVERY"  # profiling windows: seconds between them (600, 10m; unset/0: off)
PROFILE_STEPS = "CANN_EXPORTER_PROFILE_STEPS"  # steps per profiling window (default 5)

HOOK_ONLY = (URL, HOOKS, JOB_NAME, PROFILE_EVERY, PROFILE_STEPS)
