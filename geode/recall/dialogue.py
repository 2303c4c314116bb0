"""Whether a note is a conversation or a log, and where its turns start.

Why: a meeting log, a chat export or a service log is a string of small, separate things (one
person's remark, one log line). Packed into 700-character windows (``geode.recall.passages``),
eight unrelated remarks share one vector, and a question about one of them meets a vector about
all eight. A dialogue note is cut per turn instead; a prose note keeps the passages it had.

The rule (``turn_starts``, ``is_dialogue``). A body line **opens a turn** when it is one of:

1. a **speaker line**: optionally a list marker, a blockquote mark or a time in brackets, then a
   speaker and a colon, then text. A speaker is a capitalised name of at most four words
   (``Anna``, ``Dr. Lee``, ``Anna Schmidt``), a ``@handle``, or a role word in any case (user,
   assistant, human, ai, system, bot, claude, codex, gpt, model, agent, me, you), bare or in bold
   with the colon inside or after it: ``Anna: ...``, ``**Anna**: ...``, ``**Anna:** ...``,
   ``[10:02] Anna: ...``, ``user: ...``, ``> **User:** ...``;
2. a **timestamped line**: a line that opens with a clock time (``10:32``, ``10:32:01``, in
   brackets or not, with AM/PM), an ISO date and time (``2026-03-13 10:32:01``,
   ``2026-03-13T10:32:01Z``, bracketed or not) or a syslog stamp (``Mar 13 10:32:01``): a chat line
   or a log line;
3. a **message header**: a name in any case (plain and at most three words, or bold, or a
   ``@handle``) and a time,
   alone on their line (``**alice** 10:32 AM``, ``Alice Smith [10:32 AM]``, ``alice — 2026-01-05
   10:32``), as chat exports (Slack's, among others) render a message; the lines under it are its
   text;
4. a **role heading**: a markdown heading whose text is a role word, optionally after an emoji or
   before a number (``## User``, ``### Assistant``, ``## 🤖 Claude``, ``### Human (2)``), as
   transcript exports render turns;
5. a **transcript mark**: ``⏺`` (an assistant's message or tool call in Claude Code's rendering)
   and, in a note that holds at least one ``⏺``, ``> `` (the user's prompt there). Lines opening
   with ``⎿`` (a tool's output) continue the turn above.

The shapes that frame a message (4, 5, 3) take precedence: in a note with at least two role
headings only role headings open turns, else with a ``⏺`` only marks and prompts do, else with at
least two message headers only headers do; so a message's own ``No: ...`` line or a time it
quotes does not split it. Otherwise rules 1 and 2 both open turns.

A turn runs from its opener to the line before the next opener, or a heading, or a code fence;
the blank lines inside it are kept (a message may hold paragraphs) and the trailing ones dropped.
Code fences are never read for openers.

A note is **dialogue** when at least ``MIN_TURNS`` (4) turns start in it and its turns hold at
least ``MIN_SHARE`` (60%) of the body's non-blank characters. Anything else is prose. The numbers
keep a note with a few ``Note: ...`` lines, or one quoted exchange, in prose.

Standard library only; no geode imports (``passages`` imports this).
"""

from __future__ import annotations

import re

MIN_TURNS = 4
MIN_SHARE = 0.6

_ROLES = r"(?:user|assistant|human|ai|system|bot|claude|codex|gpt|model|agent|me|you)"
_NAME = r"(?:[A-ZÀ-ÖØ-Þ][\w.'-]{0,20}(?:\s[A-ZÀ-ÖØ-Þ][\w.'-]{0,20}){0,3}|@[\w.-]{1,40})"
_SPEAKER = rf"(?:{_NAME}|(?i:{_ROLES}))"
_CLOCK = r"\d{1,2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?(?:\s?[AaPp]\.?[Mm]\.?)?"
_ISO = r"\d{4}-\d{2}-\d{2}(?:[T ]\d{1,2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?)?"
_SYSLOG = r"(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)\s+\d{1,2}\s+\d{2}:\d{2}:\d{2}"
_STAMP = rf"(?:{_ISO}|{_SYSLOG}|{_CLOCK})"
_LEAD = r"^\s{0,3}(?:>\s*)?(?:[-*+]\s+)?"

