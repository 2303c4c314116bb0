"""Dates agree between rooms: one strict reading (``geode.kernel.dates``), one meaning of a
validity window (``valid_to`` is the last day a note holds, inclusive), judged the same way by
search, the Cleaner and the Corrector on the boundary day; the lint names a date that is not
YYYY-MM-DD with its file and line; a bad ``--as-of`` is a usage error naming the flag and value."""

from __future__ import annotations

import datetime as dt
import os
import subprocess
import sys
from pathlib import Path

import pytest

from geode.agents.contract import Context
from geode.cleaner.agent import Cleaner
from geode.corrector.agent import Corrector
from geode.delivery.lint import lint_note, lint_store
from geode.kernel.config import load_settings
from geode.kernel.dates import (
    DateError,
    ValidityWindow,
    argparse_date,
    date_problems,
    is_iso_day,
    optional_date,
    parse_date,
)
from geode.kernel.note import parse_note
from geode.recall.filters import FilterError
from geode.recall.index_tables import dispose_engines
from geode.recall.recall_index import RecallIndex
from geode.recall.search import search
from tests.stores import GeodeEnv


def make(tmp_path, files: dict[str, bytes]):
    """(settings, engine, root) for a store of exactly ``files``, records in a tmp GEODE_HOME."""
    return tuple(GeodeEnv(tmp_path).files(files))


REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
D = dt.date(2024, 12, 31)
NEXT = dt.date(2025, 1, 1)


# -- parsing -------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "value, want",
    [
        ("2024-06-01", dt.date(2024, 6, 1)),
        ("  2024-06-01 ", dt.date(2024, 6, 1)),
        (dt.date(2024, 6, 1), dt.date(2024, 6, 1)),
        (dt.datetime(2024, 6, 1, 23, 59, tzinfo=dt.timezone(dt.timedelta(hours=-5))), dt.date(2024, 6, 1)),
        ("2024-06-01T10:00:00Z", dt.date(2024, 6, 1)),
        ("2024-06-01 10:00:00+02:00", dt.date(2024, 6, 1)),
        ("2024-02-29", dt.date(2024, 2, 29)),
    ],
)
def test_what_parse_date_accepts(value, want):
    got = parse_date(value, "valid_to")
    assert got == want and type(got) is dt.date


@pytest.mark.parametrize(
    "value",
    [
        "2024-6-1",
        "20240601",
        "2024-W22-6",
        "01/06/2024",
        "2024-02-30",
        "2023-02-29",
        "2024-13-01",
        "notadate",
        "2024-06-01x",
        "2024-06-01T25:00",
        "２０２４-06-01",
        "",
        2024,
        20240601,
        True,
        None,
        ["2024-06-01"],
    ],
)
def test_what_parse_date_refuses_names_the_field_and_value(value):
    with pytest.raises(DateError) as err:
        parse_date(value, "valid_to")
    assert err.value.field == "valid_to" and err.value.value == value
    assert str(err.value).startswith(f"valid_to {value!r}: ")


def test_optional_date_reads_absent_as_none_and_is_still_strict():
    assert optional_date(None) is None and optional_date("") is None and optional_date("  ") is None
    assert optional_date("2024-06-01") == dt.date(2024, 6, 1)
    with pytest.raises(DateError):
        optional_date("2024-6-1")


def test_a_non_iso_date_is_never_compared_as_text():
    """The old bug: as text, 2024-6-1 sorts after 2024-12-31. As dates, June comes first; written
    2024-6-1 it is not a date at all, so no room compares it."""
    assert "2024-6-1" > "2024-12-31"  # what text comparison did
    assert parse_date("2024-06-01") < parse_date("2024-12-31")
    with pytest.raises(DateError):
        parse_date("2024-6-1")
    w = ValidityWindow.from_frontmatter({"valid_from": "2024-6-1", "valid_to": "2024-12-31"})
    assert w.valid_from is None and [e.field for e in w.problems] == ["valid_from"]
    with pytest.raises(DateError):
        ValidityWindow.from_frontmatter({"valid_to": "2024-6-1"}, strict=True)


# -- the window ----------------------------------------------------------------------------------
def test_valid_to_is_the_last_day_it_holds_at_both_ends():
    w = ValidityWindow(dt.date(2024, 1, 1), D)
    assert not w.contains(dt.date(2023, 12, 31))
    assert w.contains(dt.date(2024, 1, 1)) and w.contains("2024-01-01")  # first day
    assert w.contains(D) and w.contains("2024-12-31")  # last day
    assert not w.contains(NEXT)
    assert not w.closed_before(D) and w.closed_before(NEXT)
    assert w.opens_after(dt.date(2023, 12, 31)) and not w.opens_after(dt.date(2024, 1, 1))
    assert not w.empty and ValidityWindow("2024-02-01", "2024-01-31").empty
    open_ = ValidityWindow()
    assert open_.contains(dt.date(1, 1, 1)) and open_.contains(dt.date(9999, 12, 31)) and not open_.closed_before(NEXT)


