"""What the page shows where the terminal would print a machine's form: a time as "3 hours ago"
(the exact ISO time on hover and in ``datetime``), and an action's detail as a small table of
what it holds instead of its raw JSON.

Rendered on the server, so the page reads the same with scripts off; the markup is built with
``markupsafe.escape`` around every value, so a detail that holds markup stays text.
"""

from __future__ import annotations

import datetime as dt
import json

from markupsafe import Markup, escape

#: (seconds in the unit, its name): the largest that fits is said
UNITS = (
    (365 * 86400, "year"),
    (30 * 86400, "month"),
    (7 * 86400, "week"),
    (86400, "day"),
    (3600, "hour"),
    (60, "minute"),
)


def ago_text(when: dt.datetime, now: dt.datetime) -> str:
    """``when`` as a person says it against ``now``: "just now", "3 hours ago", "in 2 days"."""
    secs = (now - when).total_seconds()
    future, secs = secs < 0, abs(secs)
    if secs < 45:
        return "just now"
    size, unit = next(((s, u) for s, u in UNITS if secs >= s), UNITS[-1])
    n = max(1, int(secs // size))
    said = f"{n} {unit}{'' if n == 1 else 's'}"
    return f"in {said}" if future else f"{said} ago"


def when(iso_time: str | None, now: dt.datetime | None = None) -> Markup:
    """A ``<time>`` element: the human form as its text, the ISO time as ``datetime`` and
    ``title``. A value that is not an ISO time is shown as it is (never an error on a page)."""
    if not iso_time:
        return Markup("")
    text = str(iso_time)
    try:
        parsed = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return Markup(escape(text))
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=dt.UTC)
    said = ago_text(parsed, now or dt.datetime.now(dt.UTC))
    return Markup('<time datetime="{0}" title="{0}">{1}</time>').format(text, said)


def _flat(value: object, prefix: str = "") -> list[tuple[str, str]]:
    if isinstance(value, dict):
        rows: list[tuple[str, str]] = []
        for k, v in value.items():
            rows += _flat(v, f"{prefix}{k}." if isinstance(v, dict) and v else f"{prefix}{k}")
        return rows
    if isinstance(value, list):
        shown = ", ".join(v if isinstance(v, str) else json.dumps(v, ensure_ascii=False) for v in value)
        return [(prefix.rstrip("."), shown or "none")]
    if value is None or value == "":
        return [(prefix.rstrip("."), "none")]
    return [(prefix.rstrip("."), str(value))]


def detail_table(detail: object) -> Markup:
    """An action's detail (a dict, or JSON text of one) as rows of what and value; nested keys
    read ``a.b``. Anything that is not a dict is one row of its text."""
    if isinstance(detail, str):
        try:
            detail = json.loads(detail)
        except ValueError:
            return Markup(escape(detail))
    if not detail:
        return Markup("")
    if not isinstance(detail, dict):
        return Markup(escape(str(detail)))
    rows = Markup("").join(
        Markup("<tr><th>{}</th><td>{}</td></tr>").format(k.replace("_", " "), v) for k, v in _flat(detail)
    )
    return Markup('<table class="detail">{}</table>').format(rows)
