"""Dates that mean dates (issue 26): relative dates resolved against the note's own day, and a
question's explicit date matched to them. The resolver's rules and edge cases (no note date, month
and year boundaries, "last Friday" on a Friday, German), the upgrade of an index written before
the ``dates`` column, and ``geode search`` itself finding the note that told the day "yesterday"
above the note whose title carries the month (a real SQLite index, through the command)."""

from __future__ import annotations

import datetime as dt
import json
import os
import sqlite3
import subprocess
import sys

import pytest

from geode.delivery.prompt_recall import query_terms
from geode.recall import date_terms as D
from geode.recall.index_tables import dispose_engines
from geode.recall.recall_index import RecallIndex
from geode.recall.search import search
from tests.stores import fresh_settings, write

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def days(text: str, anchor) -> list[tuple[dt.date | None, dt.date | None]]:
    return [(t.first, t.last) for t in D.relative_dates(text, anchor)]


def one(text: str, anchor) -> dt.date:
    (got,) = days(text, anchor)
    assert got[0] == got[1], got
    assert got[0] is not None
    return got[0]


def test_no_note_date_resolves_nothing():
    assert D.relative_dates("Yesterday we went hiking, and last week too.", None) == []
    # no frontmatter date, no dated title, no dated file name: no relative date is written
    assert D.note_day({}, "Chat session", "chats/session.md") is None
    assert D.index_terms({}, "Chat session", "chats/session.md", "Yesterday we had dinner at Osteria Blu.") == ""
    # an unreadable date is no date either (the lint reports it), never guessed
    assert D.note_day({"date": "14/03/2026"}, "Chat", "chats/x.md") is None
    # an explicit date needs no anchor
    assert D.index_terms({}, "Chat", "x.md", "The launch is on 14 March 2026.") == "dt20260314 dm202603 dd0314"


def test_the_note_day_comes_from_frontmatter_then_title_then_file_name():
    assert D.note_day({"date": "2026-03-15"}, "Chat 2026-01-01", "2026-02-02-x.md") == dt.date(2026, 3, 15)
    assert D.note_day({"created": dt.date(2026, 3, 16)}, "", "") == dt.date(2026, 3, 16)
    assert D.note_day({"date": "nonsense"}, "Chat 2026-01-01", "2026-02-02-x.md") == dt.date(2026, 1, 1)
    assert D.note_day({}, "Chat session", "chats/2026-02-02-session.md") == dt.date(2026, 2, 2)
    assert D.note_day({}, "Chat session", "chats/2026-02-30-session.md") is None  # no such day


def test_month_and_year_boundaries():
    assert one("yesterday", dt.date(2026, 3, 1)) == dt.date(2026, 2, 28)
    assert one("yesterday", dt.date(2024, 3, 1)) == dt.date(2024, 2, 29)  # a leap year
    assert one("yesterday", dt.date(2026, 1, 1)) == dt.date(2025, 12, 31)
    assert one("the day before yesterday", dt.date(2026, 3, 1)) == dt.date(2026, 2, 27)
    assert one("three days ago", dt.date(2026, 3, 2)) == dt.date(2026, 2, 27)
    assert one("tomorrow", dt.date(2026, 12, 31)) == dt.date(2027, 1, 1)
    assert days("last month", dt.date(2026, 1, 15)) == [(dt.date(2025, 12, 1), dt.date(2025, 12, 31))]
    # last week = the Monday-to-Sunday week before: here 23 Feb to 1 Mar, two months
    assert days("last week", dt.date(2026, 3, 4)) == [(dt.date(2026, 2, 23), dt.date(2026, 3, 1))]
    terms = D.index_terms({"date": "2026-03-04"}, "Chat", "x.md", "Last week I bought a tent.").split()
    assert "dm202602" in terms and "dm202603" in terms
    assert not any(t.startswith("dt2026022") for t in terms)  # a span is never a day
    # earlier this month, on the 1st: that day only (not the month before)
    assert days("earlier this month", dt.date(2026, 3, 1)) == [(dt.date(2026, 3, 1), dt.date(2026, 3, 1))]


