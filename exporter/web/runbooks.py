"""`/runbooks`: the alert runbooks (docs/runbooks.md, packaged beside this module as
runbooks.md) as one HTML page, each section's anchor the one GitHub gives it
(`#npulowutilization`), so an alert's runbook_url opens from the exporter itself with nothing
published anywhere. Rendered once, at first request (markdown-it-py, CommonMark with tables)."""

from __future__ import annotations

import re
from functools import lru_cache
from importlib import resources

from aiohttp import web
from markdown_it import MarkdownIt

PATH = "/runbooks"
_NOT_IN_ANCHOR = re.compile(r"[^\w\- ]")


def anchor(title: str) -> str:
    """GitHub's heading anchor: lower case, punctuation dropped, spaces to hyphens."""
    return _NOT_IN_ANCHOR.sub("", title.strip().lower()).replace(" ", "-")


def render(markdown: str) -> str:
    md = MarkdownIt("commonmark", {"html": False}).enable("table")  # the file's own text only
    tokens = md.parse(markdown)
    for index, token in enumerate(tokens):
        if token.type == "heading_open":
            token.attrSet("id", anchor(tokens[index + 1].content))
    body = md.renderer.render(tokens, md.options, {})
    return (
        '<!doctype html>\n<html><head><meta charset="utf-8"><title>cann-exporter runbooks</title>'
        "<style>body{max-width:60em;margin:auto;font-family:sans-serif}td,th{border:1px solid #ccc;padding:2px 6px}"
        "table{border-collapse:collapse}pre{background:#f4f4f4;padding:6px}</style></head>\n<body>\n"
        f"{body}</body></html>\n"
    )


@lru_cache(maxsize=1)
def page() -> bytes:
    return render(resources.files("exporter.web").joinpath("runbooks.md").read_text(encoding="utf-8")).encode()


async def runbooks(request: web.Request) -> web.Response:
    return web.Response(body=page(), content_type="text/html", charset="utf-8")
