"""The days a note tells and a question names, as full-text terms (issue 26, "dates that mean dates").

Why: a chat or log note tells its events relative to its own date ("yesterday we tried Osteria
Blu", "letzte Woche"), and a question names the day ("which restaurant did I try on 14 March
2026?"). Full text alone matched the question's "march" and "2026" to titles that carry the month
(titles weigh 8x), never to the note that told the event "yesterday". So at index time each note's
relative dates are resolved against the note's own date and written, with its explicit dates, as
derived terms (``index_terms``: the ``dates`` column of the recall index, matched by full text);
at query time a question's explicit dates become the same terms (``question_dates``).

The terms (letters and digits only, so FTS5's ``unicode61`` keeps each whole; no word starts so):

- ``dt20260314``: the day 2026-03-14 (told, written, or the note's own date);
- ``dm202603``: a month the note tells something in (every told day's month, and the months a
  told week or month covers: "last week", "earlier this month", "letzten Monat");
- ``dd0314``: the day of the year without the year, for a question that names none ("March 14th").

The note's own date (``note_day``): frontmatter ``recorded``/``created``/``date`` (read by
``geode.kernel.dates``), else an ISO date in the title, else in the file name. Not the file's
mtime: a checkout, a copy or any later edit moves it, and "yesterday" resolved against the day a
file was copied is a confident wrong date, worse than none. A note without a date resolves no
relative date (its explicit dates still count).

Resolution rules (English and German; the note's day is D):

- yesterday / gestern: D-1; the day before yesterday / vorgestern: D-2; today / heute: D;
  tomorrow / morgen (not "heute morgen", "guten Morgen"): D+1; übermorgen: D+2;
- N days ago / vor N Tagen: D-N; a week ago, N weeks ago / vor N Wochen: D-7N (N a digit or a
  word up to twelve);
- last Friday / letzten Freitag: the latest Friday strictly before D (on a Friday, a week
  before); next Friday / nächsten Freitag: the first Friday strictly after D;
- last week / letzte Woche: the Monday-to-Sunday week before D's; this week / diese Woche:
  D's Monday to D; last month / letzten Monat; this month, earlier this month / diesen Monat,
  Anfang des Monats: months only (a span is never a day).

Explicit dates, in notes and questions alike: ``2026-03-14``, ``14 March 2026``, ``14th of
March``, ``March 14th, 2026``, ``14. März 2026``, ``März 2026``, month names and common
abbreviations in English and German. A day without a year takes the note's year in a note and
stays ``dd`` in a question. A bare month ("in May") is not read: "may" is a verb, and "June" alone
does not say which June. Standard library only, so any room may use it.
"""

from __future__ import annotations

import datetime as _dt
import re
from typing import NamedTuple

from geode.kernel.dates import DateError, optional_date

MONTHS = {
    "january": 1, "jan": 1, "januar": 1, "jänner": 1,
    "february": 2, "feb": 2, "februar": 2,
    "march": 3, "mar": 3, "märz": 3, "maerz": 3, "marz": 3,
    "april": 4, "apr": 4,
    "may": 5, "mai": 5,
    "june": 6, "jun": 6, "juni": 6,
    "july": 7, "jul": 7, "juli": 7,
    "august": 8, "aug": 8,
    "september": 9, "sep": 9, "sept": 9,
    "october": 10, "oct": 10, "oktober": 10, "okt": 10,
    "november": 11, "nov": 11,
    "december": 12, "dec": 12, "dezember": 12, "dez": 12,
}  # fmt: skip
WEEKDAYS = {
    "monday": 0, "montag": 0, "tuesday": 1, "dienstag": 1, "wednesday": 2, "mittwoch": 2,
    "thursday": 3, "donnerstag": 3, "friday": 4, "freitag": 4, "saturday": 5, "samstag": 5,
    "sonnabend": 5, "sunday": 6, "sonntag": 6,
}  # fmt: skip
NUMBERS = {
    "one": 1, "a": 1, "an": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
    "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "einem": 1, "einer": 1,
    "zwei": 2, "drei": 3, "vier": 4, "fünf": 5, "sechs": 6, "sieben": 7, "acht": 8, "neun": 9,
    "zehn": 10, "elf": 11, "zwölf": 12,
}  # fmt: skip

