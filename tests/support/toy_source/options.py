"""`toy.*`: which file holds the reading, and how often it is read."""

from __future__ import annotations

from dataclasses import dataclass

from exporter.core.options import option, optional_text, parse_duration
from exporter.core.registration import Section


@dataclass(frozen=True)
class ToyOptions:
    path: str | None = option(None, optional_text, "file holding one number (unset: the toy source is off)", metavar="PATH")
    interval: float = option("5s", parse_duration, "how often the file is read", metavar="DURATION", serve_only=True)


TOY_OPTIONS = Section("toy", ToyOptions)
