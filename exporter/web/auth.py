"""Basic auth against the web config's bcrypt hashes, with a cache of verified credentials."""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
import threading
from collections.abc import Callable
from typing import Any

import bcrypt

AUTH_CACHE_SECONDS = 120.0   # a verified credential skips bcrypt this long: scrapes stay cheap
AUTH_CACHE_SIZE = 256
_BCRYPT_MAX_BYTES = 72       # bcrypt reads no further; Go truncates silently, and so do we

# request[...] key: the basic-auth user the middleware admitted (handlers with their own
# bearer token accept such a request without one).
AUTHENTICATED_USER: Any
try:
    from aiohttp.web import RequestKey

    AUTHENTICATED_USER = RequestKey("authenticated_user", str)
except ImportError:  # aiohttp < 3.12 has plain string keys only
    AUTHENTICATED_USER = "cann_exporter.authenticated_user"

def parse_basic(header: str | None) -> tuple[bytes, bytes] | None:
    """(user, password) bytes from an `Authorization: Basic ...` header, or None."""
    if not header:
        return None
    scheme, _, encoded = header.strip().partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        decoded = base64.b64decode(encoded.strip(), validate=True)
    except (binascii.Error, ValueError):
        return None
    user, sep, password = decoded.partition(b":")
    return (user, password) if sep else None


def checkpw(password: bytes, hashed: bytes) -> bool:
    try:
        return bcrypt.checkpw(password[:_BCRYPT_MAX_BYTES], hashed)
    except ValueError:
        return False


class SuccessCache:
    """Verified credentials, keyed by an HMAC so no password is kept; only successes are
    cached, so every failed guess still costs a full bcrypt."""

    def __init__(self, ttl: float, size: int, clock: Callable[[], float]) -> None:
        self.ttl, self.size, self.clock = ttl, size, clock
        self._secret = secrets.token_bytes(32)
        self._entries: dict[bytes, float] = {}
        self._lock = threading.Lock()

    def key(self, user: bytes, hashed: bytes, password: bytes) -> bytes:
        return hmac.new(self._secret, repr((user, hashed, password)).encode(), hashlib.sha256).digest()

    def hit(self, key: bytes) -> bool:
        with self._lock:
            expires = self._entries.get(key)
            return expires is not None and expires > self.clock()

    def add(self, key: bytes) -> None:
        with self._lock:
            now = self.clock()
            if len(self._entries) >= self.size:
                self._entries = {k: t for k, t in self._entries.items() if t > now}
                while len(self._entries) >= self.size:
                    del self._entries[next(iter(self._entries))]
            self._entries[key] = now + self.ttl

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