#: a word that may be a month (checked against ``MONTHS`` after the match: one alternation of
#: 40 names tried at every word cost 0.5 ms a note of 4,000 characters)
_WORD = r"[a-zäA-ZÄ]{3,9}"
_WD = "|".join(sorted(WEEKDAYS, key=len, reverse=True))
_NUM = r"\d{1,2}|" + "|".join(sorted(NUMBERS, key=len, reverse=True))
_ORD = r"(?:st|nd|rd|th)?"
_F = re.IGNORECASE

#: explicit dates, tried in this order; a span taken by one is not read again by a later one
_EXPLICIT = [
    ("ymd", re.compile(r"(?<![\d-])(\d{4})-(\d{2})-(\d{2})(?![\d])")),
    # 14 March 2026, 14th of March, 14. März 2026
    ("dmy", re.compile(rf"\b(\d{{1,2}})(?:{_ORD}|\.)\s*(?:of\s+)?({_WORD})\b\.?(?:,?\s+(\d{{4}})\b)?", _F)),
    # March 14th, 2026; March 14
    ("mdy", re.compile(rf"\b({_WORD})\.?\s+(\d{{1,2}}){_ORD}\b(?![:.,]?\d)(?:,?\s+(\d{{4}})\b)?", _F)),
    # March 2026
    ("my", re.compile(rf"\b({_WORD})\.?\s+(\d{{4}})\b", _F)),
]

#: relative dates (resolved against the note's day only)
_RELATIVE = [
    ("d-2", re.compile(r"\b(?:the\s+)?day\s+before\s+yesterday\b|\bvorgestern\b", _F)),
    ("d+2", re.compile(r"\b(?:the\s+)?day\s+after\s+tomorrow\b|\bübermorgen\b", _F)),
    ("d-1", re.compile(r"\byesterday\b|\bgestern\b|\blast\s+night\b", _F)),
    # German "morgen" in lower case only: "Morgen" is the morning ("heute Morgen", "guten Morgen")
    ("d+1", re.compile(r"\btomorrow\b|(?-i:(?<!heute )(?<!gestern )\bmorgen\b)", _F)),
    ("d0", re.compile(r"\btoday\b|\bheute\b|\bthis\s+morning\b|\bthis\s+afternoon\b|\btonight\b", _F)),
    ("ago", re.compile(rf"\b({_NUM})\s+(days?|weeks?)\s+ago\b", _F)),
    ("vor", re.compile(rf"\bvor\s+({_NUM})\s+(tag(?:en)?|woche(?:n)?)\b", _F)),
    ("lastwd", re.compile(rf"\b(?:last|letzten|letzte|letztem|vergangenen|vergangene)\s+({_WD})\b", _F)),
    ("nextwd", re.compile(rf"\b(?:next|nächsten|nächste|kommenden|kommende)\s+({_WD})\b", _F)),
    ("lastweek", re.compile(r"\blast\s+week\b|\b(?:letzte|vergangene|letzten|vergangenen)\s+woche\b", _F)),
    ("thisweek", re.compile(r"\bthis\s+week\b|\b(?:diese|dieser|diesen)\s+woche\b", _F)),
    ("lastmonth", re.compile(r"\blast\s+month\b|\b(?:letzten|vergangenen|letzte)\s+monat\b", _F)),
    (
        "thismonth",
        re.compile(
            r"\b(?:earlier\s+)?this\s+month\b|\bdiesen\s+monat\b|\banfang\s+(?:des|dieses)\s+monats\b|"
            r"\bim\s+laufe\s+des\s+monats\b",
            _F,
        ),
    ),
]

