"""``geode web``'s guard against the attacks Jupyter's advisories describe, on a real server
process: no token, a foreign Host (DNS rebinding), a cross-site POST, a GET that would change
something, a path that would leave the store; and a non-loopback bind without the flag.

Raw requests through ``http.client`` so that every header (Host included) is exactly what the
test says.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sqlite3
import subprocess
import sys
from pathlib import Path
from urllib.parse import quote

import pytest

from tests.web_helpers import REPO, Server, make_night, request, snapshot

GET_ROUTES = [
    "/queue",
    "/history",
    "/store",
    "/store?q=pipeline&mode=text",
    "/health",
    "/note?a=geode%3A%2F%2Fmain%2Fnotes%2Fexit-code",
    "/proposals/{fix}",
    "/api/status",
    "/api/proposals",
    "/api/proposals/{fix}",
    "/api/actions",
    "/api/nights",
    "/api/search?q=pipeline&mode=text",
    "/api/notes/main/notes/exit-code",
    "/api/context/geode:%2F%2Fmain%2Fnotes%2Fexit-code",
    "/api/recent",
    "/api/stats",
    "/api/study",
    "/api/bulk?action=approve&agent=cleaner",
    "/static/app.js",
]
SECRET_WORDS = [b"Repair the link", b"pipeline's exit status", b"Archive old-retry", b"night-2026-03-14"]


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    n = make_night(tmp_path_factory.mktemp("web"))
    with Server(n.home) as srv:
        yield n, srv


def routes(n) -> list[str]:
    return [r.replace("{fix}", str(n.ids["fix-index"])) for r in GET_ROUTES]


def records(home: Path) -> dict:
    """Every row of the records that cannot be rebuilt (queue, ledger, runs, findings)."""
    con = sqlite3.connect(home / "geode.db")
    try:
        return {
            t: con.execute(f"SELECT * FROM {t} ORDER BY id").fetchall()
            for t in (
                "proposal",
                "proposal_change",
                "proposal_action",
                "proposal_journal",
                "ledger_event",
                "upkeep_run",
                "finding",
            )
        }
    finally:
        con.close()


def test_every_route_answers_with_the_token(served):
    n, srv = served
    for path in routes(n):
        status, headers, body = request(srv, "GET", path)
        assert status == 200, (path, status, body[:300])
        assert "content-security-policy" in headers and "script-src 'self'" in headers["content-security-policy"]
        assert headers.get("x-content-type-options") == "nosniff"


def test_no_token_no_data(served):
    n, srv = served
    for path in routes(n):
        for hdrs in (
            {},
            {"Authorization": "Bearer wrong"},
            {"Cookie": f"geode_token_{srv.port}=wrong"},
            {"Cookie": f"geode_token_{srv.port + 1}={srv.token}"},
        ):
            status, _h, body = request(srv, "GET", path, auth=False, headers=hdrs)
            assert status in (401, 403), (path, hdrs, status)
            assert not any(w in body for w in SECRET_WORDS), (path, body[:200])
            assert b"error" in body
    # a wrong token in the URL is refused too, and sets no cookie
    status, headers, _b = request(srv, "GET", "/queue?token=nope", auth=False)
    assert status == 403 and "set-cookie" not in headers


def test_the_url_token_becomes_a_cookie_and_leaves_the_url(served):
    n, srv = served
    status, headers, _b = request(srv, "GET", f"/queue?agent=cleaner&token={srv.token}", auth=False)
    assert status == 303 and headers["location"] == "/queue?agent=cleaner"
    cookie = headers["set-cookie"]
    assert cookie.startswith(f"geode_token_{srv.port}={srv.token};")
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
    status, _h, body = request(
        srv, "GET", "/queue?agent=cleaner", auth=False, headers={"Cookie": f"geode_token_{srv.port}={srv.token}"}
    )
    assert status == 200 and b"Archive old-retry" in body and b"Repair the link" not in body


def test_a_foreign_host_is_refused_even_with_the_token(served):
    n, srv = served
    for host in (
        "evil.example",
        f"evil.example:{srv.port}",
        f"127.0.0.1:{srv.port + 1}",
        f"localhost.evil:{srv.port}",
        f"127.0.0.1.nip.io:{srv.port}",
        f"[::2]:{srv.port}",
        f"127.0.0.1:{srv.port}x",
        "",
    ):
        status, _h, body = request(srv, "GET", "/api/proposals", host=host)
        # no Host at all is malformed HTTP/1.1: the server may refuse it before the guard does
        assert status == 403 or (host == "" and status == 400), (host, status)
        assert not any(w in body for w in SECRET_WORDS)
        if status == 403:
            assert b"Host" in body
    for host in (f"localhost:{srv.port}", f"127.0.0.1:{srv.port}", "localhost", f"LOCALHOST:{srv.port}"):
        status, _h, _b = request(srv, "GET", "/api/proposals", host=host)
        assert status == 200, host


def test_cross_origin_posts_are_refused_and_change_nothing(served):
    n, srv = served
    pid = n.ids["fix-deploy"]
    cookie = {"Cookie": f"geode_token_{srv.port}={srv.token}"}
    _s, _h, page = request(srv, "GET", "/queue")
    token = re.search(rb'name="geode-csrf" content="([0-9a-f]+)"', page).group(1).decode()
    me = f"http://127.0.0.1:{srv.port}"
    before_files, before_rows = snapshot(n.store), records(n.home)
    refused = [
        ({**cookie, "Origin": "http://evil.example", "X-Geode-CSRF": token}, "cross-origin"),
        ({**cookie, "Origin": f"http://127.0.0.1:{srv.port + 1}", "X-Geode-CSRF": token}, "cross-origin"),
        ({**cookie, "Referer": "http://evil.example/page", "X-Geode-CSRF": token}, "Referer"),
        ({**cookie, "Origin": me}, "CSRF"),  # no CSRF token
        ({**cookie, "Origin": me, "X-Geode-CSRF": "0" * 64}, "CSRF"),  # a wrong one
        ({**cookie, "X-Geode-CSRF": token}, "Origin or Referer"),  # says nowhere it comes from
    ]
    for hdrs, why in refused:
        for path, body in (
            (f"/api/proposals/{pid}/approve", {}),
            ("/api/bulk", {"action": "reject", "filter": {"agent": "librarian"}, "ids": [n.ids["fix-index"], pid]}),
        ):
            status, _h, out = request(srv, "POST", path, body=body, auth=False, headers=hdrs)
            assert status == 403 and why.encode() in out, (hdrs, path, status, out)
    # the bearer token does not excuse a foreign Origin
    status, _h, _o = request(
        srv, "POST", f"/api/proposals/{pid}/approve", body={}, headers={"Origin": "http://evil.example"}
    )
    assert status == 403
    # only POST changes anything: other methods are refused before any route runs
    for method in ("PUT", "DELETE", "PATCH"):
        status, _h, _o = request(srv, method, f"/api/proposals/{pid}/approve", body={})
        assert status == 405
    assert snapshot(n.store) == before_files and records(n.home) == before_rows
    # the positive control: the same request from the page itself goes through
    status, _h, out = request(
        srv,
        "POST",
        f"/api/proposals/{pid}/reject",
        body={"reason": "control"},
        auth=False,
        headers={**cookie, "Origin": me, "X-Geode-CSRF": token},
    )
    assert status == 200 and json.loads(out)["status"] == "rejected"
    assert records(n.home)["proposal_action"][-1][2:5] == ("reject", "rejected", "Ada Reviewer")


def test_a_get_never_changes_anything(served):
    n, srv = served
    before_files, before_rows = snapshot(n.store), records(n.home)
    pid = n.ids["pipefail-stable"]
    gets = routes(n) + [
        f"/api/proposals/{pid}/approve",
        f"/api/proposals/{pid}/undo",
        "/api/doctor",
        f"/api/proposals/{pid}/approve?token={srv.token}",
        "/queue?agent=corrector&action=approve",
    ]
    for path in gets:
        status, _h, _b = request(srv, "GET", path)
        assert status in (200, 405), (path, status)
        status, _h, _b = request(srv, "HEAD", path)
        assert status in (200, 405), (path, status)
    assert request(srv, "GET", f"/api/proposals/{pid}/approve")[0] == 405
    assert snapshot(n.store) == before_files
    assert records(n.home) == before_rows


def test_path_parameters_cannot_leave_the_store(served, tmp_path):
    n, srv = served
    secret = tmp_path / "secret.md"
    secret.write_text("---\nname: secret\n---\nTOP-SECRET-OUTSIDE\n", encoding="utf-8")
    (n.store / "sneaky.md").symlink_to(secret)
    (n.store / "linked").symlink_to(tmp_path, target_is_directory=True)
    outside = [
        "/api/notes/..%2F..%2Fsecret",
        "/api/notes/../../secret.md",
        "/api/notes/main/..%2F..%2Fsecret",
        f"/api/notes/{quote(str(secret), safe='')}",
        "/api/notes/main/sneaky",
        "/api/notes/main/linked/secret",
        "/api/notes/geode:%2F%2Fmain%2F..%2F..%2Fhome%2Fgeode.toml",
        "/api/notes/main:%2Fetc%2Fpasswd",
        "/api/context/..%2F..%2Fsecret",
        "/api/context/main/sneaky",
        f"/api/context/{quote(str(secret), safe='')}",
        "/note?a=..%2F..%2Fsecret",
        "/note?a=main%3Asneaky",
        f"/note?a={quote(str(secret), safe='')}",
        "/api/notes/nowhere:%2Fetc%2Fpasswd",
        "/api/notes/%00",
        "/static/../geode.toml",
        "/static/%2e%2e/app.py",
        "/static/..%2f..%2fgeode.toml",
        "/static/vendor/..%2F..%2Fapp.py",
        "/api/proposals/..%2F1",
        "/proposals/1%2F..%2F2",
    ]
    for path in outside:
        status, _h, body = request(srv, "GET", path)
        assert status in (400, 404), (path, status, body[:200])
        assert b"TOP-SECRET" not in body and b"[domains]" not in body and b"def create_app" not in body
    # the files named are the store's own: a search of the whole store never finds the secret
    status, _h, body = request(srv, "GET", "/api/search?q=TOP-SECRET-OUTSIDE&mode=text")
    assert status == 200 and json.loads(body)["results"] == []
    status, _h, body = request(srv, "GET", "/api/search?mode=text&per_page=200&domain=main")
    hits = json.loads(body)["results"]
    assert len(hits) == 8 and not [h for h in hits if "sneaky" in h["path"] or "linked" in h["path"]]


def test_markup_in_a_note_is_text(served):
    n, srv = served
    status, _h, body = request(srv, "GET", "/note?a=main%3Aevil")
    assert status == 200
    assert b"<script>document" not in body and b"&lt;script&gt;document.title" in body
    assert b"<img src=x" not in body


def test_the_vendored_graph_library_is_the_one_recorded():
    vend = REPO / "geode" / "web" / "static" / "vendor"
    table = (vend / "VENDORED.md").read_text(encoding="utf-8")
    for name, licence in (("cytoscape.min.js", "cytoscape.LICENSE"), ("chart.umd.min.js", "chart.LICENSE")):
        recorded = re.search(rf"`{re.escape(name)}`.*`([0-9a-f]{{64}})`", table).group(1)
        assert hashlib.sha256((vend / name).read_bytes()).hexdigest() == recorded, name
        assert "Copyright" in (vend / licence).read_text(encoding="utf-8")[:200], licence


def _geode_web(home: Path, *args: str, timeout: float = 30) -> subprocess.CompletedProcess:
    e = {k: v for k, v in os.environ.items() if not k.startswith("GEODE_")}
    e.update({"GEODE_HOME": str(home), "PYTHONPATH": str(REPO)})
    return subprocess.run(
        [sys.executable, "-m", "geode", "web", "--no-open", *args],
        capture_output=True,
        text=True,
        env=e,
        timeout=timeout,
    )


def test_a_non_loopback_bind_needs_the_flag_and_warns(served):
    n, _srv = served
    r = _geode_web(n.home, "--host", "0.0.0.0", "--port", "0")
    assert r.returncode == 2 and "--allow-remote" in r.stderr and "http://" not in r.stdout
    srv = Server(n.home, "--host", "0.0.0.0", "--allow-remote")
    try:
        assert srv.url.startswith("http://127.0.0.1:")
        status, _h, _b = request(srv, "GET", "/api/status")
        assert status == 200
        status, _h, _b = request(srv, "GET", "/api/status", host=f"evil.example:{srv.port}")
        assert status == 403  # the Host check holds on a wildcard bind too
    finally:
        err = srv.stop()
    assert "warning: serving on 0.0.0.0" in err and "plain HTTP" in err
