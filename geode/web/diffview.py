"""A proposal's diff as data a page can draw: files, hunks, lines, and the changed words marked.

``geode.queue.review.diff`` gives the unified text a terminal prints; a reviewer in a
browser wants the same changes side by side or unified, with the words that changed inside a
changed line marked, so that a one-word edit in a long paragraph is seen at once. The hunks
come from :mod:`difflib` over the exact bytes stored with the proposal (the ones that will be
applied), three lines of context, like ``git diff``.

Shape of one file (``file_diffs``)::

    {"path", "old_path" (a rename's source, else null), "op": create|delete|modify|rename,
     "binary": bool, "added": int, "removed": int, "truncated": bool,
     "hunks": [{"header": "@@ -a,b +c,d @@",
                "lines": [{"t": " "|"-"|"+", "old": int|null, "new": int|null,
                           "seg": [[text, marked], ...], "noeol": bool}]}]}

``marked`` is true for the words of a changed line that differ from its counterpart (a word is a
run of letters and digits, with ``-``, ``.`` or ``'`` inside it: ``exit-code-old`` is one word,
as a note's name reads); a line
with no counterpart (a pure insertion or deletion) has one unmarked segment: the whole line is
the change.
"""

from __future__ import annotations

import difflib
import re

CONTEXT = 3
#: Beyond this many lines on either side a file's hunks are cut (a note is far smaller).
MAX_LINES = 20000
#: Two lines are paired for word marks only when they are at least this similar.
PAIR_RATIO = 0.3
_TOKEN = re.compile(r"\w+(?:[-.']\w+)*|\s+|[^\w\s]", re.UNICODE)


def _lines(data: bytes | None) -> list[str]:
    if not data:
        return []
    return data.decode("utf-8", errors="replace").splitlines(keepends=True)


def _is_binary(data: bytes | None) -> bool:
    return data is not None and b"\x00" in data[:8192]


def _strip(line: str) -> tuple[str, bool]:
    """The line without its end of line, and whether it had none (the file's last line)."""
    if line.endswith("\r\n"):
        return line[:-2], False
    if line.endswith(("\n", "\r")):
        return line[:-1], False
    return line, True


def word_segments(a: str, b: str) -> tuple[list, list]:
    """``(segments of a, segments of b)``: each ``[text, marked]``, the differing words marked."""
    ta, tb = _TOKEN.findall(a), _TOKEN.findall(b)
    sm = difflib.SequenceMatcher(None, ta, tb, autojunk=False)
    sa: list = []
    sb: list = []

    def add(out: list, text: str, marked: bool) -> None:
        if not text:
            return
        if out and out[-1][1] == marked:
            out[-1][0] += text
        else:
            out.append([text, marked])

    for op, i1, i2, j1, j2 in sm.get_opcodes():
        add(sa, "".join(ta[i1:i2]), op != "equal")
        add(sb, "".join(tb[j1:j2]), op != "equal")
    # whitespace-only marks between two unchanged words read as noise: unmark them
    for segs in (sa, sb):
        for s in segs:
            if s[1] and not s[0].strip():
                s[1] = False
    return _merge(sa), _merge(sb)


def _merge(segs: list) -> list:
    out: list = []
    for text, marked in segs:
        if out and out[-1][1] == marked:
            out[-1][0] += text
        else:
            out.append([text, marked])
    return out


def _line(t: str, old: int | None, new: int | None, raw: str, seg: list | None = None) -> dict:
    text, noeol = _strip(raw)
    return {"t": t, "old": old, "new": new, "seg": seg if seg is not None else [[text, False]], "noeol": noeol}


