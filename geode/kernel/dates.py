"""Dates in notes: one reading, one meaning, for every room.

Why one module: before it, search, the Cleaner, the Corrector and the lint each had their own
``_date``; ``valid_to`` was inclusive in one and exclusive in the others, and a date written
``2024-6-1`` was compared as text (it sorted after ``2024-12-31``). Now every room parses with
``parse_date`` and judges validity with ``ValidityWindow``, so one note is judged the same way
everywhere, on every day, the boundary days included. Standard library only.

What ``parse_date`` accepts (strict):

- a ``datetime.date`` (what a YAML reader gives for ``2024-06-01``): itself;
- a ``datetime.datetime`` (a YAML timestamp): its calendar day as written (no time-zone shift);
- a string (surrounding spaces ignored) of the form ``YYYY-MM-DD`` with ASCII digits and a real
  calendar day, optionally followed by ``T`` or a space and an ISO time
  (``2024-06-01T10:00:00Z``, ``2024-06-01 10:00+02:00``): its date part.

Everything else is a ``DateError`` naming the field and the value: ``2024-6-1`` (not
zero-padded), ``20240601``, ``2024-W22-6``, ``01/06/2024``, ``2024-02-30``, ``notadate``,
numbers, booleans, lists, an empty value. Nothing is guessed: a date that cannot be read is
never compared as text. ``optional_date`` reads an absent or empty value as ``None``.

Validity (``ValidityWindow``): ``valid_from`` is the first day a note holds and ``valid_to`` the
LAST day it holds, both inclusive; an absent bound is unbounded. So a note with
``valid_to: 2024-12-31`` applies on 2024-12-31 and no longer on 2025-01-01.
"""

from __future__ import annotations

import datetime as _dt
import re

from geode.kernel.errors import GeodeError

#: frontmatter fields read as dates (the lint checks each is written ``YYYY-MM-DD``)
DATE_FIELDS = ("valid_from", "valid_to", "last_verified", "review_due", "recorded", "created", "date")
#: those of them that name a day (a time part there is a mistake)
DAY_FIELDS = ("valid_from", "valid_to", "last_verified", "review_due")

_ISO_DAY = re.compile(r"([0-9]{4})-([0-9]{2})-([0-9]{2})")
_TIME_SEP = ("T", "t", " ")


class DateError(GeodeError, ValueError):
    """A value that is not a date this module accepts; names the field and the value."""

    def __init__(self, field: str, value, reason: str = ""):
        self.field = field
        self.value = value
        self.reason = reason or "not a date (YYYY-MM-DD)"
        super().__init__(f"{field} {value!r}: {self.reason}")


def parse_date(value, field: str = "date") -> _dt.date:
    """``value`` as a ``datetime.date``, strictly (see the module docstring); ``DateError``
    naming ``field`` and the value otherwise."""
    if isinstance(value, _dt.datetime):
        return value.date()
    if isinstance(value, _dt.date):
        return value
    if not isinstance(value, str):
        raise DateError(field, value, f"a {type(value).__name__}, not a date (YYYY-MM-DD)")
    text = value.strip()
    m = _ISO_DAY.match(text)
    if m is None:
        raise DateError(field, value)
    try:
        day = _dt.date(int(m.group(1)), int(m.group(2)), int(m.group(3)))
    except ValueError as exc:  # 2024-02-30, 2024-13-01
        raise DateError(field, value, f"no such day ({exc})") from None
    rest = text[m.end() :]
    if rest:
        if rest[0] not in _TIME_SEP:
            raise DateError(field, value)
        try:
            _dt.datetime.fromisoformat(text[: m.end()] + "T" + rest[1:])
        except ValueError:
            raise DateError(field, value, "not a date (YYYY-MM-DD) or an ISO date and time") from None
    return day


