"""The exporter's HTTP API besides /metrics: `POST /api/v1/steps` (training hooks).

The contract is exporter/api/openapi.yaml (served at /api/v1/openapi.yaml)."""

from __future__ import annotations

from pathlib import Path

OPENAPI_PATH = Path(__file__).with_name("openapi.yaml")
STEPS_PATH = "/api/v1/steps"
