"""HTTP: the aiohttp app (app.py) and the exporter-toolkit web config (--web.config.file):
config.py parses it (pure), tls.py builds the SSL context, auth.py checks basic auth,
security.py holds the config in force and reloads it, middleware.py wires it into aiohttp,
collector.py renders its outcomes and the listener's. server.py runs the app for `serve`
behind guard.py (accept loop, deadlines, TLS handshakes), limits.py's connection caps and
bodies.py's budget of request bodies, with fds.py fitting the open-file limit. options.py holds `listen` and `web.*`."""
