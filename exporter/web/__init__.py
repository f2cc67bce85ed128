"""HTTP: the aiohttp app (app.py), /metrics reading the latest (snapshot, bodies) pair it is
handed (scrape.py), and the exporter-toolkit web config (--web.config.file):
config.py parses it (pure), tls.py builds the SSL context, auth.py checks basic auth,
security.py holds the config in force and reloads it, middleware.py wires it into aiohttp,
collector.py renders its outcomes and the listener's. server.py runs the app for `serve`
behind guard.py (the listener: accept loop, EMFILE backoff, deadlines; handler.py: aiohttp's
per-connection handler and malformed requests; tls.py: the TLS handshake gate), limits.py's connection caps and
bodies.py's budget of request bodies, with fds.py fitting the open-file limit. options.py holds `listen` and `web.*`."""
