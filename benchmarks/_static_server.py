"""`python -m benchmarks._static_server MANIFEST PORT`: the static-bytes floor.

A bare aiohttp app (defaults, no access log, no middleware) on 127.0.0.1:PORT that answers
GET /metrics with bytes held in memory: the body captured from the exporter for the request's
(Accept, Accept-Encoding) pair, with the captured response headers (aiohttp adds Date, Server
and Content-Length as it does for the exporter). Nothing is encoded or compressed per request,
so what a scrape of it costs is HTTP over loopback and aiohttp's request handling: the floor
an exporter serving pre-encoded bytes can approach. GET /healthz answers "ok" (readiness).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from aiohttp import web

HOST = "127.0.0.1"


def app_for(manifest: dict) -> web.Application:
    bodies: dict[tuple[str, str], tuple[bytes, dict[str, str]]] = {}
    for entry in manifest["bodies"]:
        bodies[(entry["accept"], entry["accept_encoding"])] = (Path(entry["body_file"]).read_bytes(), dict(entry["headers"]))

    async def metrics(request: web.Request) -> web.Response:
        found = bodies.get((request.headers.get("Accept", ""), request.headers.get("Accept-Encoding", "")))
        if found is None:
            return web.Response(status=404, text="no body captured for these request headers\n")
        body, headers = found
        return web.Response(body=body, headers=headers)

    async def healthz(request: web.Request) -> web.Response:
        return web.Response(text="ok\n")

    app = web.Application()
    app.router.add_get("/metrics", metrics)
    app.router.add_get("/healthz", healthz)
    return app


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m benchmarks._static_server MANIFEST PORT", file=sys.stderr)
        return 2
    manifest = json.loads(Path(argv[0]).read_text(encoding="utf-8"))
    web.run_app(app_for(manifest), host=HOST, port=int(argv[1]), access_log=None, print=None)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