#: whole words one of which each pattern needs (lower case): a pattern none of whose words the
#: text holds is not run. index_terms runs on every note; all the patterns over every text cost
#: about 1.5 ms a note of 4,000 characters, one pass to list the words about 0.1 ms
_WEEKDAY_WORDS = tuple(WEEKDAYS)
_HINTS = {
    "dmy": tuple(MONTHS),
    "mdy": tuple(MONTHS),
    "my": tuple(MONTHS),
    "d-2": ("yesterday", "vorgestern"),
    "d+2": ("tomorrow", "übermorgen"),
    "d-1": ("yesterday", "gestern", "night"),
    "d+1": ("tomorrow", "morgen"),
    "d0": ("today", "heute", "morning", "afternoon", "tonight"),
    "ago": ("ago",),
    "vor": ("vor",),
    "lastwd": _WEEKDAY_WORDS,
    "nextwd": _WEEKDAY_WORDS,
    "lastweek": ("week", "woche"),
    "thisweek": ("week", "woche"),
    "lastmonth": ("month", "monat"),
    "thismonth": ("month", "monat", "monats"),
}
_WORDS = re.compile(r"[a-zäöüß]+")


def _words(text: str) -> frozenset[str]:
    return frozenset(_WORDS.findall(text.lower()))


def _may_match(kind: str, words: frozenset[str]) -> bool:
    hints = _HINTS.get(kind)
    return hints is None or not words.isdisjoint(hints)


_ISO_IN_TEXT = re.compile(r"(?<!\d)(\d{4})-(\d{2})-(\d{2})(?!\d)")


class Told(NamedTuple):
    """One date found in a text: where (``start``, ``end``), and what: a ``day``, or a span of
    days (``first``..``last``, inclusive) when only the span is told; ``year_known`` is False for
    a day written without its year (``dd`` only, unless a note's year completes it)."""

    start: int
    end: int
    first: _dt.date | None
    last: _dt.date | None
    month: int = 0
    day: int = 0
    year_known: bool = True

    @property
    def is_day(self) -> bool:
        return self.first is not None and self.first == self.last


def day_token(d: _dt.date) -> str:
    return f"dt{d.year:04d}{d.month:02d}{d.day:02d}"


def month_token(year: int, month: int) -> str:
    return f"dm{year:04d}{month:02d}"


def monthday_token(month: int, day: int) -> str:
    return f"dd{month:02d}{day:02d}"


def _day(y: int, m: int, d: int) -> _dt.date | None:
    try:
        return _dt.date(y, m, d)
    except ValueError:  # 31 February, month 13
        return None


def _month_span(y: int, m: int) -> tuple[_dt.date, _dt.date]:
    first = _dt.date(y, m, 1)
    nxt = _dt.date(y + (m == 12), m % 12 + 1, 1)
    return first, nxt - _dt.timedelta(days=1)


def note_day(frontmatter, title: str = "", path: str = "") -> _dt.date | None:
    """The day a note was written, which its relative dates mean: ``recorded``/``created``/
    ``date`` in the frontmatter, else an ISO date in the title, else in the file's name; None
    when there is none (see the module docstring for why the mtime is not one)."""
    get = frontmatter.get if hasattr(frontmatter, "get") else (lambda _k: None)
    for key in ("recorded", "created", "date"):
        try:
            d = optional_date(get(key), key)
        except DateError:
            continue
        if d is not None:
            return d
    for text in (title or "", (path or "").rsplit("/", 1)[-1]):
        m = _ISO_IN_TEXT.search(text)
        if m:
            d = _day(int(m.group(1)), int(m.group(2)), int(m.group(3)))
            if d is not None:
                return d
    return None


