"""The loopback guard of the page (``geode web``) and of the MCP server's HTTP (``geode mcp
--http``), after Jupyter's advisories: a token on every request, a Host check against
DNS rebinding, POST-only state changes with a CSRF check, and headers that keep the page to
itself.

- **Token.** ``geode web`` makes a fresh random token each start and prints the URL with it.
  The first request with ``?token=`` sets an HttpOnly, SameSite=Strict cookie (named with the
  port: cookies ignore ports, and two servers must not share one) and redirects to the same URL
  without it, so the token does not stay in the address bar or the history. Other tools send
  ``Authorization: Bearer TOKEN``. Without it: 401 and no data; a browser's navigation (Accept
  names text/html, not under ``/api/``) gets the token page instead of JSON, saying where the URL
  is printed and offering a form to paste the token (``geode.services.token_page``).
- **Host.** A request whose ``Host`` is not the bound address or ``localhost`` (with the bound
  port, or none) is refused with 403 before anything else: a DNS-rebinding page at
  ``evil.example`` that resolves to 127.0.0.1 sends ``Host: evil.example``.
- **CSRF.** Only GET and HEAD read, only POST writes (anything else: 405). A POST with an
  ``Origin`` (or, lacking one, a ``Referer``) from anywhere but this server is refused; a POST
  authenticated by the cookie must also carry ``X-Geode-CSRF`` with the page's CSRF token (a
  cross-origin page can set neither header without a CORS preflight, which this server never
  grants), and one with neither Origin nor Referer is refused. A POST with the bearer token is
  not driven by a browser's ambient cookie, so it needs no CSRF token.
- **Headers.** Content-Security-Policy allows only this server's own scripts, styles and
  connections (no inline script, nothing from the network), no framing; ``nosniff``;
  ``Cache-Control: no-store``.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import json
import socket
from http.cookies import CookieError, SimpleCookie
from urllib.parse import parse_qsl, urlencode, urlsplit

from geode.services import token_page

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "font-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
SAFE_METHODS = ("GET", "HEAD")
CSRF_HEADER = "x-geode-csrf"


def csrf_token_for(token: str) -> str:
    """The page's CSRF token, derived from the session token (both change with every start)."""
    return hmac.new(token.encode(), b"geode-web-csrf", hashlib.sha256).hexdigest()


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def allowed_hostnames(bound: str) -> set[str]:
    """The names a Host header may carry: the bound address and localhost; on a wildcard bind
    (``0.0.0.0``, ``::``) also this machine's name and its addresses."""
    names = {"localhost", "127.0.0.1", "::1", bound.strip("[]").lower()}
    if bound in ("0.0.0.0", "::", ""):
        for n in (socket.gethostname(), socket.getfqdn()):
            names.add(n.lower())
            try:
                for info in socket.getaddrinfo(n, None):
                    names.add(str(info[4][0]).lower())
            except OSError:
                pass
    return names


def split_host(value: str) -> tuple[str, int | None]:
    """``host[:port]`` or ``[v6]:port`` -> (host lower-cased without brackets, port or None)."""
    v = value.strip().lower()
    if v.startswith("["):
        end = v.find("]")
        if end == -1:
            return v, None
        host, rest = v[1:end], v[end + 1 :]
        port = rest[1:] if rest.startswith(":") else ""
    else:
        host, _, port = v.partition(":")
    if port:
        if not port.isdigit():
            return host, -1
        return host, int(port)
    return host, None