def optional_date(value, field: str = "date") -> _dt.date | None:
    """``None`` for an absent or empty value (``None``, ``""``, only spaces), else ``parse_date``."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    return parse_date(value, field)


def is_iso_day(value) -> bool:
    """Whether ``value`` is written exactly as ``YYYY-MM-DD`` (or is a date object): the form
    the lint asks for. A timestamp string parses but is not this form."""
    if isinstance(value, _dt.date):
        return True
    return isinstance(value, str) and _ISO_DAY.fullmatch(value.strip()) is not None and _readable(value)


def _readable(value) -> bool:
    try:
        parse_date(value)
        return True
    except DateError:
        return False


def iso(value, field: str = "date") -> str:
    """``YYYY-MM-DD`` of whatever ``parse_date`` accepts."""
    return parse_date(value, field).isoformat()


def day_of(value, field: str = "date") -> _dt.date:
    """A day given by a caller (a flag, a query, ``today``): a date, or text ``parse_date`` reads."""
    return parse_date(value, field)


class ValidityWindow:
    """The days a note holds: ``valid_from`` through ``valid_to``, BOTH INCLUSIVE (``valid_to``
    is the last day it holds); ``None`` is unbounded on that side.

    ``problems``: the ``DateError`` of each bound that could not be read by ``from_frontmatter``
    (that bound is then unbounded, as if absent; the lint reports it as ``date-not-iso``).
    A plain class, not a dataclass: every room imports it, the lean ones too."""

    __slots__ = ("valid_from", "valid_to", "problems")

    def __init__(self, valid_from: _dt.date | None = None, valid_to: _dt.date | None = None, problems: tuple = ()):
        self.valid_from = optional_date(valid_from, "valid_from")
        self.valid_to = optional_date(valid_to, "valid_to")
        self.problems: tuple[DateError, ...] = tuple(problems)

    @classmethod
    def from_frontmatter(cls, fm, strict: bool = False) -> ValidityWindow:
        """The window of a note's frontmatter (a mapping). A bound that cannot be read is
        unbounded and recorded in ``problems``; with ``strict`` it raises the ``DateError``."""
        bounds: dict = {}
        problems = []
        get = fm.get if hasattr(fm, "get") else (lambda _k: None)
        for key in ("valid_from", "valid_to"):
            try:
                bounds[key] = optional_date(get(key), key)
            except DateError as exc:
                if strict:
                    raise
                bounds[key] = None
                problems.append(exc)
        return cls(bounds["valid_from"], bounds["valid_to"], tuple(problems))

    # -- judging one day -----------------------------------------------------------------
    def contains(self, day) -> bool:
        """Whether the note holds on ``day`` (a date or ISO text): ``valid_from <= day <= valid_to``."""
        d = day_of(day)
        return (self.valid_from is None or self.valid_from <= d) and (self.valid_to is None or d <= self.valid_to)

    def closed_before(self, day) -> bool:
        """Whether its last day is before ``day``: it no longer holds on ``day`` or after (it
        records what held). False on ``valid_to`` itself."""
        return self.valid_to is not None and self.valid_to < day_of(day)

    def opens_after(self, day) -> bool:
        """Whether its first day is after ``day``: it does not hold yet on ``day``."""
        return self.valid_from is not None and self.valid_from > day_of(day)

    def overlaps(self, other: ValidityWindow) -> bool:
        """Whether some day lies in both windows (a shared boundary day counts)."""
        return (self.valid_from is None or other.valid_to is None or self.valid_from <= other.valid_to) and (
            other.valid_from is None or self.valid_to is None or other.valid_from <= self.valid_to
        )

    @property
    def empty(self) -> bool:
        """``valid_to`` before ``valid_from``: no day at all."""
        return self.valid_from is not None and self.valid_to is not None and self.valid_to < self.valid_from

    # -- plumbing ------------------------------------------------------------------------
    def __eq__(self, other) -> bool:
        if not isinstance(other, ValidityWindow):
            return NotImplemented
        return (self.valid_from, self.valid_to) == (other.valid_from, other.valid_to)

    def __hash__(self) -> int:
        return hash((self.valid_from, self.valid_to))

    def __repr__(self) -> str:
        f = self.valid_from.isoformat() if self.valid_from else "-inf"
        t = self.valid_to.isoformat() if self.valid_to else "+inf"
        return f"ValidityWindow({f} .. {t}, inclusive)"


def date_problems(fm) -> list[DateError]:
    """A ``DateError`` for each field of ``DATE_FIELDS`` in the frontmatter mapping ``fm`` whose
    value is present but not written ``YYYY-MM-DD``; its message says what geode makes of it. A
    timestamp is accepted in ``recorded``/``created``/``date`` (those may carry a time), not in
    the day fields (``valid_from``, ``valid_to``, ``last_verified``, ``review_due``)."""
    out = []
    for key in DATE_FIELDS:
        if key not in fm:
            continue
        value = fm.get(key)
        try:
            day = optional_date(value, key)
        except DateError as exc:
            out.append(
                DateError(key, value, f"{exc.reason}; every room reads it as absent until it is written YYYY-MM-DD")
            )
            continue
        if day is not None and key in DAY_FIELDS and not is_iso_day(value):
            out.append(DateError(key, value, f"a day, not a time: write {day.isoformat()} (read as that day)"))
    return out


def argparse_date(text: str) -> str:
    """``type=`` for a command-line date flag: the day as ``YYYY-MM-DD``; a usage error naming
    the value otherwise (argparse adds the flag: ``argument --as-of: 'notadate' is not ...``)."""
    try:
        return parse_date(text).isoformat()
    except DateError:
        import argparse

        raise argparse.ArgumentTypeError(f"{text!r} is not a date (YYYY-MM-DD)") from None