def explicit_dates(text: str) -> list[Told]:
    """The dates ``text`` writes out (not relative ones), in order of appearance."""
    taken: list[tuple[int, int]] = []
    out: list[Told] = []

    def free(a: int, b: int) -> bool:
        return all(b <= s or a >= e for s, e in taken)

    words = _words(text)
    for kind, rx in _EXPLICIT:
        if not _may_match(kind, words):
            continue
        for m in rx.finditer(text):
            if not free(m.start(), m.end()):
                continue
            if kind != "ymd" and (m.group(2) if kind == "dmy" else m.group(1)).lower() not in MONTHS:
                continue
            if kind == "ymd":
                y, mo, d = int(m.group(1)), int(m.group(2)), int(m.group(3))
            elif kind == "dmy":
                d, mo = int(m.group(1)), MONTHS[m.group(2).lower()]
                y = int(m.group(3)) if m.group(3) else 0
            elif kind == "mdy":
                mo, d = MONTHS[m.group(1).lower()], int(m.group(2))
                y = int(m.group(3)) if m.group(3) else 0
            else:
                mo, y = MONTHS[m.group(1).lower()], int(m.group(2))
                if not 1900 <= y <= 2200:
                    continue
                first, last = _month_span(y, mo)
                taken.append((m.start(), m.end()))
                out.append(Told(m.start(), m.end(), first, last, mo, 0, True))
                continue
            if kind == "mdy" and m.group(1).lower() == "may" and not m.group(3):
                continue  # "may 12 people": the verb, unless a year says it is the month
            if y:
                day = _day(y, mo, d)
                if day is None:
                    continue
                told = Told(m.start(), m.end(), day, day, mo, d, True)
            else:
                if _day(2000, mo, d) is None:  # a leap year: 29 February stands
                    continue
                told = Told(m.start(), m.end(), None, None, mo, d, False)
            taken.append((m.start(), m.end()))
            out.append(told)
    out.sort(key=lambda t: t.start)
    return out


def _count(word: str) -> int | None:
    w = word.lower()
    return int(w) if w.isdigit() else NUMBERS.get(w)


def relative_dates(text: str, anchor: _dt.date | None) -> list[Told]:
    """The relative dates of ``text`` resolved against ``anchor`` (the note's day); [] without one."""
    if anchor is None:
        return []
    taken: list[tuple[int, int]] = []
    out: list[Told] = []
    one = _dt.timedelta(days=1)
    monday = anchor - _dt.timedelta(days=anchor.weekday())
    words = _words(text)
    for kind, rx in _RELATIVE:
        if not _may_match(kind, words):
            continue
        for m in rx.finditer(text):
            if any(not (m.end() <= s or m.start() >= e) for s, e in taken):
                continue
            first = last = None
            if kind[0] == "d" and kind[1:] in ("-2", "+2", "-1", "+1", "0"):
                first = last = anchor + int(kind[1:]) * one
            elif kind in ("ago", "vor"):
                n = _count(m.group(1))
                if n is None or n <= 0 or n > 366:
                    continue
                unit = m.group(2).lower()
                first = last = anchor - (n * (7 if unit.startswith("w") else 1)) * one
            elif kind in ("lastwd", "nextwd"):
                wd = WEEKDAYS[m.group(1).lower()]
                if kind == "lastwd":
                    back = (anchor.weekday() - wd) % 7 or 7
                    first = last = anchor - back * one
                else:
                    ahead = (wd - anchor.weekday()) % 7 or 7
                    first = last = anchor + ahead * one
            elif kind == "lastweek":
                first, last = monday - 7 * one, monday - one
            elif kind == "thisweek":
                first, last = monday, anchor
            elif kind == "lastmonth":
                prev = anchor.replace(day=1) - one
                first, last = _month_span(prev.year, prev.month)
            elif kind == "thismonth":
                first, last = anchor.replace(day=1), anchor
            if first is None or last is None:
                continue
            taken.append((m.start(), m.end()))
            out.append(Told(m.start(), m.end(), first, last, first.month, first.day, True))
    out.sort(key=lambda t: t.start)
    return out


def _tokens_of(told: Told, anchor: _dt.date | None) -> list[str]:
    if not told.year_known:
        toks = [monthday_token(told.month, told.day)]
        if anchor is not None:
            day = _day(anchor.year, told.month, told.day)
            if day is not None:
                toks += [day_token(day), month_token(day.year, day.month)]
        return toks
    assert told.first is not None and told.last is not None
    if told.is_day:
        d = told.first
        return [day_token(d), month_token(d.year, d.month), monthday_token(d.month, d.day)]
    toks = []
    y, mo = told.first.year, told.first.month
    while (y, mo) <= (told.last.year, told.last.month):
        toks.append(month_token(y, mo))
        y, mo = (y + 1, 1) if mo == 12 else (y, mo + 1)
    return toks


