"""Requests bounded before the app reads them: the local servers' (``geode web``, ``geode mcp
--http``) outermost ASGI middleware.

Why: a megabyte address or query went whole into a LIKE pattern and an error log, and a body
of any size would be read into memory before anything looked at it (issue 22). Every request is
measured first and refused with a clear error (a JSON object naming what is too long and the
limit) before any token check, parse or query:

- the path: at most ``MAX_PATH_CHARS`` (an address in ``/api/notes/{address}``), else 414;
- the query string: each value at most ``MAX_PARAM_CHARS``, all of it at most
  ``MAX_QUERY_CHARS``, else 414;
- the body: at most ``max_body`` bytes (``Content-Length`` when sent, and counted as it
  arrives), else 413.

The limits are stated in docs/WEB.md and docs/MCP.md.
"""

from __future__ import annotations

import json
from urllib.parse import parse_qsl, unquote

#: an address or a query is tens of characters; these leave room for any real one
MAX_PATH_CHARS = 4096
MAX_PARAM_CHARS = 4096
MAX_QUERY_CHARS = 16_384
#: the page's POST bodies (a decision's reason, a bulk selection) are small
WEB_MAX_BODY = 64 * 1024


class RequestBounds:
    """ASGI middleware: refuses an oversized path, query string or body before ``app`` runs."""

    def __init__(self, app, max_body: int = WEB_MAX_BODY):
        self.app = app
        self.max_body = int(max_body)

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        path = scope.get("path") or ""
        if len(path) > MAX_PATH_CHARS:
            return await _refuse(
                send, 414, f"the path is {len(path):,} characters; at most {MAX_PATH_CHARS:,} are accepted"
            )
        qs = scope.get("query_string", b"") or b""
        if len(qs) > MAX_QUERY_CHARS:
            return await _refuse(
                send, 414, f"the query string is {len(qs):,} bytes; at most {MAX_QUERY_CHARS:,} are accepted"
            )
        for key, value in parse_qsl(qs.decode("latin-1"), keep_blank_values=True):
            if len(value) > MAX_PARAM_CHARS:
                return await _refuse(
                    send,
                    414,
                    f"the parameter {unquote(key)[:40]!r} is {len(value):,} characters; "
                    f"at most {MAX_PARAM_CHARS:,} are accepted",
                )
        headers = dict(scope.get("headers") or [])
        declared = headers.get(b"content-length")
        if declared is not None:
            try:
                size = int(declared)
            except ValueError:
                return await _refuse(send, 400, "the Content-Length header is not a number")
            if size > self.max_body:
                return await _refuse(send, 413, f"the body is {size:,} bytes; at most {self.max_body:,} are accepted")
        seen = 0
        limit = self.max_body
        refused = False

        async def counted():
            nonlocal seen, refused
            msg = await receive()
            if msg["type"] == "http.request":
                seen += len(msg.get("body", b""))
                if seen > limit:  # a body sent without a length, or longer than it said
                    refused = True
                    return {"type": "http.disconnect"}
            return msg

        started = False

        async def watched_send(msg):
            nonlocal started
            if msg["type"] == "http.response.start":
                started = True
            await send(msg)

        await self.app(scope, counted, watched_send)
        if refused and not started:
            await _refuse(send, 413, f"the body is over {limit:,} bytes; at most {limit:,} are accepted")


async def _refuse(send, status: int, message: str) -> None:
    body = json.dumps({"error": message}).encode("utf-8")
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": body})
