"""The web metrics: the web config's (WebStatus fields) and the HTTP listener's (HttpStatus fields)."""

from __future__ import annotations

from exporter.core.metric import spec

WEB_CONFIG_RELOAD_SUCCESS = spec(
    "cann_exporter_web_config_last_reload_success",
    "gauge",
    "1 if the latest load of the web config file (and the files it names) succeeded; 0: the last good one is still in force.",
    field="last_reload_success",
)
WEB_CONFIG_RELOAD_TIME = spec(
    "cann_exporter_web_config_last_reload_success_timestamp_seconds",
    "gauge",
    "Unix time of the latest successful load of the web config file.",
    field="last_reload_success_time",
)
WEB_CONFIG_RELOADS = spec(
    "cann_exporter_web_config_reloads_total",
    "counter",
    "Reloads of the web config file after a change, by result (success, failure).",
    ("result",),
    field="reloads",
)
WEB_AUTH_FAILURES = spec(
    "cann_exporter_web_auth_failures_total",
    "counter",
    "Requests refused by the web config, by reason (no_credentials, wrong_password, unknown_user, throttled: too many failures from the address for that user name, or for any, overloaded: too many bcrypt checks waiting, client_san).",
    ("reason",),
    field="auth_failures",
)
WEB_AUTH_BCRYPT_CHECKS = spec(
    "cann_exporter_web_auth_bcrypt_checks_total",
    "counter",
    "bcrypt checks run: basic-auth requests not answered from the cache of verified credentials, nor refused before.",
    field="bcrypt_checks",
)
WEB_AUTH_BCRYPT_PENDING = spec(
    "cann_exporter_web_auth_bcrypt_pending",
    "gauge",
    "bcrypt checks queued or running now; past the bound, requests are refused at once (reason overloaded).",
    field="bcrypt_pending",
)
WEB_METRICS = (
    WEB_CONFIG_RELOAD_SUCCESS,
    WEB_CONFIG_RELOAD_TIME,
    WEB_CONFIG_RELOADS,
    WEB_AUTH_FAILURES,
    WEB_AUTH_BCRYPT_CHECKS,
    WEB_AUTH_BCRYPT_PENDING,
)

HTTP_CONNECTIONS = spec("cann_exporter_http_connections", "gauge", "Open HTTP connections, health slots included.", field="connections")
HTTP_MAX_CONNECTIONS = spec(
    "cann_exporter_http_max_connections",
    "gauge",
    "Connections served at most: web.max_connections, or fewer when the open-file limit is lower; web.health_connections more answer /healthz and /readyz only.",
    field="max_connections",
)
HTTP_REJECTED = spec(
    "cann_exporter_http_connections_rejected_total",
    "counter",
    "Connections refused by the listener, by reason (full: closed at accept, every slot taken, or silent in the lobby for a second while they were; health_only: a health slot asked for another path, 503; evicted: closed for a newer one (a connection of the address holding the most, or one waiting on its client for over a second; a health slot's or an address over its cap: a quarter of a second; one that never sent a byte, for a newcomer whose request is waiting); rate_limited: the address opened new connections faster than web.new_connections_per_second, closed at accept).",
    ("reason",),
    field="rejected",
)
HTTP_TIMEOUTS = spec(
    "cann_exporter_http_timeouts_total",
    "counter",
    "Connections closed by a deadline, by kind (header, body, idle, write: the client did not read its response).",
    ("kind",),
    field="timeouts",
)
HTTP_ACCEPT_ERRORS = spec(
    "cann_exporter_http_accept_errors_total",
    "counter",
    "Failed accept() calls, by errno (emfile: the exporter is out of file descriptors; enfile: the host is).",
    ("reason",),
    field="accept_errors",
)
HTTP_REQUEST_ERRORS = spec(
    "cann_exporter_http_request_errors_total",
    "counter",
    "Requests refused before a handler saw them whole, by reason (bad_request: not valid HTTP/1.1, 400; bad_encoding: a body that does not decode, 400; unsupported_encoding: 415; too_large: over the per-request cap, 413; busy: the budget of bodies in flight spent, 503).",
    ("reason",),
    field="request_errors",
)
HTTP_BODY_BYTES_IN_FLIGHT = spec(
    "cann_exporter_http_body_bytes_in_flight",
    "gauge",
    "Request body bytes reserved by requests being handled (their Content-Length; the per-request cap when unknown or compressed).",
    field="body_bytes_in_flight",
)
HTTP_MAX_BODY_BYTES_IN_FLIGHT = spec(
    "cann_exporter_http_max_body_bytes_in_flight",
    "gauge",
    "The budget of request body bytes in flight (web.max_body_bytes_in_flight); past it a body gets 503 unread.",
    field="max_body_bytes_in_flight",
)
# In the order they are rendered: the numbers, then the counts by reason or kind.
HTTP_METRICS = (
    HTTP_CONNECTIONS,
    HTTP_MAX_CONNECTIONS,
    HTTP_BODY_BYTES_IN_FLIGHT,
    HTTP_MAX_BODY_BYTES_IN_FLIGHT,
    HTTP_REJECTED,
    HTTP_TIMEOUTS,
    HTTP_ACCEPT_ERRORS,
    HTTP_REQUEST_ERRORS,
)