def test_last_friday_on_a_friday_is_a_week_before():
    friday = dt.date(2026, 3, 13)
    assert friday.weekday() == 4
    assert one("last Friday", friday) == dt.date(2026, 3, 6)
    assert one("last Friday", friday + dt.timedelta(days=1)) == friday  # on Saturday: the day before
    assert one("last Thursday", friday) == dt.date(2026, 3, 12)
    assert one("next Friday", friday) == dt.date(2026, 3, 20)
    assert one("letzten Freitag", friday) == dt.date(2026, 3, 6)


def test_german_relative_dates():
    d = dt.date(2026, 3, 13)
    assert one("Gestern waren wir essen", d) == dt.date(2026, 3, 12)
    assert one("vorgestern", d) == dt.date(2026, 3, 11)
    assert one("vor zwei Tagen", d) == dt.date(2026, 3, 11)
    assert one("vor einer Woche", d) == dt.date(2026, 3, 6)
    assert days("letzte Woche", d) == [(dt.date(2026, 3, 2), dt.date(2026, 3, 8))]
    assert one("morgen früh", d) == dt.date(2026, 3, 14)
    # "Morgen" is the morning, not tomorrow
    assert days("heute Morgen war es kalt", d) == [(d, d)]
    assert days("Guten Morgen!", d) == []


def test_explicit_dates_and_what_is_not_one():
    got = [(t.first, t.year_known, t.month, t.day) for t in D.explicit_dates("on 14. März 2026 and March 14th")]
    assert got == [(dt.date(2026, 3, 14), True, 3, 14), (None, False, 3, 14)]
    assert [t.first for t in D.explicit_dates("2026-03-14, March 14, 2026, 14th of March 2026")] == [
        dt.date(2026, 3, 14)
    ] * 3
    assert D.explicit_dates("How much money may 12 people spend?") == []  # the verb
    assert D.explicit_dates("I will be out on Wednesday afternoon") == []
    assert D.explicit_dates("in June") == []  # a bare month: which June?
    # a day without its year takes the note's year in a note
    assert D.index_terms({"date": "2026-05-02"}, "", "", "See you on March 14th.").split()[3:] == [
        "dd0314",
        "dt20260314",
        "dm202603",
    ]


def test_a_question_date_replaces_its_words_only_where_a_note_holds_it():
    q = "Which restaurant did we have dinner at on 14 March 2026?"
    terms = D.with_question_dates(q, query_terms, lambda t: True)
    assert terms == ["restaurant", "dinner", "dt20260314"]
    assert D.with_question_dates(q, query_terms, lambda t: False) is None  # no note tells it: words stand
    assert [d.term for d in D.question_dates("in March 2026, on 2026-03-14, on March 14th")] == [
        "dm202603",
        "dt20260314",
        "dd0314",
    ]


NOTES = {
    # the note that tells the event, relative to its own day (15 March): the answer
    "chats/session-074.md": "---\ndate: 2026-03-15\ntype: conversation\n---\n# Chat session\n\n"
    "User: Can you help me plan meals for the week?\n\n"
    "User: Yesterday we had dinner at Osteria Blu, the dumplings were excellent.\n",
    # other dinners on other days, told the same way: the words alone cannot tell them apart
    "chats/session-060.md": "---\ndate: 2026-03-01\n---\n# Chat session\n\nUser: Yesterday we had dinner at "
    "Koji's Ramen, the dumplings were excellent.\n",
    "chats/2026-03-28-session.md": "# Chat session\n\nUser: Yesterday we had dinner at Cafe Sol, the dumplings "
    "were excellent.\n",
    "chats/chat-100.md": "# Chat 2026-04-10\n\nUser: Two days ago we had dinner at Bistro Margaux.\n",
    # the title carries the month and year (weight 8): it won on the words before
    "notes/2026-03-02-restaurant-ideas.md": "---\ndate: 2026-03-02\n---\n# Restaurant ideas for March 2026\n\n"
    "User: Started a note about dinner restaurants for March 2026.\n",
    "notes/2026-02-02-restaurant-ideas.md": "---\ndate: 2026-02-02\n---\n# Restaurant ideas for February 2026\n\n"
    "User: Started a note about dinner restaurants for February 2026.\n",
    "notes/2026-04-01-restaurant-ideas.md": "---\ndate: 2026-04-01\n---\n# Restaurant ideas for April 2026\n\n"
    "User: Started a note about dinner restaurants for April 2026.\n",
    # the asked day's own session, about something else
    "chats/session-073.md": "---\ndate: 2026-03-14\n---\n# Chat session\n\nUser: The train was late again.\n",
}