def index_terms(frontmatter, title: str, path: str, body: str) -> str:
    """The ``dates`` text of a note: the terms of its own day, of every relative date in its
    title and body resolved against that day, and of every explicit date it writes; each once,
    in order. Empty for a note that tells no date at all."""
    anchor = note_day(frontmatter, title, path)
    text = f"{title}\n{body}"
    told = relative_dates(text, anchor) + explicit_dates(text)
    toks: list[str] = []
    if anchor is not None:
        toks += _tokens_of(Told(0, 0, anchor, anchor, anchor.month, anchor.day), anchor)
    for t in told:
        toks += _tokens_of(t, anchor)
    return " ".join(dict.fromkeys(toks))


class QuestionDate(NamedTuple):
    """An explicit date a question names: the span of its words and the term that stands for it."""

    start: int
    end: int
    term: str


def question_dates(question: str) -> list[QuestionDate]:
    """The explicit dates of a question as the terms ``index_terms`` writes: a day (``dt``), a
    month (``dm``), a day without its year (``dd``). Relative words in a question ("yesterday")
    are not read: the question's own day is not the notes' day."""
    out = []
    for t in explicit_dates(question):
        if not t.year_known:
            term = monthday_token(t.month, t.day)
        elif t.is_day:
            assert t.first is not None
            term = day_token(t.first)
        else:
            assert t.first is not None
            term = month_token(t.first.year, t.first.month)
        out.append(QuestionDate(t.start, t.end, term))
    return out


def with_question_dates(question: str, terms_of, held) -> list[str] | None:
    """The query words of ``question`` with each explicit date it names replaced by its date
    term, where some note holds that term (``held(term)``); None when none is held (the words
    stand as they are). ``terms_of(text)`` makes the query words (``query_terms``).

    Why replace and not add: "march" and "2026" left in the query would keep ranking the notes
    whose title carries the month (weight 8) above the note that tells the day; the date term
    already stands for them, and a note that writes the date out holds it too."""
    dates = [d for d in question_dates(question) if held(d.term)]
    if not dates:
        return None
    rest, at = [], 0
    for d in dates:
        rest.append(question[at : d.start])
        at = d.end
    rest.append(question[at:])
    words = terms_of(" ".join(rest))
    return list(dict.fromkeys([*words, *(d.term for d in dates)]))


#: what a note that holds none of the question's date terms keeps of its score when some note
#: does hold one (``date_prior``); chosen on the ``dates`` train set (bench/RECALL.md, Round 6b:
#: 0.1 at ``semantic_weight`` 0.6; 0.05 once the semantic weight became 0.75 with the turn
#: passages, where 0.1 left hybrid one question below text)
DATE_MISS_WEIGHT = 0.05

_DATE_TERM = re.compile(r"d[tmd][0-9]{4,8}")


def is_date_term(term: str) -> bool:
    """Whether a query unit is one of the day terms ``question_dates`` makes."""
    return _DATE_TERM.fullmatch(term) is not None


def date_prior(scored: list, terms: list[str], weight: float | None = None) -> list:
    """``scored`` (``(score, row, lexical, semantic)``, best first) with the notes that hold none
    of the question's date terms scaled by ``weight`` (``DATE_MISS_WEIGHT``), best first again;
    unchanged when the question names no date some note holds.

    Why a prior and not only a term: the semantic side cannot read a calendar. "Which film did I
    watch on February 4, 2026?" lies closest, by meaning, to "Films to watch for February 2026",
    and a chat session that told the film "yesterday" on 5 February stands below the semantic
    background; the day the question names is a constraint only the derived terms know. A note
    is scaled, never dropped: one that answers by its words alone can still rank."""
    w = DATE_MISS_WEIGHT if weight is None else weight
    wanted = [t for t in terms if is_date_term(t)]
    if not wanted or w >= 1.0:
        return scored
    out = []
    for s, row, a, b in scored:
        held = set((row.get("dates") or "").split())
        out.append((s if any(t in held for t in wanted) else s * w, row, a, b))
    out.sort(key=lambda t: (-t[0], t[1]["path"]))
    return out
