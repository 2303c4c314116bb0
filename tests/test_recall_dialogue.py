"""Dialogue and logs cut per turn (``geode.recall.dialogue``, ``passages.cut``): the rule reads
foreign shapes (a Slack export rendered to markdown, a Claude Code transcript in two renderings,
a service log, meeting minutes with bold speakers), and a prose note keeps exactly the passages
it had before the rule existed."""

from __future__ import annotations

import pytest

from geode.recall import passages
from geode.recall.dialogue import is_dialogue, opens_turn, turn_spans
from geode.recall.passages import cut

SLACK = """# #platform-team, exported 2026-03-02

**maria.k** 09:14 AM
morning all, the nightly import failed again at 03:00
the stack trace is in the thread

**devon** 09:16 AM
looking. probably the disk on db-2 again

**maria.k** 09:20 AM
yes, 97% full. I'll rotate the logs and add an alert at 85%

**ops-bot** 09:31 AM
:white_check_mark: Deploy of api v2.14.1 finished in 4m12s

**devon** 09:40 AM
import re-run is green, 41 tables in 6 minutes
"""

CLAUDE_CODE = """> the test_sync test fails on CI but not locally, can you look?

⏺ I'll start by reading the test and the CI log.

⏺ Read(tests/test_sync.py)
  ⎿  Read 120 lines (ctrl+r to expand)

⏺ The test compares a timestamp with the local clock: CI runs in UTC, your machine in
  Europe/Berlin, so the expected hour is off by one.

> ok, make it timezone-independent

⏺ Update(tests/test_sync.py)
  ⎿  Updated tests/test_sync.py with 2 additions and 1 removal

⏺ Done: the test now builds its expected time with tzinfo=UTC.
"""

TRANSCRIPT_HEADINGS = """# Session 2026-03-02

## User

Why does the cache key change between two identical builds?

## Assistant

The key hashes the environment, and `PWD` differs between the two checkouts.

Dropping `PWD` from the hashed variables makes the keys equal.

## User

Will that break the monorepo builds?

## Assistant

No: they set `CACHE_SCOPE`, which is still hashed.
"""

LOG = """2026-03-02 03:00:01,112 INFO  import.nightly  starting import of 41 tables
2026-03-02 03:00:07,530 WARN  db.pool  connection slow (2100 ms) host=db-2
2026-03-02 03:02:12,004 INFO  import.nightly  table invoices: 120,331 rows
2026-03-02 03:04:55,002 ERROR import.nightly  write failed: No space left on device
2026-03-02 03:04:55,010 INFO  import.nightly  rolling back table payments
2026-03-02 03:05:02,771 INFO  import.nightly  import aborted after 5 minutes
"""

MINUTES = """## Discussion

**Nora**: The load test is scheduled for Friday morning.

**Jonas:** Harbor's documentation is still thin, I will write the onboarding page.

[10:32] Priya: The Kestrel outage was caused by a full disk on db-2.

Tomas: Dependency updates are merged, nothing broke as far as I can see.

## Decisions

- Keep the release train on Tuesdays.
"""

# a prose note, with the near-misses the rule must not take for turns: one "Note:" line, one
# "Example:" line, timestamps inside a code fence
PROSE = """# Deploying the API

The API ships from the `release` branch. A deploy builds the image, runs the migrations and
then swaps the pods one by one, so a failed health check stops the roll-out halfway.

Note: the migrations run before the first pod is swapped, never after.

## Steps

1. Tag the release: `git tag v2.14.1`.
2. Wait for the image build (about four minutes).
3. Run `make deploy ENV=prod` and watch the health checks.

## When it fails

```
10:32 deploy started
10:36 health check failed on pod api-3
10:36 roll-out stopped
```

A roll-out that stops halfway leaves two versions serving. Roll back with `make rollback`,
which swaps the old pods back in the same order; the migrations are not undone, so every
migration must be backward compatible with the previous release. We learned this in March,
when a renamed column broke the old pods for twenty minutes.

Example: a column is renamed in two releases, first added, then the old one dropped.
"""


def _turn_texts(body: str) -> list[str]:
    lines = body.split("\n")
    return ["\n".join(lines[s : e + 1]) for s, e in turn_spans(lines)]