def test_windows_that_share_one_day_overlap():
    a = ValidityWindow(None, D)
    assert a.overlaps(ValidityWindow(D, None)) and ValidityWindow(D, None).overlaps(a)
    assert not a.overlaps(ValidityWindow(NEXT, None)) and not ValidityWindow(NEXT, None).overlaps(a)
    assert a.overlaps(ValidityWindow()) and ValidityWindow(D, D).overlaps(ValidityWindow(D, D))


def test_the_window_reads_what_yaml_or_the_note_parser_gives():
    fm = parse_note("---\nvalid_from: 2024-01-01\nvalid_to:\n---\nx\n", "n.md").frontmatter
    assert ValidityWindow.from_frontmatter(fm) == ValidityWindow(dt.date(2024, 1, 1), None)
    assert ValidityWindow.from_frontmatter({"valid_to": dt.date(2024, 12, 31)}).valid_to == D
    assert ValidityWindow.from_frontmatter({"valid_to": dt.datetime(2024, 12, 31, 8)}).valid_to == D


def test_argparse_date_normalises_or_raises_a_usage_error():
    import argparse

    assert argparse_date("2024-06-01T08:00Z") == "2024-06-01"
    with pytest.raises(argparse.ArgumentTypeError, match="'notadate' is not a date"):
        argparse_date("notadate")


# -- the lint rule -------------------------------------------------------------------------------
def test_lint_names_a_date_that_is_not_iso_with_file_and_line(tmp_path):
    text = (
        "---\nname: cutoff\ntype: fact\nvalid_from: 2024-6-1\nvalid_to: 2024-12-31T00:00:00\n"
        "last_verified: 2024-02-30\nrecorded: 2024-06-01T10:00:00Z\nreview_due: 2025-01-01\n---\nBody.\n"
    )
    note = parse_note(text, "ops/cutoff.md")
    settings = load_settings(store=tmp_path, home=tmp_path / "home", env={})
    got = [(p.path, p.line, p.code) for p in lint_note(note, settings, "main", D) if p.code == "date-not-iso"]
    assert got == [
        ("ops/cutoff.md", 4, "date-not-iso"),
        ("ops/cutoff.md", 5, "date-not-iso"),
        ("ops/cutoff.md", 6, "date-not-iso"),
    ]
    msgs = {p.line: p.message for p in lint_note(note, settings, "main", D)}
    assert "'2024-6-1'" in msgs[4] and "YYYY-MM-DD" in msgs[4]
    assert "write 2024-12-31" in msgs[5]  # a day field with a time: readable, but not the form
    assert "no such day" in msgs[6]
    # an unreadable last_verified is said once (date-not-iso), not also as empty or stale
    assert [p.code for p in lint_note(note, settings, "main", D) if p.line == 6] == ["date-not-iso"]
    assert not [e for e in date_problems(note.frontmatter) if e.field in ("recorded", "review_due")]


def test_lint_store_reports_it_and_iso_dates_are_clean(tmp_path):
    root = tmp_path / "store"
    root.mkdir()
    (root / "good.md").write_text("---\nvalid_from: 2024-06-01\nvalid_to:\n---\nGood.\n", encoding="utf-8")
    (root / "bad.md").write_text("---\nname: bad\nvalid_to: 2024-6-1\n---\nBad.\n", encoding="utf-8")
    settings = load_settings(store=root, home=tmp_path / "home", env={})
    found = [(p["path"], p["line"]) for p in lint_store(settings, D)["problems"] if p["code"] == "date-not-iso"]
    assert found == [("bad.md", 3)]
    assert is_iso_day("2024-06-01") and not is_iso_day("2024-6-1") and not is_iso_day("2024-06-01T00:00")


# -- one note, every room, the boundary day -------------------------------------------------------
FACT = (
    b"---\nname: deploy-window-2024\ntype: fact\nsubject: deploy window\nstatus: stable\n"
    b"valid_from: 2024-01-01\nvalid_to: 2024-12-31\nlast_verified: 2020-01-01\n---\n# Deploy window\n\n"
    b"Deploys run on Tuesdays.\n"
)


def _next(valid_from: str) -> bytes:
    return (
        f"---\nname: deploy-window-2025\nsubject: deploy window\nstatus: stable\nvalid_from: {valid_from}\n"
        "---\n# Deploy window\n\nDeploys run every weekday.\n"
    ).encode()


