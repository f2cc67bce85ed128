"""The exporter's HTTP API besides /metrics: `POST /api/v1/steps` (training hooks).

The contract is exporter/api/openapi.yaml (served at /api/v1/openapi.yaml)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

OPENAPI_PATH = Path(__file__).with_name("openapi.yaml")
STEPS_PATH = "/api/v1/steps"
# request[...] key: the basic-auth user the web config's middleware admitted (exporter.webconfig).
AUTHENTICATED_USER: Any
try:
    from aiohttp.web import RequestKey

    AUTHENTICATED_USER = RequestKey("authenticated_user", str)
except ImportError:  # aiohttp < 3.12 has plain string keys only
    AUTHENTICATED_USER = "cann_exporter.authenticated_user"
