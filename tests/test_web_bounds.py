"""``geode web`` refuses an oversized path, query parameter or body before any route reads it
(issue 22, item 9; the limits are stated in docs/WEB.md), on a real server process."""

from __future__ import annotations

from urllib.parse import quote

import pytest

from geode.services.request_bounds import MAX_PARAM_CHARS, WEB_MAX_BODY
from tests.test_web_safety import records
from tests.web_helpers import Server, make_night, request


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    n = make_night(tmp_path_factory.mktemp("webbounds"))
    with Server(n.home) as srv:
        yield n, srv


LONG = "pipeline " * 600  # 5,400 characters: over the limit, under the HTTP parser's own


@pytest.mark.parametrize(
    "path",
    [
        f"/api/search?q={quote(LONG)}&mode=text",
        f"/store?q={quote(LONG)}&mode=text",
        f"/note?a={quote('geode://main/' + 'a/' * 2700)}",
        "/api/notes/main/" + "a/" * 2700,
        f"/api/context/{quote('geode://main/' + 'a/' * 2700, safe='')}",
        f"/api/recent?period={'x' * 5000}",
    ],
    ids=["search", "store", "note", "api-note", "context", "recent"],
)
def test_an_oversized_get_is_refused_with_a_clear_error(served, path):
    _n, srv = served
    status, _h, out = request(srv, "GET", path)
    assert status == 414, (status, out[:300])
    assert b"at most 4,096 are accepted" in out and len(out) < 400, out[:400]


def test_an_oversized_body_is_refused_and_changes_nothing(served):
    n, srv = served
    before = records(n.home)
    pid = n.ids["fix-index"]
    status, _h, out = request(srv, "POST", f"/api/proposals/{pid}/reject", body={"reason": "r" * (WEB_MAX_BODY + 10)})
    assert status == 413 and b"at most 65,536 are accepted" in out, (status, out[:300])
    assert records(n.home) == before


def test_within_the_bounds_the_page_still_answers(served):
    _n, srv = served
    status, _h, out = request(
        srv, "GET", f"/api/search?q={quote('pipeline ' + 'x' * (MAX_PARAM_CHARS - 20))}&mode=text"
    )
    assert status == 200, out[:300]
    status, _h, _o = request(srv, "GET", "/api/search?q=pipeline&mode=text")
    assert status == 200
