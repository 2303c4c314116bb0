"""Line edits that keep every byte outside the lines they change.

A note is held as ``FileLines``: its text split on ``\\n`` into (content, ending) pairs, where
the ending is ``"\\r\\n"``, ``"\\n"`` or ``""`` (the last line of a file with no final newline).
A BOM stays on the first line's content and is never touched unless that line is edited, and
even then it stays in front. Decoding valid UTF-8 and encoding it again gives the same bytes,
so a file comes back byte-exact except for the lines an edit names.

The two mechanical line edits:

- ``quote_value``: ``globs: **/*.py`` -> ``globs: "**/*.py"``, ``match: | tail, |tail`` ->
  ``match: "| tail, |tail"``, ``- **/*.py`` (a list item) -> ``- "**/*.py"``; a trailing
  `` # comment`` stays outside the quotes. The value's meaning does not change, only how it is
  written (a key's value changed is the frontmatter editor's, below).
- a line with one link target rewritten (``geode.links.relink.rewrite_line`` does the finding).

A frontmatter key set or added (``review_due`` after ``last_verified``) is not a line edit: the
Corrector asks the one frontmatter editor, ``geode.kernel.frontmatter_edit.set_key``.

And the checks an edit must pass before it may become a proposal (``check_edit``): the file
still parses as a note, its frontmatter means what it meant (plus the keys added), and its
essence reads the same once link targets are masked out.
"""

from __future__ import annotations

import difflib

_BOM = "\ufeff"


class FileLines:
    """A text as lines with their own endings; ``text()`` joins them back exactly."""

    def __init__(self, text: str):
        parts = text.split("\n")
        self.lines: list[str] = []
        self.endings: list[str] = []
        for i, part in enumerate(parts):
            last = i == len(parts) - 1
            if part.endswith("\r"):
                content, ending = part[:-1], "\r"
            else:
                content, ending = part, ""
            if not last:
                ending += "\n"
            self.lines.append(content)
            self.endings.append(ending)
        # a text ending in a newline has a last, empty "line" with no ending: text() round-trips

    def __len__(self) -> int:
        return len(self.lines)

    def get(self, lineno: int) -> str | None:
        """Content of 1-based line ``lineno`` without its ending (None when out of range)."""
        if 1 <= lineno <= len(self.lines):
            return self.lines[lineno - 1]
        return None

    def set(self, lineno: int, content: str) -> None:
        self.lines[lineno - 1] = content

    def text(self) -> str:
        return "".join(content + ending for content, ending in zip(self.lines, self.endings, strict=False))


def changed_lines(before: str, after: str) -> int:
    """How many lines an edit changes: lines replaced, removed or inserted (a replaced line
    counts once, however many characters of it changed)."""
    a = before.split("\n")
    b = after.split("\n")
    n = 0
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag != "equal":
            n += max(i2 - i1, j2 - j1)
    return n


def line_map(before: bytes, after: bytes) -> dict[int, str | None]:
    """For a pending proposal: ``{1-based line of before: its new content}`` for every line it
    changes (None when the line is removed or replaced by a different number of lines)."""
    a = before.decode("utf-8", "replace").split("\n")
    b = after.decode("utf-8", "replace").split("\n")
    out: dict[int, str | None] = {}
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag == "equal":
            continue
        if tag == "replace" and i2 - i1 == j2 - j1:
            for k in range(i2 - i1):
                out[i1 + k + 1] = b[j1 + k].rstrip("\r")
        elif tag == "insert":
            out.setdefault(max(i1, 1), None)  # an insertion touches the line it follows
            out.setdefault(i1 + 1, None)
        else:
            for k in range(i1, max(i2, i1 + 1)):
                out[k + 1] = None
    return out


# -- quoting a frontmatter value --------------------------------------------------------------
def _yaml_quote(value: str) -> str:
    if '"' not in value and "\\" not in value:
        return f'"{value}"'
    return "'" + value.replace("'", "''") + "'"


