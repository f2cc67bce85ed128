"""One keep-alive HTTP connection to the exporter, used only by the sender thread.

Whatever answers at the URL is bounded: each exchange (request, headers, reply) has one total
deadline, ``timeout``, enforced by shutting the socket down, so a server that trickles a byte
at a time cannot hold the sender past it; and a reply longer than :data:`MAX_REPLY_BYTES`
(the exporter's are a few hundred bytes) is refused unread.
"""

from __future__ import annotations

import base64
import encodings.idna  # noqa: F401 - loaded now: a lazy codec import in a thread (or a fork child) can fail (bpo-29288)
import http.client
import socket
import threading
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

STEPS_PATH = "/api/v1/steps"
PROFILES_PATH = "/api/v1/profiles"
MAX_REPLY_BYTES = 64 * 1024


class NotSent(Exception):
    """The request never reached the exporter (refused, no route): safe to send again."""


@dataclass(frozen=True)
class Reply:
    status: int
    body: bytes


def steps_url(base: str, endpoint: str = STEPS_PATH) -> tuple[str, str, int, str]:
    """scheme, host, port and path of the steps (or ``endpoint``) route for a base URL like http://127.0.0.1:9435."""
    parts = urlsplit(base if "://" in base else "http://" + base)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"expected an http(s) URL, got {base!r}")
    port = parts.port or (443 if parts.scheme == "https" else 80)
    path = parts.path.rstrip("/")
    path = path.removesuffix(STEPS_PATH)  # a URL naming the steps route still names the exporter
    return parts.scheme, parts.hostname, port, path + endpoint


def basic_credentials(base: str) -> str | None:
    """`user:password` from a URL's userinfo, or None."""
    parts = urlsplit(base if "://" in base else "http://" + base)
    if parts.username is None:
        return None
    return f"{unquote(parts.username)}:{unquote(parts.password or '')}"


def redacted(base: str) -> str:
    """The URL for log lines: a password in it is replaced by `***`."""
    parts = urlsplit(base if "://" in base else "http://" + base)
    if parts.password is None:
        return base
    return parts._replace(netloc=parts.netloc.replace(":" + parts.password + "@", ":***@", 1)).geturl()


class Transport:
    def __init__(self, url: str, token: str | None, timeout: float, endpoint: str = STEPS_PATH) -> None:
        self.scheme, self.host, self.port, self.path = steps_url(url, endpoint)
        self.timeout = timeout
        self.headers = {"Content-Type": "application/json", "Connection": "keep-alive"}
        if token:
            self.headers["Authorization"] = f"Bearer {token}"
        elif basic := basic_credentials(url):  # https://user:password@host: the exporter's web config users
            self.headers["Authorization"] = "Basic " + base64.b64encode(basic.encode()).decode("ascii")
        self._conn: http.client.HTTPConnection | None = None

    def _connect(self) -> http.client.HTTPConnection:
        cls = http.client.HTTPSConnection if self.scheme == "https" else http.client.HTTPConnection
        conn = cls(self.host, self.port, timeout=self.timeout)
        try:
            conn.connect()
        except OSError as exc:  # refused, unreachable, DNS: nothing was sent
            conn.close()
            raise NotSent(str(exc)) from exc
        return conn

    def post(self, body: bytes) -> Reply:
        """POST ``body``; NotSent when it surely did not arrive, other OSError/HTTPException when unsure."""
        reused = self._conn is not None
        if self._conn is None:
            self._conn = self._connect()
        try:
            return self._exchange(self._conn, body)
        except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError) as exc:
            self.close()
            if not reused:
                raise
            # A kept-alive connection the exporter closed meanwhile (restart, idle timeout):
            # the request did not get through; retry once on a fresh connection.
            self._conn = self._connect()
            try:
                return self._exchange(self._conn, body)
            except Exception:
                self.close()
                raise exc from None
        except Exception:
            self.close()
            raise

    def _exchange(self, conn: http.client.HTTPConnection, body: bytes) -> Reply:
        watchdog = threading.Timer(self.timeout, _cut, (conn,))
        watchdog.daemon = True
        watchdog.start()
        try:
            conn.request("POST", self.path, body=body, headers=self.headers)
            resp = conn.getresponse()
            data = resp.read(MAX_REPLY_BYTES + 1)
        finally:
            watchdog.cancel()
        if len(data) > MAX_REPLY_BYTES:
            self.close()
            raise http.client.HTTPException(f"reply longer than {MAX_REPLY_BYTES} bytes")
        if resp.will_close or not resp.isclosed():  # not read to its end: the connection is spent
            self.close()
        return Reply(resp.status, data)

    def close(self) -> None:
        if self._conn is not None:
            try:
                self._conn.close()
            except OSError:
                pass
            self._conn = None


def _cut(conn: http.client.HTTPConnection) -> None:
    """The exchange's deadline: wake the sender's blocked read with an error."""
    sock = conn.sock
    if sock is not None:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