def _store(tmp_path):
    for rel, text in NOTES.items():
        write(tmp_path / "store", rel, text)
    return tmp_path / "store", tmp_path / "home"


def test_geode_search_finds_the_note_that_told_the_day_yesterday(tmp_path):
    store, home = _store(tmp_path)
    env = dict(os.environ, GEODE_HOME=str(home), GEODE_STORE=str(store), PYTHONPATH=REPO)
    env.pop("GEODE_EMBED_MODEL", None)

    def geode_search(q: str) -> list[str]:
        p = subprocess.run(
            [sys.executable, "-m", "geode.cli", "search", q, "--mode", "text", "--json"],
            env=env,
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert p.returncode == 0, p.stderr
        return [h["path"] for h in json.loads(p.stdout)["results"]]

    for q in (
        "Which restaurant did we have dinner at on 14 March 2026?",
        "Which restaurant did we have dinner at on March 14th?",
        "Which restaurant did we have dinner at on 2026-03-14?",
    ):
        paths = geode_search(q)
        assert paths[0] == "chats/session-074.md", (q, paths)
    # hybrid, the real model: the vectors put "Restaurant ideas for March 2026" nearest by
    # meaning; the day is a constraint they cannot read (date_terms.date_prior)
    p = subprocess.run(
        [sys.executable, "-m", "geode.cli", "reindex", "--json"], env=env, cwd=REPO, capture_output=True, text=True
    )
    assert p.returncode == 0, p.stderr
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "geode.cli",
            "search",
            "Which restaurant did we have dinner at on 14 March 2026?",
            "--json",
        ],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert p.returncode == 0, p.stderr
    res = json.loads(p.stdout)
    assert res["mode"] == "hybrid" and res["results"][0]["path"] == "chats/session-074.md", res["results"][:3]
    # the note dated by its title alone: "two days ago" of 10 April is 8 April
    assert geode_search("Where did we have dinner on 8 April 2026?")[0] == "chats/chat-100.md"
    # ... and by its file name alone: 27 March
    assert geode_search("Where did we have dinner on March 27, 2026?")[0] == "chats/2026-03-28-session.md"


def test_the_date_prior_scales_the_notes_that_miss_the_day_only_when_one_holds_it():
    def row(path: str, dates: str) -> dict:
        return {"path": path, "dates": dates}

    scored = [(0.9, row("ideas.md", "dt20260302 dm202603"), 0.1, 0.9), (0.5, row("told.md", "dt20260314"), 1.0, 0.0)]
    got = D.date_prior(scored, ["restaurant", "dt20260314"], weight=0.1)
    assert [r["path"] for _s, r, _a, _b in got] == ["told.md", "ideas.md"]
    assert [round(s, 3) for s, _r, _a, _b in got] == [0.5, 0.09]  # scaled, never dropped
    assert D.date_prior(scored, ["restaurant", "dinner"]) is scored  # no date in the question
    assert D.date_prior(scored, ["dt20260314"], weight=1.0) is scored  # the prior off
    assert D.is_date_term("dm202603") and D.is_date_term("dd0314") and not D.is_date_term("dinner")