_SPEAKER_LINE = re.compile(
    _LEAD + rf"(?:\[[^\]\n]{{1,30}}\]\s*)?(?:\*\*{_SPEAKER}\*\*:|\*\*{_SPEAKER}:\*\*|{_SPEAKER}:)\s+\S"
)
_STAMP_LINE = re.compile(rf"^\s{{0,3}}(?:[-*+]\s+)?(?:\[{_STAMP}\]|{_STAMP})(?=[\s\]|,;:-])(?!\s*$)")
_HNAME = r"(?:\*\*[^*\n]{1,40}\*\*|@?[^\W\d][\w.'-]{0,29}(?:\s[\w.'-]{1,30}){0,2})"  # any case: Slack's handles
_HEADER_LINE = re.compile(rf"^\s{{0,3}}{_HNAME}\s*(?:[—–-]\s*|,\s*)?(?:\[{_STAMP}\]|\(?{_STAMP}\)?)\s*$")
_ROLE_HEADING = re.compile(rf"^\s{{0,3}}#{{1,6}}\s+(?:\W{{1,3}}\s*)?(?i:{_ROLES})\b\s*(?:\(?\d+\)?)?\s*:?\s*$")
_CC_MARK = re.compile(r"^\s{0,3}⏺")
_CC_PROMPT = re.compile(r"^\s{0,3}>\s+\S")
_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+\S")
_FENCE = re.compile(r"^\s*(```|~~~)")


def opens_turn(line: str, transcript: bool = False) -> bool:
    """Whether ``line`` opens a turn by any of rules 1-5 of the module docstring (``transcript``:
    the note holds a ``⏺`` mark, so a ``> `` prompt opens one too)."""
    if _SPEAKER_LINE.match(line) or _STAMP_LINE.match(line) or _HEADER_LINE.match(line):
        return True
    if _ROLE_HEADING.match(line) or _CC_MARK.match(line):
        return True
    return transcript and bool(_CC_PROMPT.match(line))


def _opener(lines: list[str]):
    """The test a line of this note must pass to open a turn (the precedence of the docstring)."""
    outside: list[str] = []
    in_fence = False
    for x in lines:
        if _FENCE.match(x):
            in_fence = not in_fence
        elif not in_fence:
            outside.append(x)
    if sum(1 for x in outside if _ROLE_HEADING.match(x)) >= 2:
        return lambda x: bool(_ROLE_HEADING.match(x))
    if any(_CC_MARK.match(x) for x in outside):
        return lambda x: bool(_CC_MARK.match(x) or _CC_PROMPT.match(x))
    if sum(1 for x in outside if _HEADER_LINE.match(x)) >= 2:
        return lambda x: bool(_HEADER_LINE.match(x))
    return lambda x: bool(_SPEAKER_LINE.match(x) or _STAMP_LINE.match(x))


def turn_spans(lines: list[str]) -> list[tuple[int, int]]:
    """The turns of a body's ``lines``: (first, last) 0-based line of each, in order."""
    opens = _opener(lines)
    spans: list[tuple[int, int]] = []
    start: int | None = None
    last = -1  # the last non-blank line of the open turn
    in_fence = False

    def close() -> None:
        nonlocal start
        if start is not None:
            spans.append((start, max(start, last)))
        start = None

    for i, line in enumerate(lines):
        if _FENCE.match(line):
            if not in_fence:
                close()
            in_fence = not in_fence
            continue
        if in_fence:
            continue
        if opens(line):
            close()
            start, last = i, i
        elif _HEADING.match(line):
            close()
        elif start is not None and line.strip():
            last = i
    close()
    return spans


def is_dialogue(lines: list[str], spans: list[tuple[int, int]] | None = None) -> bool:
    """The module docstring's rule: at least ``MIN_TURNS`` turns holding at least ``MIN_SHARE``
    of the body's non-blank characters."""
    spans = turn_spans(lines) if spans is None else spans
    if len(spans) < MIN_TURNS:
        return False
    total = sum(len(x.strip()) for x in lines)
    inside = sum(len(lines[j].strip()) for s, e in spans for j in range(s, e + 1))
    return total > 0 and inside >= MIN_SHARE * total