class Guard:
    """ASGI middleware: every HTTP request passes the Host check, the token and (for a POST)
    the CSRF check before the app sees it; every response gets the security headers."""

    def __init__(self, app, token: str, bound_host: str, port: int):
        self.app = app
        self.token = token
        self.port = port
        self.hosts = allowed_hostnames(bound_host)
        self.cookie = f"geode_token_{port}"
        self.csrf = csrf_token_for(token)

    # -- checks ------------------------------------------------------------------------------
    def host_ok(self, value: str | None) -> bool:
        if not value:
            return False
        host, port = split_host(value)
        return host in self.hosts and port in (None, self.port)

    def origin_ok(self, value: str) -> bool:
        try:
            u = urlsplit(value)
        except ValueError:
            return False
        return u.scheme == "http" and self.host_ok(u.netloc)

    def _token_ok(self, candidate: str | None) -> bool:
        return bool(candidate) and hmac.compare_digest(str(candidate).encode(), self.token.encode())

    # -- ASGI --------------------------------------------------------------------------------
    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        method = scope["method"].upper()
        if not self.host_ok(headers.get("host")):
            return await self._deny(send, 403, "this server answers only to its own address (Host refused)")
        query = parse_qsl(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True)
        url_token = next((v for k, v in query if k == "token"), None)
        if url_token is not None:  # the token page's form takes the token or the whole printed URL
            url_token = token_page.token_from_paste(url_token)
        html = method in SAFE_METHODS and token_page.wants_html(headers.get("accept", ""), scope["path"])
        cookie_token = None
        if "cookie" in headers:
            jar = SimpleCookie()
            try:
                jar.load(headers["cookie"])
            except CookieError:  # a malformed Cookie header: as if none were sent
                jar = SimpleCookie()
            if self.cookie in jar:
                cookie_token = jar[self.cookie].value
        auth = headers.get("authorization", "")
        bearer = auth[7:].strip() if auth[:7].lower() == "bearer " else None

        if url_token is not None:
            if not self._token_ok(url_token):
                if html:
                    return await self._page(send, 403, scope["path"], "wrong")
                return await self._deny(send, 403, "wrong token")
            if method in SAFE_METHODS and not scope["path"].startswith("/api/"):
                rest = urlencode([(k, v) for k, v in query if k != "token"])
                path = scope.get("raw_path") or scope["path"].encode("utf-8")
                location = path.decode("latin-1") + (f"?{rest}" if rest else "")
                return await self._redirect(send, location)
        via_cookie = self._token_ok(cookie_token)
        if not (self._token_ok(bearer) or via_cookie or self._token_ok(url_token)):
            if html:
                return await self._page(send, 401, scope["path"], "stale" if cookie_token else "none")
            return await self._deny(
                send,
                401,
                "a token is needed: open the URL that `geode web` printed, or send Authorization: Bearer TOKEN",
            )
        if method not in SAFE_METHODS:
            if method != "POST":
                return await self._deny(send, 405, f"{method} is not used here: reads are GET, changes are POST")
            origin, referer = headers.get("origin"), headers.get("referer")
            if origin is not None and origin != "null" and not self.origin_ok(origin):
                return await self._deny(send, 403, "cross-origin POST refused")
            if origin in (None, "null") and referer and not self.origin_ok(referer):
                return await self._deny(send, 403, "cross-origin POST refused (Referer)")
            if not self._token_ok(bearer):
                if (origin in (None, "null")) and not referer:
                    return await self._deny(
                        send, 403, "a POST from a browser must say where it comes from (Origin or Referer)"
                    )
                if not hmac.compare_digest(headers.get(CSRF_HEADER, "").encode(), self.csrf.encode()):
                    return await self._deny(send, 403, "CSRF token missing or wrong (reload the page)")
        set_cookie = url_token is not None

        async def send_with_headers(message):
            if message["type"] == "http.response.start":
                hs = list(message.get("headers", []))
                names = {k.lower() for k, _v in hs}
                for k, v in self._headers():
                    if k not in names:
                        hs.append((k, v))
                if set_cookie:
                    hs.append((b"set-cookie", self._cookie_header()))
                message = dict(message, headers=hs)
            await send(message)

        return await self.app(scope, receive, send_with_headers)

    def _headers(self) -> list[tuple[bytes, bytes]]:
        return [
            (b"content-security-policy", CSP.encode()),
            (b"x-content-type-options", b"nosniff"),
            (b"referrer-policy", b"same-origin"),
            (b"x-frame-options", b"DENY"),
            (b"cache-control", b"no-store"),
            (b"cross-origin-opener-policy", b"same-origin"),
            (b"cross-origin-resource-policy", b"same-origin"),
        ]

    def _cookie_header(self) -> bytes:
        return f"{self.cookie}={self.token}; Path=/; HttpOnly; SameSite=Strict".encode()

    async def _redirect(self, send, location: str):
        hs = [
            (b"location", location.encode("latin-1", "replace")),
            (b"content-length", b"0"),
            (b"set-cookie", self._cookie_header()),
        ] + self._headers()
        await send({"type": "http.response.start", "status": 303, "headers": hs})
        await send({"type": "http.response.body", "body": b""})

    async def _page(self, send, status: int, path: str, reason: str):
        """The token page (HTML for a browser), with its own CSP (its one inline style, by hash)."""
        body = token_page.token_page(self.port, path, reason)
        hs = [(b"content-type", b"text/html; charset=utf-8"), (b"content-length", str(len(body)).encode())]
        hs += [(k, token_page.CSP.encode() if k == b"content-security-policy" else v) for k, v in self._headers()]
        await send({"type": "http.response.start", "status": status, "headers": hs})
        await send({"type": "http.response.body", "body": body})

    async def _deny(self, send, status: int, message: str, extra: list[tuple[bytes, bytes]] | None = None):
        body = json.dumps({"error": message}).encode()
        hs = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())] + self._headers()
        hs += extra or []
        await send({"type": "http.response.start", "status": status, "headers": hs})
        await send({"type": "http.response.body", "body": body})
