"""The parts of ``geode web`` below the server: the diff as data, note rendering, the queue's
page query, bulk decisions, refresh of a conflicted proposal, who decides, the Host parser, the
command's registration and the installed package's assets. Real stores and records under
tmp_path (``tests.web_helpers.make_night``); no server process here (test_web_safety and
test_web_browser start one)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.web_helpers import NIGHT, NOTES, REPO, make_night, snapshot


# -- the diff ---------------------------------------------------------------------------------
def test_changed_words_are_marked_and_a_hyphenated_name_is_one_word():
    from geode.web.diffview import word_segments

    a, b = word_segments("- see [[exit-code-old]] now", "- see [[exit-code]] now!")
    assert [t for t, m in a if m] == ["exit-code-old"]
    assert [t for t, m in b if m] == ["exit-code", "!"]
    assert "".join(t for t, _m in a) == "- see [[exit-code-old]] now"  # nothing lost


def test_file_diffs_pair_a_move_and_flag_what_a_terminal_shows():
    from geode.web.diffview import file_diffs, split_rows

    changes = [
        {
            "seq": 0,
            "path": "archive/a.md",
            "before_sha": None,
            "after_sha": "y",
            "before": None,
            "after": b"---\nstatus: archived\n---\nbody\n",
        },
        {
            "seq": 1,
            "path": "index.md",
            "before_sha": "i",
            "after_sha": "j",
            "before": b"one\ntwo\nthree",
            "after": b"one\n2\nthree\nfour\n",
        },
        {
            "seq": 2,
            "path": "a.md",
            "before_sha": "x",
            "after_sha": None,
            "before": b"---\nstatus: draft\n---\nbody\n",
            "after": None,
        },
        {"seq": 3, "path": "img.bin", "before_sha": "b", "after_sha": "c", "before": b"\x00\x01", "after": b"\x00\x02"},
    ]
    files = file_diffs("archive", changes)
    assert [(f["op"], f["path"], f["old_path"]) for f in files] == [
        ("rename", "archive/a.md", "a.md"),
        ("modify", "index.md", None),
        ("modify", "img.bin", None),
    ]
    ren = files[0]
    assert (ren["added"], ren["removed"]) == (1, 1)
    lines = ren["hunks"][0]["lines"]
    assert [ln["t"] for ln in lines] == [" ", "-", "+", " ", " "]
    assert [s for s, m in lines[1]["seg"] if m] == ["draft"] and [s for s, m in lines[2]["seg"] if m] == ["archived"]
    idx = files[1]["hunks"][0]["lines"]
    # "three" lost its missing newline: the old last line is flagged, the new one is not
    assert [(ln["t"], ln["seg"][0][0], ln["noeol"]) for ln in idx if ln["t"] != " "] == [
        ("-", "two", False),
        ("-", "three", True),
        ("+", "2", False),
        ("+", "three", False),
        ("+", "four", False),
    ]
    assert files[2]["binary"] and not files[2]["hunks"]
    rows = split_rows(idx)
    assert [(left and left["t"], r and r["t"]) for left, r in rows] == [(" ", " "), ("-", "+"), ("-", "+"), (None, "+")]


# -- rendering a note -------------------------------------------------------------------------
def test_a_note_renders_with_links_resolved_and_no_markup_of_its_own():
    from geode.web.render import render_body

    body = (
        "<!-- crystal:essence -->\nThe **delivered** part.\n<!-- /crystal:essence -->\n"
        "See [[pipefail|the pipefail note]], [[nowhere]], [runbook](../runbooks/deploy.md), "
        "[gone](gone.md) and [site](https://example.org).\n<script>alert(1)</script>\n![logo](http://x/l.png)\n"
        "```\n[[in code]]\n```\n"
    )
    links = [
        {"target": "pipefail", "resolved": True, "address": "geode://main/notes/pipefail"},
        {"target": "nowhere", "resolved": False, "address": None},
        {"target": "../runbooks/deploy.md", "resolved": True, "address": "geode://main/runbooks/deploy"},
    ]
    out = render_body(body, links)
    assert out["essence"] == "<p>The <strong>delivered</strong> part.</p>\n"
    html = out["html"]
    assert 'href="/note?a=geode%3A%2F%2Fmain%2Fnotes%2Fpipefail"' in html and ">the pipefail note</a>" in html
    assert '<span class="link unresolved" title="unresolved: nowhere">nowhere</span>' in html
    assert 'href="/note?a=geode%3A%2F%2Fmain%2Frunbooks%2Fdeploy"' in html
    assert 'class="link unresolved" title="unresolved: gone.md"' in html
    assert 'rel="noopener noreferrer nofollow"' in html
    assert "<script>" not in html and "&lt;script&gt;" in html
    assert "<img" not in html and "[image: logo]" in html
    assert "<code>[[in code]]\n</code>" in html
    assert "crystal:essence" not in html


# -- the queue ----------------------------------------------------------------------------------
@pytest.fixture()
def night(tmp_path):
    from geode.queue import proposals as Q

    n = make_night(tmp_path)
    engine = Q.open_queue(n.settings)
    yield n, engine
    engine.dispose()


def test_a_page_of_the_queue_groups_by_night_and_agent_with_totals_over_the_filter(night):
    from geode.web.queue import QueueFilter, page_of

    n, engine = night
    d = page_of(engine, QueueFilter(), page=1, per_page=4)
    assert (d["total"], d["pages"], len(d["proposals"])) == (6, 2, 4)
    assert [(g["night"], g["agent"], g["total"], len(g["proposals"])) for g in d["groups"]] == [
        ("night of 2026-03-14", "cleaner", 2, 2),
        ("night of 2026-03-14", "corrector", 1, 1),
        ("night of 2026-03-14", "librarian", 2, 1),
    ]  # the group's total, though the page holds one of its two
    d2 = page_of(engine, QueueFilter(), page=2, per_page=4)
    assert [p["id"] for p in d2["proposals"]] == [n.ids["fix-deploy"], n.ids["bind-git-add"]]
    assert [p["id"] for p in page_of(engine, QueueFilter(path="deploy"))["proposals"]] == [n.ids["fix-deploy"]]
    assert page_of(engine, QueueFilter(path="%"))["total"] == 0  # a LIKE wildcard is a plain character
    assert page_of(engine, QueueFilter(path="_"))["total"] == 0
    assert page_of(engine, QueueFilter(night=NIGHT, kind="archive"))["total"] == 2
    assert page_of(engine, QueueFilter(), page=99)["page"] == 1


def test_filters_are_checked():
    from geode.web.queue import QueueError, QueueFilter

    assert QueueFilter.from_params({"agent": " cleaner ", "kind": ""}).as_params() == {"agent": "cleaner"}
    with pytest.raises(QueueError, match="kind 'nope'"):
        QueueFilter.from_params({"kind": "nope"})
    with pytest.raises(QueueError, match="status 'done'"):
        QueueFilter.from_params({"status": "done"})
    with pytest.raises(QueueError, match="must be a string"):
        QueueFilter.from_params({"agent": ["a"]})


def test_bulk_acts_only_on_what_the_preview_showed(night):
    from geode.web.queue import QueueError, QueueFilter
    from geode.web.queue_decide import bulk_decide, bulk_preview, decide

    n, engine = night
    s = n.settings
    flt = QueueFilter(agent="librarian")
    pre = bulk_preview(s, engine, "approve", flt)
    assert pre["count"] == 2 and pre["would"] == {"apply": 2}
    assert pre["ids"] == [n.ids["fix-index"], n.ids["fix-deploy"]]
    before = snapshot(n.store)
    decide(s, engine, n.ids["fix-deploy"], "reject", "someone else")  # the queue moves after the preview
    with pytest.raises(QueueError) as exc:
        bulk_decide(s, engine, "approve", flt, pre["ids"], "me")
    assert exc.value.status == 409 and exc.value.extra["preview"]["ids"] == [n.ids["fix-index"]]
    assert snapshot(n.store) == before
    with pytest.raises(QueueError, match="at least one filter"):
        bulk_decide(s, engine, "approve", QueueFilter(), [], "me")
    r = bulk_decide(s, engine, "approve", flt, [n.ids["fix-index"]], "me")
    assert (r["ok"], r["not_done"]) == (1, 0)
    assert (n.store / "index.md").read_text() == NOTES["index.md"].replace("[[exit-code-old]]", "[[exit-code]]")
    undo = bulk_preview(s, engine, "undo", QueueFilter(night=NIGHT))
    assert undo["ids"] == [n.ids["fix-index"]] and undo["would"] == {"undo": 1}


def test_refresh_merges_a_change_on_other_lines_and_refuses_one_on_the_same(night):
    from geode.queue import proposals as Q
    from geode.web.queue import QueueError
    from geode.web.queue_decide import decide, refresh
    from geode.web.queue_detail import check, detail

    n, engine = night
    s = n.settings
    index = n.store / "index.md"
    index.write_text(NOTES["index.md"] + "- [[git-add-all]]\n")  # another line than the proposal's
    pid = n.ids["fix-index"]
    assert decide(s, engine, pid, "approve", "me")["status"] == "conflict"
    assert detail(s, engine, pid)["check"]["would"] == "conflict"
    r = refresh(s, engine, pid, "me")
    new = r["new_id"]
    assert (
        Q.get(engine, pid)["status"] == "rejected"
        and "refreshed proposal #" + str(new) in Q.get(engine, pid)["message"]
    )
    p = Q.get(engine, new)
    assert (p["agent"], p["kind"], p["evidence"], p["run_id"]) == (
        "librarian",
        "edit",
        [{"finding": n.findings["index"]}],
        NIGHT,
    )
    assert [a["action"] for a in p["actions"]] == ["filed", "refresh"]
    assert decide(s, engine, new, "approve", "me")["status"] == "applied"
    assert index.read_text() == NOTES["index.md"].replace("[[exit-code-old]]", "[[exit-code]]") + "- [[git-add-all]]\n"

    # the same line changed by someone else: refused, nothing filed, nothing touched
    pid = n.ids["pipefail-stable"]
    pf = n.store / "notes/pipefail.md"
    pf.write_text(NOTES["notes/pipefail.md"].replace("status: draft", "status: review"))
    decide(s, engine, pid, "approve", "me")
    count = len(Q.list_proposals(engine))
    with pytest.raises(QueueError, match="same lines") as exc:
        refresh(s, engine, pid, "me")
    assert exc.value.status == 409 and len(Q.list_proposals(engine)) == count
    assert "status: review" in pf.read_text()

    # a move whose source changed: the new file carries the change
    pid = n.ids["archive-old-retry"]
    src = n.store / "notes/old-retry.md"
    src.write_text(NOTES["notes/old-retry.md"] + "\nOne more line.\n")
    with engine.connect() as conn:
        row, changes = Q.load(conn, pid)
    assert check(s, row, changes)["would"] == "conflict"
    new = refresh(s, engine, pid, "me")["new_id"]
    assert decide(s, engine, new, "approve", "me")["ok"]
    assert not src.exists()
    assert (n.store / "archive/notes/old-retry.md").read_text() == NOTES["notes/old-retry.md"].replace(
        "status: deprecated", "status: archived"
    ) + "\nOne more line.\n"

    with pytest.raises(QueueError, match="not stale"):
        refresh(s, engine, n.ids["fix-deploy"], "me")
    with pytest.raises(QueueError, match="only a pending or conflicted"):
        refresh(s, engine, new, "me")


def test_who_decides_comes_from_the_configuration_else_the_os_user(tmp_path, monkeypatch):
    import getpass

    from geode.kernel.config import load_settings
    from geode.web.queue import who_of

    n = make_night(tmp_path)
    assert who_of(n.settings) == "Ada Reviewer"
    assert who_of(n.settings, "Bob") == "Bob"
    home = tmp_path / "bare"
    home.mkdir()
    monkeypatch.setattr(getpass, "getuser", lambda: "os-user")
    assert who_of(load_settings(home=home, env={})) == "os-user"


# -- the guard's parsing ----------------------------------------------------------------------
def test_host_values_are_parsed_strictly():
    from geode.services.loopback_guard import Guard, split_host

    assert split_host("LocalHost:8765") == ("localhost", 8765)
    assert split_host("[::1]:9") == ("::1", 9)
    assert split_host("127.0.0.1") == ("127.0.0.1", None)
    assert split_host("127.0.0.1:80x")[1] == -1
    g = Guard(None, "t", "127.0.0.1", 8765)
    assert g.host_ok("localhost:8765") and g.host_ok("127.0.0.1") and g.host_ok("[::1]:8765")
    assert not g.host_ok("localhost:8766") and not g.host_ok("evil.example:8765") and not g.host_ok(None)
    assert g.origin_ok("http://localhost:8765") and not g.origin_ok("https://localhost:8765")
    assert not g.origin_ok("http://localhost:8765.evil.example") and not g.origin_ok("null")


# -- the command and the package ----------------------------------------------------------------
def test_geode_web_is_a_command():
    r = subprocess.run(
        [sys.executable, "-m", "geode", "web", "--help"],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin", "HOME": "/nonexistent"},
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    for flag in ("--host", "--port", "--no-open", "--allow-remote", "--who"):
        assert flag in r.stdout


def test_an_install_ships_the_templates_and_assets(tmp_path):
    from tests.test_packaging import _install

    target = _install(tmp_path)
    web = target / "geode" / "web"
    src = REPO / "geode" / "web"
    want = sorted(
        str(p.relative_to(src))
        for p in src.rglob("*")
        if p.is_file() and p.suffix in (".html", ".css", ".js", ".md", ".LICENSE") or p.name.endswith("LICENSE")
    )
    assert len(want) >= 12
    missing = [w for w in want if not (web / w).is_file()]
    assert not missing, missing
    assert (web / "static/vendor/cytoscape.min.js").read_bytes() == (
        src / "static/vendor/cytoscape.min.js"
    ).read_bytes()
    assert (web / "app.py").is_file() and (web / "command.py").is_file()


@pytest.mark.services
def test_the_queue_and_store_queries_on_postgresql(tmp_path):
    """The page's own SQL (the night ordering subquery, path LIKE, GROUP BY counts, facets)
    on PostgreSQL, the records' database at scale."""
    import secrets

    import psycopg

    from geode.queue import proposals as Q
    from geode.recall.index_tables import dispose_engines
    from geode.web.queue import QueueFilter, choices, history, page_of
    from geode.web.queue_decide import bulk_decide, bulk_preview
    from geode.web.store import Store

    admin = "postgresql://postgres@127.0.0.1:5432/test"
    name = f"geode_web_{secrets.token_hex(6)}"
    with psycopg.connect(admin, autocommit=True, connect_timeout=5) as conn:  # fails loudly when unreachable
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        n = make_night(tmp_path, f'\n[database]\nurl = "postgresql://postgres@127.0.0.1:5432/{name}"\n')
        assert n.settings.database_url.endswith(name)
        engine = Q.open_queue(n.settings)
        assert engine.dialect.name == "postgresql"
        d = page_of(engine, QueueFilter(), per_page=4)
        assert [(g["night"], g["agent"], g["total"]) for g in d["groups"]] == [
            ("night of 2026-03-14", "cleaner", 2),
            ("night of 2026-03-14", "corrector", 1),
            ("night of 2026-03-14", "librarian", 2),
        ]
        assert [p["id"] for p in page_of(engine, QueueFilter(path="deploy"))["proposals"]] == [n.ids["fix-deploy"]]
        assert page_of(engine, QueueFilter(path="_"))["total"] == 0
        assert [c["value"] for c in choices(engine)["night"]] == [NIGHT, "night-2026-03-13"]
        flt = QueueFilter(agent="cleaner")
        pre = bulk_preview(n.settings, engine, "approve", flt)
        assert bulk_decide(n.settings, engine, "approve", flt, pre["ids"], "pg")["ok"] == 2
        assert (n.store / "archive/notes/dup-b.md").is_file() and not (n.store / "notes/dup-b.md").exists()
        h = history(engine, per_page=2)
        assert h["total"] == 8 and [a["who"] for a in h["actions"]] == ["pg", "pg"]
        res = Store(n.settings, engine).search({"q": "pipeline", "mode": "text", "tag": "shell"})
        assert sorted(r["title"] for r in res["results"]) == ["exit-code", "pipefail"]  # ranks differ by engine
        assert {f["value"]: f["count"] for f in res["facets"]["tag"]} == {"shell": 2, "ci": 1}
        engine.dispose()
    finally:
        dispose_engines()
        with psycopg.connect(admin, autocommit=True, connect_timeout=5) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def test_the_page_reads_wikilinks_with_the_upkeep_reader():
    """One wikilink rule (geode.kernel.mdread): an escaped pipe in a table cell separates the
    alias as upkeep reads it, and an undefined reference stays text."""
    from geode.web.render import NoteRenderer

    html = NoteRenderer([{"target": "Sorting", "resolved": True, "address": "geode://main/sorting"}]).md.render(
        "See [[Sorting\\|Sort]] and [x][nope].\n"
    )
    assert 'title="geode://main/sorting">Sort</a>' in html
    assert "[x][nope]" in html and "Sorting\\" not in html