@pytest.mark.parametrize(
    ("body", "turns", "first"),
    [
        (SLACK, 5, "**maria.k** 09:14 AM\nmorning all, the nightly import failed again at 03:00\nthe stack trace"),
        (CLAUDE_CODE, 7, "> the test_sync test fails on CI but not locally"),
        (TRANSCRIPT_HEADINGS, 4, "## User\n\nWhy does the cache key change"),
        (LOG, 6, "2026-03-02 03:00:01,112 INFO  import.nightly  starting import"),
        (MINUTES, 4, "**Nora**: The load test"),
    ],
    ids=["slack-export", "claude-code-export", "transcript-headings", "service-log", "minutes"],
)
def test_foreign_dialogue_shapes_are_read_turn_by_turn(body, turns, first):
    lines = body.split("\n")
    assert is_dialogue(lines)
    got = _turn_texts(body)
    assert len(got) == turns
    assert got[0].startswith(first)
    # a turn keeps its continuation lines: the tool output under a call, a message's second line
    if body is CLAUDE_CODE:
        assert got[2] == "⏺ Read(tests/test_sync.py)\n  ⎿  Read 120 lines (ctrl+r to expand)"
    if body is SLACK:
        assert got[2] == "**maria.k** 09:20 AM\nyes, 97% full. I'll rotate the logs and add an alert at 85%"


@pytest.mark.parametrize("body", [SLACK, CLAUDE_CODE, TRANSCRIPT_HEADINGS, LOG, MINUTES])
def test_a_dialogue_note_is_cut_into_windows_of_whole_turns(body, monkeypatch):
    monkeypatch.setattr(passages, "TURN_WINDOW", 2)
    monkeypatch.setattr(passages, "TURN_STEP", 1)
    turns = _turn_texts(body)
    ps = cut(body, body_line=3, title="T")
    # every turn is whole in some passage, and no passage holds more than two turns
    for t in turns:
        assert any(t.strip() in p.text for p in ps), t
    for p in ps:
        assert sum(1 for t in turns if t.strip() in p.text) <= 2
        assert p.embed_text.startswith("T\n")
    # windows advance one turn at a time: consecutive windows of a section share a turn
    same = [(a, b) for a, b in zip(ps, ps[1:], strict=False) if a.heading == b.heading]
    assert any(set(a.text.split("\n")) & set(b.text.split("\n")) for a, b in same)
    # line spans are file lines: the passage's first line is where its first turn starts
    lines = body.split("\n")
    for p in ps:
        assert p.text.startswith(lines[p.line_start - 3].strip())


@pytest.mark.parametrize("body", [SLACK, CLAUDE_CODE, TRANSCRIPT_HEADINGS, LOG, MINUTES])
def test_by_default_every_turn_is_a_passage_of_its_own(body):
    turns = [t.strip() for t in _turn_texts(body)]
    got = [p.text for p in cut(body, title="T")]
    assert [t for t in got if t in turns] == turns


def test_the_remark_of_a_long_meeting_is_a_passage_of_its_own_not_one_of_eight():
    turns = [f"Speaker{chr(65 + i % 20)}: remark number {i} about something unrelated to the rest." for i in range(40)]
    turns[23] = "Priya: The Kestrel outage was caused by a full disk on db-2."
    body = "## Discussion\n\n" + "\n\n".join(turns) + "\n"
    ps = cut(body, title="Weekly sync")
    holding = [p for p in ps if "Kestrel" in p.text]
    # before the rule: one 700-character window of about nine turns held it
    assert holding and all(p.text.count("\n\n") + p.text.count(": ") <= 2 * passages.TURN_WINDOW for p in holding)
    assert max(len(p.text) for p in holding) < 200


def test_a_prose_note_keeps_the_passages_it_had():
    lines = PROSE.split("\n")
    assert not is_dialogue(lines)
    assert opens_turn("Note: the migrations run before the first pod is swapped, never after.")  # one is not enough
    # pinned from the cut before dialogue detection existed (main at 9b9fe22)
    got = [(p.line_start, p.line_end, p.heading) for p in cut(PROSE, title="Deploying the API")]
    assert got == [(1, 6, "Deploying the API"), (8, 12, "Steps"), (14, 27, "When it fails")]
    got = [(p.line_start, p.line_end, p.heading) for p in cut(PROSE, title="Deploying the API", size=300, overlap=100)]
    assert got == [
        (1, 6, "Deploying the API"),
        (8, 12, "Steps"),
        (14, 20, "When it fails"),
        (16, 24, "When it fails"),
        (24, 27, "When it fails"),
    ]


def test_a_prose_note_with_one_quoted_exchange_stays_prose():
    body = PROSE + "\nAnna: did the rollback work?\n\nBen: yes, after twenty minutes.\n"
    assert not is_dialogue(body.split("\n"))
