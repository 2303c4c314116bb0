"""The page a browser gets from ``geode web`` when it arrives without the token, or with one
from an earlier start (a new token every start: an open tab or a bookmark goes stale).

Raw JSON (``{"error": "a token is needed"}``) told a person nothing about where the token is or
what to do with it; an API client still gets that JSON (``Accept: application/json``, or no
``text/html`` in Accept). The page says where the URL with the token is printed and offers a
form to paste the token (or the whole URL): the form sends it as ``?token=``, which the guard
turns into the cookie and drops from the address, as it does for the printed URL. The page's
one inline style is allowed by its hash in this response's own Content-Security-Policy (no
script at all; the stylesheet under ``/static/`` is behind the token too).
"""

from __future__ import annotations

import base64
import hashlib
from html import escape

STYLE = (
    "body{font:16px/1.5 system-ui,sans-serif;max-width:40rem;margin:3rem auto;padding:0 1rem;color:#222}"
    "code{background:#f2f2f2;padding:0 .25em;word-break:break-all}"
    "form{display:flex;gap:.5rem;flex-wrap:wrap;margin:1.5rem 0}"
    "input{flex:1 1 16rem;min-width:0;font:inherit;padding:.4rem}button{font:inherit;padding:.4rem 1rem}"
    ".why{color:#8a1c1c}"
)
STYLE_HASH = base64.b64encode(hashlib.sha256(STYLE.encode()).digest()).decode()
CSP = (
    f"default-src 'none'; style-src 'sha256-{STYLE_HASH}'; img-src 'self' data:; base-uri 'none'; "
    "form-action 'self'; frame-ancestors 'none'"
)


def wants_html(accept: str, path: str) -> bool:
    """A browser's navigation (Accept names text/html) to a page, not a client of ``/api/``."""
    return not path.startswith("/api/") and "text/html" in accept.lower()


def token_page(port: int, path: str, reason: str) -> bytes:
    """The HTML: why the request was refused (``reason``: ``none``, ``stale`` or ``wrong``),
    where the URL is printed, and the form that pastes the token."""
    why = {
        "none": "This page needs the token that <code>geode web</code> printed when it started.",
        "stale": "The token this browser kept is from an earlier start of <code>geode web</code>: "
        "every start makes a new one, so a tab or a bookmark from before a restart no longer opens the page.",
        "wrong": "That token is not this server's. Every start of <code>geode web</code> makes a new one.",
    }[reason]
    action = escape(path if path.startswith("/") else "/", quote=True)
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>geode web: the token</title><style>{STYLE}</style></head>
<body><main id="token-page">
<h1>geode web needs its token</h1>
<p class="why">{why}</p>
<p>Where it is: the terminal where <code>geode web</code> runs printed a line
<code>geode web: serving … on http://127.0.0.1:{port}/?token=…</code>. Open that URL, or paste the token
(or the whole URL) here; this browser then keeps it in a cookie for this server until it restarts.</p>
<form method="get" action="{action}" id="token-form">
<label for="token" hidden>token</label>
<input id="token" name="token" autocomplete="off" spellcheck="false" placeholder="the token, or the URL geode web printed" required>
<button type="submit">Open the page</button>
</form>
<p>Not running? Start it with <code>geode web</code> (it prints the URL and opens it).
Scripts send <code>Authorization: Bearer TOKEN</code> instead.</p>
</main></body></html>
""".encode()


def token_from_paste(value: str) -> str:
    """The token out of what a person pasted: the token itself, or the whole printed URL."""
    from urllib.parse import parse_qsl, urlsplit

    v = value.strip()
    if "token=" in v:
        for k, t in parse_qsl(urlsplit(v).query or v.split("?", 1)[-1], keep_blank_values=True):
            if k == "token":
                return t.strip()
    return v
