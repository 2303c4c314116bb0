"""A note cut into passages, the units that are embedded: cut on the note's own structure.

Why: an embedding model reads a few hundred tokens, and one vector for a 5,000-character meeting
log says what the log is about, not what was said in its ninth paragraph. Cutting on the note's
structure keeps each passage one thing (a section, a paragraph, a speaker's turn, a list item),
so a question about that one thing meets a vector about it.

The rule (``cut``):

1. The body is read as **blocks**. A block ends at a blank line, and a new block starts at a
   heading (``# ...``), a list item (``- ``, ``* ``, ``+ ``, ``1. ``), a dialogue turn (a line
   that opens with a speaker's name and a colon: ``Anna: ...``, ``**Anna**: ...``,
   ``[10:02] Anna: ...``) and at a fenced code block's fence.
2. Blocks are packed in order into passages of at most ``size`` characters (default 700). A
   heading always opens a new passage (a section never shares a passage with the one before), and
   every passage remembers the last heading above it, which is embedded with it.
3. **Overlap**: a new passage starts with the last blocks of the previous one, as many as fit in
   ``overlap`` characters (default 150), so a fact told across two turns is whole in one passage.
4. A block longer than ``size`` is cut at sentence ends (else at spaces) into pieces of at most
   ``size`` characters, consecutive pieces sharing up to ``overlap`` characters.
5. A note whose body fits in ``size`` is **one passage**.

**Dialogue and logs** (``geode.recall.dialogue`` says which notes are: speaker turns, chat
exports, transcripts, timestamped lines) are cut on their turns instead, whatever their length:
every turn is a unit (a turn longer than ``size`` is cut as in 4), and a passage is a window of
``TURN_WINDOW`` consecutive units of one section (at most ``size`` characters), the next window
starting ``TURN_STEP`` units later. By default (1 and 1) every turn is a passage of its own, so a
remark is no longer embedded with seven unrelated ones (a window of two turns, each turn with the
next, was measured worse on both long training sets: bench/RECALL.md, Round 6a). Headings open sections as above and are embedded with every window
under them; text between turns that is no turn (an attendee list, a paragraph before the first
turn) is a unit of its own. Every other note keeps rules 1-5 exactly.

Every passage carries its number (0, 1, ...), its first and last **file** line (the body's first
line is ``body_line``), the text to embed (title and section heading above the passage's own
text) and the sha256 of that text, so a passage whose text did not change is never embedded
again (``geode.recall.vectors``).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from geode.recall.dialogue import is_dialogue, turn_spans

PASSAGE_CHARS = 700
OVERLAP_CHARS = 150
#: a dialogue note's passage: this many consecutive turns, the next one this many turns later
#: (chosen on the training sets, bench/RECALL.md "Round 6a"; a change must bump
#: ``note_rows.PASSAGE_SCHEME``, so the notes are cut and embedded again)
TURN_WINDOW = 1
TURN_STEP = 1

_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+\S")
_LIST = re.compile(r"^\s*(?:[-*+]|\d{1,3}[.)])\s+\S")
# a speaker's turn: "Anna:", "**Anna**:", "Dr. Lee:", "[10:02] Anna:", "- 14:05 Anna:"
_TURN = re.compile(r"^\s*(?:\[[^\]]{1,20}\]\s*)?(?:\*\*)?[A-ZÀ-ÖØ-Þ][\w.' -]{0,30}(?:\*\*)?:\s+\S")
_FENCE = re.compile(r"^\s*(```|~~~)")
_SENTENCE_END = re.compile(r"(?<=[.!?…])\s+")


@dataclass(frozen=True)
class Passage:
    """One embedded unit of a note. ``line_start``/``line_end`` are file lines (1-based)."""

    n: int
    line_start: int
    line_end: int
    text: str  # the passage's own text, as in the file (markers stripped)
    heading: str  # the last heading above it ("" when none)
    embed_text: str  # what is embedded: title, heading, text
    hash: str  # sha256 of embed_text


@dataclass
class _Block:
    start: int  # 0-based body line
    end: int
    text: str
    heading: bool = False


def _blocks(lines: list[str]) -> list[_Block]:
    out: list[_Block] = []
    cur: list[str] = []
    start = 0
    in_fence = False

    def close(end: int) -> None:
        nonlocal cur
        if cur and any(x.strip() for x in cur):
            out.append(_Block(start, end, "\n".join(cur).strip(), bool(_HEADING.match(cur[0])) and not in_fence))
        cur = []

    for i, line in enumerate(lines):
        if _FENCE.match(line):
            if not in_fence:
                close(i - 1)
                start = i
                cur = [line]
                in_fence = True
                continue
            cur.append(line)
            in_fence = False
            close(i)
            continue
        if in_fence:
            cur.append(line)
            continue
        if not line.strip():
            close(i - 1)
            continue
        if cur and (_HEADING.match(line) or _LIST.match(line) or _TURN.match(line) or _HEADING.match(cur[0])):
            close(i - 1)
        if not cur:
            start = i
        cur.append(line)
    close(len(lines) - 1)
    return out


def _split_long(b: _Block, size: int, overlap: int) -> list[_Block]:
    """A block longer than ``size``: pieces of at most ``size`` characters cut at sentence ends
    (else spaces), consecutive pieces sharing up to ``overlap`` characters; line spans follow."""
    text = b.text
    # sentence spans over the block's text
    spans: list[tuple[int, int]] = []
    pos = 0
    for m in _SENTENCE_END.finditer(text):
        spans.append((pos, m.start()))
        pos = m.end()
    spans.append((pos, len(text)))
    units: list[tuple[int, int]] = []
    for s, e in spans:  # a sentence longer than size: cut at spaces
        while e - s > size:
            cut = text.rfind(" ", s, s + size)
            cut = cut if cut > s else s + size
            units.append((s, cut))
            s = cut + 1 if cut < len(text) and text[cut] == " " else cut
        if e > s:
            units.append((s, e))
    pieces: list[tuple[int, int]] = []
    i = 0
    while i < len(units):
        s = units[i][0]
        j = i
        while j + 1 < len(units) and units[j + 1][1] - s <= size:
            j += 1
        pieces.append((s, units[j][1]))
        if j + 1 >= len(units):
            break
        k = j  # overlap: back up over whole units that fit in ``overlap``
        while k > i and units[j][1] - units[k][0] <= overlap:
            k -= 1
        nxt = k + 1 if k < j and units[j][1] - units[k + 1][0] <= overlap else j + 1
        i = max(nxt, i + 1)
    out = []
    for s, e in pieces:
        ls = b.start + text.count("\n", 0, s)
        le = b.start + text.count("\n", 0, e)
        out.append(_Block(ls, max(ls, min(le, b.end)), text[s:e].strip()))
    return out


def _dialogue_blocks(lines: list[str], spans: list[tuple[int, int]]) -> list[_Block]:
    """A dialogue body's units: each turn one block; the text between turns as ``_blocks``
    reads it (headings, lists, paragraphs)."""
    out: list[_Block] = []
    pos = 0

    def between(a: int, b: int) -> None:
        for x in _blocks(lines[a:b]):
            out.append(_Block(x.start + a, x.end + a, x.text, x.heading))

    for s, e in spans:
        if s > pos:
            between(pos, s)
        out.append(_Block(s, e, "\n".join(lines[s : e + 1]).strip()))
        pos = e + 1
    if pos < len(lines):
        between(pos, len(lines))
    return out


def _turn_windows(blocks: list[_Block], size: int, window: int, step: int) -> list[tuple[str, list[_Block]]]:
    """(heading above, units) of each window: ``window`` consecutive units of one section, at most
    ``size`` characters (one unit always), the next window ``step`` units later; a heading opens a
    section and is carried as the heading of the windows under it."""
    window, step = max(1, window), max(1, step)
    groups: list[tuple[str, list[_Block]]] = []
    heading = ""
    sec: list[_Block] = []

    def flush() -> None:
        i = 0
        while i < len(sec):
            take = [sec[i]]
            length = len(sec[i].text)
            j = i + 1
            while j < len(sec) and len(take) < window and length + 1 + len(sec[j].text) <= size:
                take.append(sec[j])
                length += 1 + len(sec[j].text)
                j += 1
            groups.append((heading, take))
            if j >= len(sec):
                break
            i += min(step, len(take))
        sec.clear()

    for b in blocks:
        if b.heading:
            flush()
            heading = " ".join(b.text.lstrip("# ").split())
            continue
        sec.append(b)
    flush()
    return groups


def cut(
    body: str,
    body_line: int = 1,
    title: str = "",
    size: int = PASSAGE_CHARS,
    overlap: int = OVERLAP_CHARS,
    lead: str = "",
) -> list[Passage]:
    """The passages of a note's body (see the module docstring for the rule).

    ``title`` opens every passage's embedded text; ``lead`` (description and tags) opens the
    first passage's only, so a short note embeds what it always embedded.
    """
    if size < 50:
        raise ValueError(f"passage size {size}: at least 50 characters")
    overlap = max(0, min(overlap, size // 2))
    lines = body.split("\n")
    spans = turn_spans(lines)
    dialogue = is_dialogue(lines, spans)
    blocks: list[_Block] = []
    for b in _dialogue_blocks(lines, spans) if dialogue else _blocks(lines):
        blocks.extend(_split_long(b, size, overlap) if len(b.text) > size else [b])
    groups: list[tuple[str, list[_Block]]] = []  # (heading above, blocks)
    if dialogue:
        groups = _turn_windows(blocks, size, TURN_WINDOW, TURN_STEP)
        blocks = []  # the windows replace the packing below
    heading = ""
    cur: list[_Block] = []
    cur_heading = ""
    length = 0
    for b in blocks:
        starts_section = b.heading
        only_heading = bool(cur) and all(x.heading for x in cur)  # a heading stays with its text
        if cur and not (only_heading and not starts_section) and (starts_section or length + len(b.text) + 1 > size):
            groups.append((cur_heading, cur))
            carry: list[_Block] = []
            if not starts_section:  # overlap never crosses into a new section
                got = 0
                for prev in reversed(cur):
                    if prev.heading or got + len(prev.text) > overlap:
                        break
                    carry.insert(0, prev)
                    got += len(prev.text) + 1
                if len(carry) == len(cur):  # never a passage that only repeats the last one
                    carry = carry[1:]
            cur, length = carry, sum(len(x.text) + 1 for x in carry)
            cur_heading = heading
        if b.heading:
            heading = " ".join(b.text.lstrip("# ").split())
            cur_heading = heading
        if not cur:
            cur_heading = heading
        cur.append(b)
        length += len(b.text) + 1
    if cur:
        groups.append((cur_heading, cur))
    return _passages(groups, body_line, title, lead)


def _passages(groups: list[tuple[str, list[_Block]]], body_line: int, title: str, lead: str) -> list[Passage]:
    out: list[Passage] = []
    for n, (head, bs) in enumerate(groups):
        own = "\n".join(x.text for x in bs)
        parts = [title] if title else []
        if n == 0 and lead:
            parts.append(lead)
        if head and not (bs and bs[0].heading):
            parts.append(head)
        parts.append(" ".join(own.split()))
        embed_text = "\n".join(p for p in parts if p)
        out.append(
            Passage(
                n=n,
                line_start=body_line + bs[0].start,
                line_end=body_line + max(x.end for x in bs),
                text=own,
                heading=head,
                embed_text=embed_text,
                hash=hashlib.sha256(embed_text.encode("utf-8")).hexdigest(),
            )
        )
    if not out:  # an empty body: one passage of the title and lead, so the note still has a vector
        embed_text = "\n".join(p for p in (title, lead) if p)
        out.append(
            Passage(0, body_line, body_line, "", "", embed_text, hashlib.sha256(embed_text.encode()).hexdigest())
        )
    return out


def passages_of(row, size: int = PASSAGE_CHARS, overlap: int = OVERLAP_CHARS) -> list[Passage]:
    """The passages of an index row (``pending()`` rows and note rows alike)."""
    import json

    from geode.recall.note_rows import strip_markers

    get = row.get if isinstance(row, dict) else (lambda k: getattr(row, k))
    tags = json.loads(get("tags") or "[]")
    lead = "\n".join(x for x in (get("description") or "", " ".join(tags)) if x)
    return cut(
        strip_markers(get("body") or ""),
        int(get("body_line") or 1),
        title=get("title") or "",
        size=size,
        overlap=overlap,
        lead=lead,
    )
