"""The web config's metrics: name, type, help, labels and the WebStatus field that fills each."""

from __future__ import annotations

from exporter.core.metric import spec

WEB_CONFIG_RELOAD_SUCCESS = spec("cann_exporter_web_config_last_reload_success", "gauge", "1 if the latest load of the web config file (and the files it names) succeeded; 0: the last good one is still in force.", field="last_reload_success")
WEB_CONFIG_RELOAD_TIME = spec("cann_exporter_web_config_last_reload_success_timestamp_seconds", "gauge", "Unix time of the latest successful load of the web config file.", field="last_reload_success_time")
WEB_CONFIG_RELOADS = spec("cann_exporter_web_config_reloads_total", "counter", "Reloads of the web config file after a change, by result (success, failure).", ("result",), field="reloads")
WEB_AUTH_FAILURES = spec("cann_exporter_web_auth_failures_total", "counter", "Requests refused by the web config, by reason (no_credentials, wrong_credentials, client_san).", ("reason",), field="auth_failures")
WEB_METRICS = (WEB_CONFIG_RELOAD_SUCCESS, WEB_CONFIG_RELOAD_TIME, WEB_CONFIG_RELOADS, WEB_AUTH_FAILURES)
