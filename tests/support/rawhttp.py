"""Raw HTTP over asyncio streams, for tests that must see exactly what the server sends."""

from __future__ import annotations

import asyncio

BOUND = 10.0   # seconds any single read may take (generous)


async def closed_by_server(reader: asyncio.StreamReader) -> bytes:
    """What arrives until the server closes (EOF or reset); fails if it never does."""
    received = b""
    try:
        while chunk := await asyncio.wait_for(reader.read(65536), BOUND):
            received += chunk
    except ConnectionResetError:
        pass
    return received
