"""The page's human times and detail tables (geode/web/humane.py): what a person reads in
place of raw ISO times and raw JSON, with the exact value kept on hover."""

from __future__ import annotations

import datetime as dt

from geode.web.humane import ago_text, detail_table, when

NOW = dt.datetime(2026, 5, 1, 12, 0, 0, tzinfo=dt.UTC)


def test_times_read_as_a_person_says_them():
    def said(**kw) -> str:
        return ago_text(NOW - dt.timedelta(**kw), NOW)

    assert said(seconds=10) == "just now"
    assert said(minutes=1) == "1 minute ago" and said(minutes=59) == "59 minutes ago"
    assert said(hours=3, minutes=5) == "3 hours ago"
    assert said(days=1) == "1 day ago" and said(days=9) == "1 week ago"
    assert said(days=400) == "1 year ago"
    assert ago_text(NOW + dt.timedelta(days=2), NOW) == "in 2 days"


def test_the_iso_time_stays_on_hover_and_odd_values_stay_text():
    html = str(when("2026-05-01T09:00:00Z", now=NOW))
    assert html == '<time datetime="2026-05-01T09:00:00Z" title="2026-05-01T09:00:00Z">3 hours ago</time>'
    assert str(when("not a <time>", now=NOW)) == "not a &lt;time&gt;"
    assert str(when(None)) == ""


def test_a_detail_is_a_table_not_json_and_markup_in_it_is_text():
    html = str(detail_table({"reason": "dup <b>x</b>", "files": ["a.md", "b.md"], "undo": {"of": 3}, "note": None}))
    assert html.startswith('<table class="detail">') and "{" not in html
    assert "<tr><th>reason</th><td>dup &lt;b&gt;x&lt;/b&gt;</td></tr>" in html
    assert "<tr><th>files</th><td>a.md, b.md</td></tr>" in html
    assert "<tr><th>undo.of</th><td>3</td></tr>" in html and "<tr><th>note</th><td>none</td></tr>" in html
    assert str(detail_table('{"reason": "r"}')) == '<table class="detail"><tr><th>reason</th><td>r</td></tr></table>'
    assert str(detail_table("plain <i>")) == "plain &lt;i&gt;"