def hunks(before: bytes | None, after: bytes | None, context: int = CONTEXT) -> tuple[list[dict], int, int, bool]:
    """``(hunks, added, removed, truncated)`` between two byte strings."""
    a, b = _lines(before), _lines(after)
    truncated = False
    if len(a) > MAX_LINES or len(b) > MAX_LINES:
        a, b, truncated = a[:MAX_LINES], b[:MAX_LINES], True
    sm = difflib.SequenceMatcher(None, a, b, autojunk=False)
    out: list[dict] = []
    added = removed = 0
    for group in sm.get_grouped_opcodes(context):
        lines: list[dict] = []
        first, last = group[0], group[-1]
        a0, a1, b0, b1 = first[1], last[2], first[3], last[4]
        for op, i1, i2, j1, j2 in group:
            if op == "equal":
                for k in range(i2 - i1):
                    lines.append(_line(" ", i1 + k + 1, j1 + k + 1, a[i1 + k]))
                continue
            dels, adds = a[i1:i2], b[j1:j2]
            removed += len(dels)
            added += len(adds)
            dseg: list = [None] * len(dels)
            aseg: list = [None] * len(adds)
            if op == "replace":
                for k in range(min(len(dels), len(adds))):
                    x, y = _strip(dels[k])[0], _strip(adds[k])[0]
                    if difflib.SequenceMatcher(None, x, y, autojunk=False).ratio() >= PAIR_RATIO:
                        dseg[k], aseg[k] = word_segments(x, y)
            for k, raw in enumerate(dels):
                lines.append(_line("-", i1 + k + 1, None, raw, dseg[k]))
            for k, raw in enumerate(adds):
                lines.append(_line("+", None, j1 + k + 1, raw, aseg[k]))
        header = f"@@ -{a0 + 1 if a1 > a0 else a0},{a1 - a0} +{b0 + 1 if b1 > b0 else b0},{b1 - b0} @@"
        out.append({"header": header, "lines": lines})
    return out, added, removed, truncated


def _file(path: str, old_path: str | None, op: str, before: bytes | None, after: bytes | None) -> dict:
    f: dict = {
        "path": path,
        "old_path": old_path,
        "op": op,
        "binary": False,
        "added": 0,
        "removed": 0,
        "truncated": False,
        "hunks": [],
    }
    if _is_binary(before) or _is_binary(after):
        f["binary"] = True
        return f
    f["hunks"], f["added"], f["removed"], f["truncated"] = hunks(before, after)
    return f


def _b(value) -> bytes | None:
    return None if value is None else bytes(value)


def file_diffs(kind: str, changes: list) -> list[dict]:
    """The files of a proposal (change rows from ``geode.queue.proposals.load``), a move or
    archive shown as one rename with the content diff, as ``queue_review.diff`` does."""
    creates = [c for c in changes if c["before_sha"] is None]
    removes = [c for c in changes if c["after_sha"] is None]
    out: list[dict] = []
    paired: set[int] = set()
    if kind in ("move", "archive") and len(creates) == 1 and len(removes) == 1:
        src, dst = removes[0], creates[0]
        paired = {src["seq"], dst["seq"]}
        out.append(_file(dst["path"], src["path"], "rename", _b(src["before"]), _b(dst["after"])))
    for c in changes:
        if c["seq"] in paired:
            continue
        op = "create" if c["before_sha"] is None else "delete" if c["after_sha"] is None else "modify"
        out.append(_file(c["path"], None, op, _b(c["before"]), _b(c["after"])))
    return out


def split_rows(lines: list[dict]) -> list[tuple[dict | None, dict | None]]:
    """Side-by-side rows: context on both sides, a run of removals beside the run of additions
    that follows it, line by line."""
    rows: list[tuple[dict | None, dict | None]] = []
    i = 0
    while i < len(lines):
        ln = lines[i]
        if ln["t"] == " ":
            rows.append((ln, ln))
            i += 1
            continue
        dels, adds = [], []
        while i < len(lines) and lines[i]["t"] == "-":
            dels.append(lines[i])
            i += 1
        while i < len(lines) and lines[i]["t"] == "+":
            adds.append(lines[i])
            i += 1
        for k in range(max(len(dels), len(adds))):
            rows.append((dels[k] if k < len(dels) else None, adds[k] if k < len(adds) else None))
    return rows
