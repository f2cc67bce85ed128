"""aiohttp wiring of the web config: basic auth (and client_allowed_sans) on every route but the
exempt ones, and the configured response headers."""

from __future__ import annotations

import ipaddress
from collections.abc import Awaitable, Callable

from aiohttp import web
from aiohttp.typedefs import Middleware

from exporter.web.auth import AUTHENTICATED_USER
from exporter.web.security import Verdict, WebSecurity


def _peer_sans(request: web.Request) -> set[str]:
    transport = request.transport
    cert = transport.get_extra_info("peercert") if transport is not None else None
    out = set()
    for kind, value in (cert or {}).get("subjectAltName", ()):
        if kind == "IP Address":
            try:
                value = str(ipaddress.ip_address(value.strip()))  # Go prints IPs compressed
            except ValueError:
                pass
        out.add(value)
    return out


def _allowed_san(request: web.Request, allowed: tuple[str, ...]) -> bool:
    wanted = set()
    for value in allowed:
        try:
            wanted.add(str(ipaddress.ip_address(value)))
        except ValueError:
            wanted.add(value)
    return bool(_peer_sans(request) & wanted)


# Refusals that are not a 401: (status, reason on the API, message).
_REFUSALS = {
    "throttled": (429, "throttled", "too many failed logins from this address; retry later"),
    "overloaded": (503, "overloaded", "too many credential checks waiting; retry later"),
}


def _refused(request: web.Request, verdict: Verdict) -> web.Response:
    if verdict.reason not in _REFUSALS:
        return _unauthorized(request)
    status, reason, message = _REFUSALS[verdict.reason]
    headers = {"Retry-After": str(verdict.retry_after or 1)}
    if request.path.startswith("/api/"):
        response = web.json_response({"error": message, "reason": reason}, status=status, headers=headers)
    else:
        response = web.Response(status=status, text=message + "\n", headers=headers)
    # Closed after the answer: a throttled client must connect again, and new connections from
    # one address are rate-limited before they cost a slot (web/limits.py), so a flood of guesses
    # cannot keep the event loop busy answering 429s on one kept-alive connection.
    response.force_close()
    return response


def _unauthorized(request: web.Request) -> web.Response:
    headers = {"WWW-Authenticate": 'Basic realm="cann-exporter", charset="UTF-8"'}
    if request.path.startswith("/api/"):
        return web.json_response(
            {"error": "missing or wrong credentials (basic auth)", "reason": "unauthorized"}, status=401, headers=headers
        )
    return web.Response(status=401, text="Unauthorized\n", headers=headers)


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def middleware(security: WebSecurity, bearer_paths: frozenset[str] = frozenset()) -> Middleware:
    """Basic auth (and client_allowed_sans) for every path but the exempt ones.

    ``bearer_paths``: routes whose handler checks a bearer token of its own; a request there
    that carries a bearer token goes straight to the handler.
    """

    @web.middleware
    async def web_auth(request: web.Request, handler: Handler) -> web.StreamResponse:
        config = security.state.config
        sans = config.tls.client_allowed_sans if config.tls else None
        if sans is not None and not _allowed_san(request, sans):
            security.count_failure("client_san")
            return web.Response(status=403, text="client certificate not allowed\n")
        if not config.users or request.path in security.exempt_paths:
            return await handler(request)
        header = request.headers.get("Authorization")
        if request.path in bearer_paths and (header or "").lower().startswith("bearer "):
            return await handler(request)  # the handler checks its own token, in constant time
        verdict = await security.authenticate(header, request.remote)  # counts its refusals
        if verdict.user is None:
            return _refused(request, verdict)
        request[AUTHENTICATED_USER] = verdict.user
        return await handler(request)

    return web_auth


def install(app: web.Application, security: WebSecurity, bearer_paths: frozenset[str] = frozenset()) -> None:
    """Auth middleware and the configured response headers on ``app``."""
    app.middlewares.append(middleware(security, bearer_paths))

    async def add_headers(request: web.Request, response: web.StreamResponse) -> None:
        for name, value in security.state.config.headers.items():
            response.headers.setdefault(name, value)

    app.on_response_prepare.append(add_headers)
