"""What the web layer reads of the exposition: the body of the latest (snapshot, bodies) pair in
the variant a scrape asks for.

The pair is made below the web layer (node/publisher.py: the sampler publishes a snapshot, an
encoder thread makes the bodies of the variants scraped lately, the pair is swapped in at once);
the web layer only reads it, through this protocol, and never calls back into the making.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class Variant:
    """One form of the body: the exposition format and the content coding."""

    openmetrics: bool = False  # OpenMetrics 1.0.0, else the text format 0.0.4
    gzip: bool = False


class Exposed(Protocol):
    async def body(self, variant: Variant) -> bytes:
        """The latest pair's body in ``variant``: at once when it was made ahead, else made now
        off the event loop (and kept in the pair for the scrapes after)."""
        ...