def quote_value(line: str) -> str | None:
    """``line`` (one frontmatter line, no ending) with its plain value quoted; None when the
    line is not a ``key: value`` or ``- value`` line with a plain value to quote."""
    bom = ""
    if line.startswith(_BOM):
        bom, line = _BOM, line[1:]
    indent = len(line) - len(line.lstrip(" "))
    rest = line[indent:]
    if rest.startswith("- "):
        after = rest[2:]
        lead = rest[: 2 + len(after) - len(after.lstrip(" "))]
    else:
        if rest[:1] in ("'", '"'):
            q = rest[0]
            end = rest.find(q, 1)
            if end < 0 or rest[end + 1 : end + 2] != ":":
                return None
            idx = end + 1
        else:
            idx = rest.find(": ")
            if idx < 0:
                return None
        after = rest[idx + 2 :]
        lead = rest[: idx + 2 + len(after) - len(after.lstrip(" "))]
    value_part = rest[len(lead) :]
    if not value_part or value_part[0] in "'\"[{#":
        return None
    cut = value_part.find(" #")
    value, comment = (value_part, "") if cut < 0 else (value_part[:cut], value_part[cut:])
    stripped = value.rstrip(" ")
    trailing = value[len(stripped) :]
    if not stripped:
        return None
    return bom + " " * indent + lead + _yaml_quote(stripped) + trailing + comment


# -- what an edit may not change ---------------------------------------------------------------
def mask_link_targets(text: str) -> str:
    """``text`` with every link target replaced by a placeholder: wikilinks, markdown link
    destinations, reference definitions and paths (in prose and in code spans). What is left is
    the wording. Where the targets are is the markdown reader's to say (``geode.kernel.mdread``),
    so a link in a code block or an HTML comment is wording, as it is to every reader."""
    from geode.kernel.mdread import read_markdown
    from geode.links.refs import path_tokens

    r = read_markdown(text)
    by_line: dict[int, list[str]] = {}
    wiki_lines: set[int] = set()
    for lk in r.links:
        if lk.kind in ("wiki", "embed", "relation"):
            wiki_lines.add(lk.line)
        elif lk.raw:
            by_line.setdefault(lk.line, []).append(lk.raw)
    for span in r.texts + r.code_spans:
        for tok in path_tokens(span.text):
            by_line.setdefault(span.line, []).append(tok)
    lines = text.split("\n")
    for lineno in sorted(set(by_line) | wiki_lines):
        i = lineno - 1
        if not 0 <= i < len(lines):
            continue
        line = lines[i]
        if lineno in wiki_lines:
            line = _mask_wiki(line)
        raws = set(by_line.get(lineno, ()))
        if len(raws) > 200:  # a line that is mostly links: its wording is the links' order
            line = "\u2026"
            raws = set()
        for raw in sorted(raws, key=len, reverse=True):
            line = line.replace(raw, "\u2026")
        lines[i] = line
    return "\n".join(lines)


def _mask_wiki(line: str) -> str:
    out, pos = [], 0
    while True:
        i = line.find("[[", pos)
        j = line.find("]]", i + 2) if i >= 0 else -1
        if i < 0 or j < 0:
            out.append(line[pos:])
            return "".join(out)
        out.append(line[pos : i + 2] + "\u2026")
        pos = j


def check_edit(before_text: str, after_text: str, path: str, added_keys: dict | None = None) -> str:
    """Why ``after_text`` may not replace ``before_text`` (empty when it may): it must parse as a
    note, its frontmatter must hold the same values (plus ``added_keys``), and its essence must
    read the same once link targets are masked."""
    from geode.kernel.crystal import NoteError
    from geode.kernel.note import parse_note

    try:
        before = parse_note(before_text, path)
    except NoteError as exc:
        return f"the note does not parse before the edit: {exc}"
    try:
        after = parse_note(after_text, path)
    except NoteError as exc:
        return f"the edit would break the note: {exc.message} (line {exc.line})"
    want = dict(before.frontmatter)
    want.update(added_keys or {})
    if after.frontmatter != want:
        changed = sorted(k for k in set(want) | set(after.frontmatter) if want.get(k) != after.frontmatter.get(k))
        return "the edit would change what the frontmatter means (" + ", ".join(changed) + ")"
    if (before.essence is None) != (after.essence is None):
        return "the edit would add or remove the essence markers"
    if (
        before.essence is not None
        and after.essence is not None  # both or neither: the check above
        and mask_link_targets(before.essence) != mask_link_targets(after.essence)
    ):
        return "the edit would change the essence's wording (only link targets may change)"
    if mask_link_targets(before.body) != mask_link_targets(after.body):
        return "the edit would change the body's wording (only link targets may change)"
    return ""


def unified(before_text: str, after_text: str, path: str) -> str:
    """A unified diff of one file (for the rationale and the findings a person reads)."""
    a = before_text.splitlines(keepends=True)
    b = after_text.splitlines(keepends=True)
    return "".join(difflib.unified_diff(a, b, f"a/{path}", f"b/{path}", n=0))