def test_an_index_written_before_the_dates_column_is_upgraded_in_place(tmp_path):
    """Guard for the upgrade (no old code path to fail on: the layout is new). An index of layout 1
    (four full-text columns, no ``dates``, no layout key) is brought to layout 2 on open, each
    note's dates computed from its stored row, its embedding state kept, and searched by date."""
    store, home = _store(tmp_path)
    s = fresh_settings(store, home)
    RecallIndex(s).refresh()
    dispose_engines()
    db = s.records_file
    con = sqlite3.connect(db)
    con.execute("UPDATE recall_note SET embed_model = 'm', embed_hash = embed_text_hash")
    con.execute("DROP TABLE recall_fts")
    con.execute(
        "CREATE VIRTUAL TABLE recall_fts USING fts5(title, tags, description, body, "
        "tokenize = 'unicode61 remove_diacritics 2')"
    )
    con.execute(
        "INSERT INTO recall_fts(rowid, title, tags, description, body) SELECT id, title, '', description, body "
        "FROM recall_note"
    )
    con.execute("ALTER TABLE recall_note DROP COLUMN dates")
    con.execute("DELETE FROM recall_meta WHERE k = 'layout'")
    con.commit()
    con.close()
    try:
        s = fresh_settings(store, home)
        got = search(s, "Which restaurant did we have dinner at on 14 March 2026?", mode="text", refresh=False)
        assert got["results"][0]["path"] == "chats/session-074.md"
        con = sqlite3.connect(db)
        assert con.execute("SELECT v FROM recall_meta WHERE k = 'layout'").fetchone() == ("2",)
        assert con.execute("SELECT count(*) FROM recall_note WHERE embed_model = 'm'").fetchone() == (len(NOTES),)
        row = con.execute("SELECT dates FROM recall_note WHERE path = 'chats/session-074.md'").fetchone()
        assert row[0].split()[:4] == ["dt20260315", "dm202603", "dd0315", "dt20260314"]
        con.close()
    finally:
        dispose_engines()


@pytest.mark.services  # PostgreSQL
def test_dates_on_postgresql_and_the_upgrade_there(tmp_path):
    """The same on PostgreSQL (127.0.0.1:5432, as tests/test_recall_pg.py; a database of its own,
    dropped after): the date question through the ``tsvector``, and an index without the
    ``dates`` column upgraded when it is opened."""
    import secrets

    import psycopg

    admin = "postgresql://postgres@127.0.0.1:5432/test"
    name = f"geode_test_{secrets.token_hex(6)}"
    with psycopg.connect(admin, autocommit=True, connect_timeout=5) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    url = f"postgresql://postgres@127.0.0.1:5432/{name}"
    store, home = _store(tmp_path)
    env = {k: v for k, v in os.environ.items() if not k.startswith("GEODE_")}
    env["GEODE_DATABASE_URL"] = url
    from geode.kernel.config import load_settings

    q = "Which restaurant did we have dinner at on 14 March 2026?"
    try:
        s = load_settings(store=str(store), home=str(home), env=env)
        RecallIndex(s).refresh()
        assert search(s, q, mode="text", refresh=False)["results"][0]["path"] == "chats/session-074.md"
        dispose_engines()
        with psycopg.connect(url, autocommit=True) as conn:  # back to layout 1
            conn.execute("ALTER TABLE recall_note DROP COLUMN dates")
            conn.execute(
                "UPDATE recall_note SET tsv = setweight(to_tsvector('simple', coalesce(title, '')), 'A') || "
                "setweight(to_tsvector('simple', coalesce(body, '')), 'D')"
            )
            conn.execute("DELETE FROM recall_meta WHERE k = 'layout'")
        s = load_settings(store=str(store), home=str(home), env=env)
        fresh = RecallIndex(s)  # opened again, as the next command would
        assert search(s, q, mode="text", refresh=False, index=fresh)["results"][0]["path"] == "chats/session-074.md"
        with psycopg.connect(url, autocommit=True) as conn:
            assert conn.execute("SELECT v FROM recall_meta WHERE k = 'layout'").fetchone() == ("2",)
            got = conn.execute("SELECT dates FROM recall_note WHERE path = 'chats/session-074.md'").fetchone()
            assert got[0].split()[:4] == ["dt20260315", "dm202603", "dd0315", "dt20260314"]
    finally:
        dispose_engines()
        with psycopg.connect(admin, autocommit=True, connect_timeout=5) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
