"""A parsed note turned into the recall index's rows: the note row (with the text hash that
decides whether it is embedded again), its frontmatter values, tags, links and observations;
and ``passage_text``, the text that is embedded for a note.

Apart from ``geode.recall.recall_index`` because it is pure (a ``Note`` in, dicts out: no
database, no files), and the Cleaner and the vector side compute ``passage_text`` without an
index.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import time

from geode.kernel.crystal import ESSENCE_CLOSE, ESSENCE_OPEN
from geode.kernel.dates import DateError, ValidityWindow, optional_date
from geode.recall.date_terms import index_terms


def strip_markers(body: str) -> str:
    return body.replace(ESSENCE_OPEN, "").replace(ESSENCE_CLOSE, "")


def _iso(day) -> str | None:
    return day.isoformat() if day is not None else None


def recorded_day(fm: dict) -> str | None:
    """``YYYY-MM-DD`` of the first of ``recorded``/``created``/``date`` that reads as a date
    (``geode.kernel.dates``); None when none does (the caller falls back to the file's mtime).
    Stored normalised, so the SQL comparisons of ``after`` are comparisons of days."""
    for key in ("recorded", "created", "date"):
        try:
            day = optional_date(fm.get(key), key)
        except DateError:
            continue  # the lint says so (date-not-iso)
        if day is not None:
            return day.isoformat()
    return None


def passage_text(title: str, description: str, tags: list[str], body: str) -> str:
    """What is embedded for a note: title, description, tags and the body (cut by the embedder)."""
    head = "\n".join(x for x in (title, description, " ".join(tags)) if x)
    body = " ".join(strip_markers(body).split())
    return f"{head}\n{body}" if head else body


#: bumped when the passage cut changes, so every note is embedded again under the new cut
PASSAGE_SCHEME = "passages-v2"  # v2: dialogue notes cut per turn (geode.recall.dialogue)


def embed_hash(title: str, description: str, tags: list[str], body: str, body_line: int) -> str:
    """The hash that decides whether a note is embedded again: everything its passages are cut
    from (``geode.recall.passages``), their line numbers included, and the cut's version."""
    key = "\x00".join([PASSAGE_SCHEME, title, description, " ".join(tags), str(body_line), body])
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def _flatten(key: str, value, out: list) -> None:
    if isinstance(value, dict):
        for k, v in value.items():
            _flatten(f"{key}.{k}", v, out)
        return
    items = value if isinstance(value, list) else [value]
    for v in items:
        if v is None or isinstance(v, (dict, list)):
            continue
        num = None
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            num = float(v)
        else:
            try:
                num = float(str(v)) if str(v).strip() not in ("", "nan", "inf", "-inf") else None
            except ValueError:
                num = None
        sval = ("true" if v else "false") if isinstance(v, bool) else str(v)
        out.append((key, sval.lower(), num))


def note_rows(note, domain: str, root: str, mtime_ns: int, size: int) -> dict:
    """The note row and its child rows, from a parsed ``Note``."""
    fm = note.frontmatter
    tags_raw = fm.get("tags") or []
    tags = [str(t).strip().lstrip("#") for t in (tags_raw if isinstance(tags_raw, list) else str(tags_raw).split(","))]
    tags = [t for t in tags if t]
    desc = str(fm.get("description") or "")
    title = note.title
    body = strip_markers(note.body)
    try:
        sal = float(fm["salience"]) if fm.get("salience") not in (None, "") else None
        if sal is not None:
            sal = min(1.0, max(0.0, sal))
    except (TypeError, ValueError):
        sal = None
    recorded = recorded_day(fm)
    # valid_to is the last day a note holds (inclusive); a bound that is not a date is unbounded,
    # as in every other room (the lint reports it as date-not-iso)
    window = ValidityWindow.from_frontmatter(fm)
    if not recorded:
        recorded = dt.datetime.fromtimestamp(mtime_ns / 1e9, dt.UTC).date().isoformat()
    row = {
        "domain": domain,
        "root": root,
        "path": note.path,
        "permalink": note.permalink,
        "name": note.name,
        "title": title,
        "type": str(fm.get("type") or "").lower(),
        "status": note.status,
        "description": desc,
        "salience": sal,
        "tags": json.dumps(tags, ensure_ascii=False),
        "frontmatter": json.dumps(fm, ensure_ascii=False, default=str),
        "body": body,
        "body_line": note.body_line,
        "content_hash": hashlib.sha256(note.text.encode("utf-8")).hexdigest(),
        "mtime_ns": int(mtime_ns),
        "size": int(size),
        "recorded": recorded,
        "valid_from": _iso(window.valid_from),
        "valid_to": _iso(window.valid_to),
        "embed_text_hash": embed_hash(title, desc, tags, body, note.body_line),
        "indexed_at": time.time(),
        # the days it tells, relative ones resolved against its own day (not the mtime fallback
        # above: see geode.recall.date_terms), searchable by full text
        "dates": index_terms(fm, title, note.path, body),
    }
    fm_rows: list = []
    for k, v in fm.items():
        _flatten(str(k), v, fm_rows)
    links = [(lk.line, lk.kind, lk.relation, lk.target) for lk in note.links if lk.target]
    # frontmatter relations (supersedes: [name]) are typed edges too
    for key in ("supersedes", "superseded_by", "relates_to", "depends_on", "part_of"):
        val = fm.get(key)
        if val in (None, ""):
            continue
        for t in val if isinstance(val, list) else [val]:
            t = str(t).strip()
            if t.startswith("[[") and t.endswith("]]"):
                t = t[2:-2]
            if t:
                links.append((note.line_of(key), "frontmatter", key, t))
    obs = [(o.line, o.category, o.text) for o in note.observations]
    return {"row": row, "fm": fm_rows, "tags": sorted({t.lower() for t in tags}), "links": links, "obs": obs}


def passage_text_of(row) -> str:
    """``passage_text`` of an index row (``pending()`` rows and note rows alike)."""
    get = row.get if isinstance(row, dict) else (lambda k: getattr(row, k))
    return passage_text(
        get("title") or "", get("description") or "", json.loads(get("tags") or "[]"), get("body") or ""
    )
