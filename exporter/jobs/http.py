"""The ingest API: `POST /api/v1/steps` (authenticate, bound the body, validate, fold into the
store), `POST /api/v1/profiles` (the same, for the summary of one profiling window, held in
the profiles' posted store) and its OpenAPI document (openapi.yaml beside this file, served
at /api/v1/openapi.yaml).

Every rejection is a JSON `{"error": message, "reason": reason}` with a 4xx status and is
counted by reason; a rejected batch changes nothing else.
"""

from __future__ import annotations

import hmac
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from aiohttp import web

from exporter.jobs.admission import client_key
from exporter.jobs.store import IngestStore
from exporter.jobs.validate import IngestError, parse_batch
from exporter.jobs.validate_profile import parse_profile
from exporter.profiles.posted import PostedProfiles
from exporter.web.auth import AUTHENTICATED_USER

OPENAPI_PATH = Path(__file__).with_name("openapi.yaml")
STEPS_PATH = "/api/v1/steps"
PROFILES_PATH = "/api/v1/profiles"

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def check_token(header: str | None, token: str | None) -> None:
    if token is None:
        return
    scheme, _, given = (header or "").partition(" ")
    if scheme.lower() != "bearer" or not hmac.compare_digest(given.strip().encode(), token.encode()):
        raise IngestError(401, "unauthorized", "missing or wrong bearer token (Authorization: Bearer <ingest.token>)")


def check_content_type(content_type: str) -> None:
    if content_type != "application/json":
        raise IngestError(415, "content_type", f"Content-Type must be application/json, got {content_type or 'none'!r}")


async def read_bounded(request: web.Request, limit: int) -> bytes:
    """The body, or 413 as soon as it is known to exceed ``limit`` (Content-Length or streamed)."""
    too_large = IngestError(413, "too_large", f"body exceeds {limit} bytes (ingest.max_body_bytes); send smaller batches")
    if request.content_length is not None and request.content_length > limit:
        raise too_large
    chunks, size = [], 0
    async for chunk in request.content.iter_any():
        size += len(chunk)
        if size > limit:
            raise too_large
        chunks.append(chunk)
    return b"".join(chunks)


def error_response(exc: IngestError) -> web.Response:
    headers = {"WWW-Authenticate": 'Bearer realm="cann-exporter"'} if exc.status == 401 else None
    return web.json_response({"error": exc.message, "reason": exc.reason}, status=exc.status, headers=headers)


def steps_handler(store: IngestStore, token: str | None, clock: Callable[[], float] = time.time) -> Handler:
    async def post_steps(request: web.Request) -> web.Response:
        try:
            if request.get(AUTHENTICATED_USER) is None:  # basic auth (web config) stands in for the token
                check_token(request.headers.get("Authorization"), token)
            check_content_type(request.content_type)
            body = await read_bounded(request, store.limits.max_body_bytes)
            # From here on nothing awaits: validation and the store update are one step.
            batch = parse_batch(body, store.limits, clock())
            # per-client limits; the connection tells a holder that died from a live one (liveness.py)
            accepted = store.accept(batch, request.remote, request.transport)
        except IngestError as exc:
            store.reject(exc.reason)
            return error_response(exc)
        reply: dict[str, object] = {"accepted": accepted}
        if batch.unknown_phases:  # the hook logs each name once: nothing vanishes silently
            reply["unknown_phases"] = dict(batch.unknown_phases)
        return web.json_response(reply)

    return post_steps


def profiles_handler(
    store: IngestStore,
    posted: PostedProfiles,
    token: str | None,
    on_accept: Callable[[], None] = lambda: None,
    clock: Callable[[], float] = time.time,
) -> Handler:
    """``on_accept``: publish now, so the summary is on /metrics at the next scrape."""

    async def post_profiles(request: web.Request) -> web.Response:
        try:
            if request.get(AUTHENTICATED_USER) is None:
                check_token(request.headers.get("Authorization"), token)
            check_content_type(request.content_type)
            body = await read_bounded(request, store.limits.max_body_bytes)
            # From here on nothing awaits: validation and the store update are one step.
            profile = parse_profile(body, store.limits, clock())
            evicted = posted.evicted_jobs
            refusal = posted.offer(profile.summary, client_key(request.remote))
            if refusal is not None:
                raise IngestError(429, refusal, f"no room for job {profile.summary.job_name!r} rank {profile.summary.rank} ({refusal})")
        except IngestError as exc:
            store.reject_profile(exc.reason)
            return error_response(exc)
        store.count_profile(profile.skipped, posted.evicted_jobs - evicted)
        on_accept()
        return web.json_response({"accepted": 1})

    return post_profiles


def openapi_handler() -> Handler:
    """Serves the API's OpenAPI document (read once, at startup)."""
    text = OPENAPI_PATH.read_text(encoding="utf-8")

    async def openapi(request: web.Request) -> web.Response:
        return web.Response(text=text, content_type="application/yaml")

    return openapi


def routes(
    store: IngestStore, token: str | None, posted: PostedProfiles | None = None, on_profile: Callable[[], None] = lambda: None
) -> list[web.RouteDef]:
    """The ingest API's routes; ``token``: the bearer token hooks must send (None: none);
    ``posted``: where profile summaries go (None: no profiles route, the profiles collector is off)."""
    out = [web.post(STEPS_PATH, steps_handler(store, token))]
    if posted is not None:
        out.append(web.post(PROFILES_PATH, profiles_handler(store, posted, token, on_profile)))
    return [*out, web.get("/api/v1/openapi.yaml", openapi_handler())]


def bearer_paths(token: str | None) -> frozenset[str]:
    """The routes whose handler checks the bearer token itself: with a web config's basic auth
    in force, hooks may keep sending their token there."""
    return frozenset({STEPS_PATH, PROFILES_PATH}) if token is not None else frozenset()
