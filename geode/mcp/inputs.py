"""The MCP tools' inputs as the agent gives them, checked: the error they raise, and the
arguments ``search`` and ``recent_activity`` share (text or lists of text, dates, ``where``).

Apart so that every tool module reads its arguments the same way and raises the one error the
server turns into a tool error the agent can act on.
"""

from geode.kernel.errors import UsageError


class ToolInputError(UsageError, ValueError):
    """Bad input to a tool; the message tells the agent what to change (a tool error, never a
    crashed server; ``geode mcp --host`` raises it too, a usage error with status 2)."""


def strs(value, name: str) -> list[str] | None:
    """A string or a list of strings -> a list (None when empty)."""
    if value is None or value == "" or value == []:
        return None
    items = [value] if isinstance(value, str) else list(value)
    out = []
    for v in items:
        if not isinstance(v, str) or not v.strip():
            raise ToolInputError(f"{name}: expected text or a list of text, got {v!r}")
        out.append(v.strip())
    return out


def check_date(name: str, value: str | None) -> str | None:
    """A date argument as ``YYYY-MM-DD`` (geode's one reading of dates, ``geode.kernel.dates``)."""
    from geode.kernel.dates import DateError, optional_date

    try:
        day = optional_date(value, name)
    except DateError as exc:
        raise ToolInputError(str(exc)) from None
    return day.isoformat() if day is not None else None


def parse_where_input(where) -> dict | None:
    """``where`` as the agent gives it: ``"key=value"`` expressions (a string or a list of them,
    the mini-language of ``geode search --where``), or a JSON filter object (``--filter``)."""
    from geode.services.filters import parse_where

    if where is None or where == "" or where == [] or where == {}:
        return None
    if isinstance(where, dict):
        return dict(where)
    items = [where] if isinstance(where, str) else list(where)
    out: dict = {}
    for item in items:
        if not isinstance(item, str):
            raise ToolInputError(f"where: expected text like 'key=value' or a JSON object, got {item!r}")
        s = item.strip()
        try:
            part = parse_where([], s) if s.startswith("{") else parse_where([s], None)
        except ValueError as exc:
            msg = str(exc).replace("--where ", "").replace("--filter", "the JSON filter")
            msg = msg[len(repr(s)) + 2 :] if msg.startswith(repr(s) + ": ") else msg
            raise ToolInputError(
                f"where {item!r}: {msg}. Forms: key=value, key=[a,b] (any of), key~value (a list holds it), "
                'key>=value, key<value, key!=value, or a JSON object such as {"tags": {"$contains_any": ["a", "b"]}}'
            ) from None
        out.update(part)
    return out


#: The most characters a short argument may hold (an address, a query, a period, a domain, a
#: type, a tag, a status, a ``where`` expression, a title, a folder, an essence). A real one is
#: tens of characters; a megabyte one went into a LIKE pattern and an error log whole (issue 22).
MAX_TEXT_CHARS = 4096
#: The most items a list argument may hold (domains, types, tags, statuses, ``where`` parts).
MAX_ITEMS = 100
#: The most characters a structured argument may hold once written as JSON (``where`` as an
#: object, ``write_note``'s ``frontmatter`` and ``crystal``).
MAX_JSON_CHARS = 16_384


def clip(text: str, keep: int = 200) -> str:
    """``text`` cut to ``keep`` characters with its length said: what an error (or a log) may
    echo of an argument, never the whole of a long one."""
    text = str(text)
    if len(text) <= keep:
        return text
    return f"{text[:keep]}... ({len(text):,} characters in all)"


def bounded(name: str, value, limit: int = MAX_TEXT_CHARS):
    """``value`` unchanged when it is within the bounds, else a :class:`ToolInputError` naming
    the argument and its size, raised before any query. Text: at most ``limit`` characters; a
    list: at most ``MAX_ITEMS`` items of text within ``limit``; a dict: at most
    ``MAX_JSON_CHARS`` as JSON."""
    if value is None:
        return value
    if isinstance(value, str):
        if len(value) > limit:
            raise ToolInputError(
                f"{name}: {len(value):,} characters, more than the {limit:,} this tool accepts "
                f"(it begins {value[:60]!r})"
            )
        return value
    if isinstance(value, dict):
        import json

        size = len(json.dumps(value, ensure_ascii=False, default=str))
        if size > MAX_JSON_CHARS:
            raise ToolInputError(f"{name}: {size:,} characters as JSON, more than the {MAX_JSON_CHARS:,} accepted")
        return value
    if isinstance(value, (list, tuple)):
        if len(value) > MAX_ITEMS:
            raise ToolInputError(f"{name}: {len(value):,} items, more than the {MAX_ITEMS} accepted")
        for i, v in enumerate(value):
            bounded(f"{name}[{i}]", v, limit)
        return value
    return value
