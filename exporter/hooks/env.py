"""The `CANN_EXPORTER_*` environment variables the training hooks read.

Named once here: the hooks read them, and the exporter accepts them beside its own options
(a pod or unit may set both), while it refuses any other `CANN_EXPORTER_*` name as a typo.
"""

URL = "CANN_EXPORTER_URL"              # the exporter's base URL (default: the node-local one)
HOOKS = "CANN_EXPORTER_HOOKS"          # off/0/false: the hooks do nothing
JOB_NAME = "CANN_EXPORTER_JOB_NAME"    # the job_name label (else $JOB_NAME, else the script)
TOKEN = "CANN_EXPORTER_INGEST_TOKEN"   # the same names as the exporter's ingest options
TOKEN_FILE = "CANN_EXPORTER_INGEST_TOKEN_FILE"

HOOK_ONLY = (URL, HOOKS, JOB_NAME)