def _rooms(tmp_path: Path, next_from: str, day: dt.date):
    """What search, the Corrector and the Cleaner make of the two notes on ``day``."""
    settings, engine, root = make(tmp_path, {"fact.md": FACT, "next.md": _next(next_from)})
    try:
        RecallIndex(settings).refresh()
        found = sorted(h["path"] for h in search(settings, "", as_of=day, mode="text", refresh=False)["results"])
        corrector = Corrector(today=day).examine(Context(settings, engine, "r"))
        reviewed = [p.draft.changes[0].path for p in corrector.proposed]
        cleaner = Cleaner().examine(Context(settings, engine, "r"))
        contradictions = [(f.path, f.target) for f in cleaner.findings if f.kind == "contradiction"]
    finally:
        dispose_engines()
        engine.dispose()
    return found, reviewed, contradictions


def test_on_its_last_day_a_note_holds_in_search_the_corrector_and_the_cleaner(tmp_path):
    found, reviewed, contradictions = _rooms(tmp_path, "2024-12-31", D)
    assert found == ["fact.md", "next.md"]  # both hold on 2024-12-31
    assert reviewed == ["fact.md"]  # still in force: its freshness duty stands
    assert contradictions == [("fact.md", "next.md")]  # two stable truths share 2024-12-31


def test_the_day_after_its_last_day_no_room_holds_it(tmp_path):
    found, reviewed, contradictions = _rooms(tmp_path, "2025-01-01", NEXT)
    assert found == ["next.md"]
    assert reviewed == []  # it records what held: no duty
    assert contradictions == []  # 2024-12-31 and 2025-01-01 share no day


def test_the_cleaner_does_not_judge_a_pair_on_an_unreadable_date(tmp_path):
    """Written 2024-6-1, the older note's valid_from was compared as text and sorted after
    2024-12-31 (the wrong note would have been proposed superseded). Now the pair is skipped,
    naming the file and the line."""
    older = (
        b"---\nname: a\nsubject: cutoff\nstatus: stable\nvalid_from: 2024-6-1\n---\n# Cutoff\n\n"
        b"The retry cutoff is one day.\n"
    )
    newer = (
        b"---\nname: b\nsubject: cutoff\nstatus: stable\nvalid_from: 2024-12-31\n---\n# Cutoff\n\n"
        b"The retry cutoff is two days.\n"
    )
    settings, engine, _root = make(tmp_path, {"a.md": older, "b.md": newer})
    report = Cleaner().examine(Context(settings, engine, "r"))
    assert [f for f in report.findings if f.kind == "contradiction"] == [] and report.proposed == []
    skipped = [s for s in report.skipped if s.path]
    assert [(s.path, s.line, s.target) for s in skipped] == [("a.md", 5, "b.md")]
    assert "valid_from '2024-6-1'" in skipped[0].reason
    fixed = older.replace(b"2024-6-1", b"2024-06-01")
    settings, engine, _root = make(tmp_path / "fixed", {"a.md": fixed, "b.md": newer})
    report = Cleaner().examine(Context(settings, engine, "r"))
    assert [(f.path, f.target) for f in report.findings if f.kind == "contradiction"] == [("a.md", "b.md")]
    assert [p.draft.changes[0].path for p in report.proposed] == ["a.md"]  # the older by date


def test_search_stores_days_and_refuses_a_bad_as_of(tmp_path):
    settings, engine, _root = make(
        tmp_path,
        {
            "stamped.md": b"---\nrecorded: 2024-06-01T23:00:00Z\nvalid_to: 2024-12-31\n---\nStamped.\n",
            "odd.md": b"---\nrecorded: 2024-6-1\nvalid_to: 2024-6-1\n---\nOdd.\n",
        },
    )
    try:
        RecallIndex(settings).refresh()
        # the recorded timestamp counts as its day; 2024-6-1 is no date (mtime and unbounded instead)
        assert [
            h["path"]
            for h in search(settings, "", after="2024-06-01", as_of="2024-06-02", mode="text", refresh=False)["results"]
        ].count("stamped.md") == 1
        late = sorted(
            h["path"] for h in search(settings, "", as_of="2030-01-01", mode="text", refresh=False)["results"]
        )
        assert late == ["odd.md"]
        for bad in ("notadate", "2024-6-1"):
            with pytest.raises(FilterError, match=f"as_of '{bad}'"):
                search(settings, "", as_of=bad, mode="text", refresh=False)
        with pytest.raises(FilterError, match="after 'yesterday'"):
            search(settings, "", after="yesterday", mode="text", refresh=False)
    finally:
        dispose_engines()
        engine.dispose()


def test_geode_search_as_of_notadate_is_a_usage_error(tmp_path):
    env = dict(os.environ, GEODE_HOME=str(tmp_path / "home"), GEODE_STORE=str(tmp_path / "notes"))
    p = subprocess.run(
        [sys.executable, "-m", "geode.cli", "search", "--as-of", "notadate", "cutoff"],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode == 2
    assert "argument --as-of: 'notadate' is not a date (YYYY-MM-DD)" in p.stderr
    p = subprocess.run(
        [sys.executable, "-m", "geode.cli", "search", "--after", "2024-6-1"],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode == 2 and "argument --after: '2024-6-1' is not a date" in p.stderr
