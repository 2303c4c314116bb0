"""Tokens as a person meets them (issue 24): a browser without the token (or with one from an
earlier start) gets a page that says how to get in, not raw JSON; an API client still gets
JSON; the MCP 401 names the scheme (``WWW-Authenticate: Bearer``) and the token file; ``geode
web`` and ``geode mcp --http`` have distinct default ports, and a taken port is an error before
anything says "serving". Real servers (``geode web``, ``geode mcp --http``) on real ports.
The browser's side (paste the token, land on the queue) is in tests/test_web_browser.py.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.web_helpers import NO_BACKGROUND_BUILD, REPO, Server, make_night, request

HTML = {"Accept": "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"}


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    n = make_night(tmp_path_factory.mktemp("tok"))
    with Server(n.home) as srv:
        yield n, srv


def test_a_browser_without_the_token_gets_a_page_that_says_how_to_get_in(served):
    _n, srv = served
    status, h, body = request(srv, "GET", "/queue", auth=False, headers=HTML)
    page = body.decode()
    assert status == 401 and h["content-type"].startswith("text/html"), (status, h, page[:200])
    assert "geode web needs its token" in page and f"http://127.0.0.1:{srv.port}/?token=" in page, page
    assert '<form method="get" action="/queue"' in page and 'name="token"' in page, page
    assert "<script" not in page and "style-src 'sha256-" in h["content-security-policy"], h
    assert srv.token not in page
    # an API client (and a page's own fetch) still gets JSON
    for hdrs in ({"Accept": "application/json"}, {}, HTML):
        path = "/api/status" if hdrs is HTML else "/queue"
        status, h, body = request(srv, "GET", path, auth=False, headers=hdrs)
        assert status == 401 and h["content-type"] == "application/json", (path, hdrs, h)
        assert "token is needed" in json.loads(body)["error"]


def test_a_stale_cookie_after_a_restart_is_said_as_such_and_a_wrong_paste_too(served):
    _n, srv = served
    stale = {**HTML, "Cookie": f"geode_token_{srv.port}=from-an-earlier-start"}
    status, _h, body = request(srv, "GET", "/", auth=False, headers=stale)
    assert status == 401 and b"from an earlier start" in body, body[:300]
    status, h, body = request(srv, "GET", "/queue?token=nope", auth=False, headers=HTML)
    assert status == 403 and b"not this server's" in body and "set-cookie" not in h, body[:300]


def test_the_pasted_url_or_token_sets_the_cookie_and_leaves_the_address(served):
    _n, srv = served
    from urllib.parse import quote

    for pasted in (srv.token, f" {srv.url} "):
        status, h, _b = request(srv, "GET", f"/queue?token={quote(pasted, safe='')}", auth=False, headers=HTML)
        assert status == 303 and h["location"] == "/queue", (pasted, status, h)
        assert h["set-cookie"].startswith(f"geode_token_{srv.port}={srv.token};"), h
        cookie = {"Cookie": h["set-cookie"].split(";", 1)[0]}
        status, _h, body = request(srv, "GET", "/queue", auth=False, headers={**HTML, **cookie})
        assert status == 200 and b"token-page" not in body


def _mcp(home: Path, *args: str, env: dict | None = None) -> subprocess.Popen:
    e = {k: v for k, v in os.environ.items() if not k.startswith("GEODE_")} | NO_BACKGROUND_BUILD
    e.update({"PYTHONPATH": str(REPO)}, **(env or {}))
    argv = [sys.executable, "-m", "geode", "mcp", "--home", str(home), "--no-background", "--no-warm", *args]
    return subprocess.Popen(argv, env=e, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=str(home))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_the_mcp_401_carries_www_authenticate_and_names_the_token_file(served):
    import http.client

    home = Path(served[0].home)
    port = _free_port()
    proc = _mcp(home, "--http", str(port))
    try:
        deadline = time.time() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                assert proc.poll() is None and time.time() < deadline, proc.stderr.read() if proc.poll() else "no port"
                time.sleep(0.1)
        for auth, error in ((None, False), ("Bearer wrong", True)):
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            hs = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
            c.request("POST", "/mcp", body=b"{}", headers=hs | ({"Authorization": auth} if auth else {}))
            r = c.getresponse()
            body = json.loads(r.read())
            c.close()
            assert r.status == 401
            challenge = r.getheader("www-authenticate") or ""
            assert challenge.startswith("Bearer ") and ('error="invalid_token"' in challenge) == error, challenge
            assert str(home / "mcp-token") in body["error"], body
    finally:
        proc.terminate()
        proc.wait(15)


def _hold(port: int) -> socket.socket | None:
    """A listening socket on 127.0.0.1:port, or None when something else holds it already."""
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", port))
    except OSError:
        s.close()
        return None
    s.listen(1)
    return s


@pytest.mark.parametrize("which", ["mcp", "web"])
def test_a_taken_port_is_an_error_before_serving(served, which):
    home = Path(served[0].home)
    held = _hold(port := _free_port())
    try:
        if which == "mcp":
            proc = _mcp(home, "--http", str(port))
        else:
            e = {k: v for k, v in os.environ.items() if not k.startswith("GEODE_")} | NO_BACKGROUND_BUILD
            e.update({"PYTHONPATH": str(REPO), "GEODE_HOME": str(home)})
            argv = [sys.executable, "-m", "geode", "web", "--port", str(port), "--no-open"]
            proc = subprocess.Popen(argv, env=e, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        out, err = proc.communicate(timeout=120)
    finally:
        if held:
            held.close()
    assert proc.returncode not in (0, None), (out, err)
    assert f"port {port} on 127.0.0.1 is taken" in err, err
    assert "serving" not in out + err and "http://" not in out + err and "Traceback" not in err, (out, err)


def test_mcp_http_without_a_port_takes_its_own_default_not_the_pages(served):
    """``--http`` alone means 8766 (geode web's is 8765): held here, so the run says it is taken."""
    home = Path(served[0].home)
    held = _hold(8766)  # None: something else holds it, which says the same
    try:
        proc = _mcp(home, "--http")
        _out, err = proc.communicate(timeout=120)
    finally:
        if held:
            held.close()
    assert proc.returncode != 0 and "--http 8766: port 8766 on 127.0.0.1 is taken" in err, err
    from geode.web.command import DEFAULT_PORT, MCP_PORT

    assert (DEFAULT_PORT, MCP_PORT) == (8765, 8766)
