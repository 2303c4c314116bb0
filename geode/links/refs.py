"""What a note's own text says about links: the ``Ref`` type (one reference out of a note), the
references its prose makes outside any link syntax (bare paths, undefined reference-style
labels), and the anchors it offers (heading slugs, ``{#id}``, ``<a id>``, ``^block`` ids).

Apart from ``geode.links.resolver`` (which resolves references against a whole store) because all
of this reads one note and nothing else: no store, no file system.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

from geode.kernel.crystal import NOTE_SUFFIXES
from geode.kernel.note import Note

#: the shape of a file path in prose or in a code span: folders, a name, an extension (a token
#: shape, not link syntax: the links themselves come from the markdown reader)
_PATH_RE = re.compile(
    r"(?<![\w/.:~$%@-])@?((?:\.{1,2}/)*[\w][\w.+-]*(?:/[\w.+-]+)*\.[A-Za-z][A-Za-z0-9]{0,7})(?![\w/])"
)
_PUNCT_GH = re.compile(r"[^\w\- ]")
_PUNCT_PYMD = re.compile(r"[^\w\s-]")
_SEP_PYMD = re.compile(r"[-\s]+")
#: the characters Obsidian replaces when it writes a heading into a link
_OBSIDIAN_DROP = str.maketrans({c: " " for c in "#|^:%[]\\"})


@dataclass(frozen=True)
class Ref:
    """One reference out of a note. ``syntax``: relation | wiki | markdown | reference | path (a
    bare path in prose) | mention (a path in a code span) | refuse (a reference-style use
    ``[text][label]`` with no definition)."""

    line: int
    syntax: str
    target: str
    anchor: str = ""
    alias: str = ""
    relation: str = "links_to"
    raw: str = ""  # the target text as written (for rewrites)


def slug(text: str) -> str:
    """GitHub's and mdBook's heading id: lower case, punctuation dropped (letters of every script
    kept: ``Über`` -> ``über``, ``概要`` -> ``概要``), spaces to hyphens."""
    t = unicodedata.normalize("NFC", text.strip().lower())
    t = _PUNCT_GH.sub("", t)
    return t.replace(" ", "-")


def slug_pymd(text: str) -> str:
    """Python-Markdown's ``toc`` slugify, the one mkdocs uses by default: NFKD, then everything
    outside ASCII dropped (``Über`` -> ``uber``, ``概要`` -> ``""``), punctuation dropped, runs
    of spaces and hyphens to one hyphen."""
    t = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    t = _PUNCT_PYMD.sub("", t).strip().lower()
    return _SEP_PYMD.sub("-", t)


def heading_text_key(text: str) -> str:
    """How Obsidian compares a link's ``#heading`` with a heading: the text, with the characters
    it cannot hold in a link turned to spaces, whitespace collapsed, case ignored."""
    return " ".join(text.translate(_OBSIDIAN_DROP).split()).casefold()


def _unique_gh(s: str, counts: dict[str, int]) -> str:
    n = counts.get(s, 0)
    counts[s] = n + 1
    return s if n == 0 else f"{s}-{n}"


def _unique_pymd(s: str, ids: set[str]) -> str:
    """Python-Markdown's ``unique``: ``x``, ``x_1``, ``x_2``; an empty id becomes ``_1``."""
    while s in ids or not s:
        head, sep, num = s.rpartition("_")
        s = f"{head}_{int(num) + 1}" if sep and num.isdigit() else f"{s}_1"
    ids.add(s)
    return s


def path_tokens(text: str):
    """The path-shaped tokens of a run of text (a folder or a note suffix required)."""
    for pm in _PATH_RE.finditer(text):
        tok = pm.group(1).rstrip(".")
        if "/" not in tok and not tok.lower().endswith(NOTE_SUFFIXES):
            continue
        yield tok


def prose_refs(note: Note) -> list[Ref]:
    """Bare paths in prose (``path``), paths in code spans (``mention``) and reference-style
    uses with no definition (``refuse``), all from the markdown reader: nothing inside code
    blocks, HTML comments or link text."""
    out: list[Ref] = []
    r = note.reading
    for lk in r.links:
        if lk.kind == "refuse":
            out.append(Ref(lk.line, "refuse", lk.target, raw=lk.target))
    for span in r.texts:
        if "/" not in span.text and "." not in span.text:
            continue
        for tok in path_tokens(span.text):
            if "://" in tok or tok.startswith("www."):
                continue
            out.append(Ref(span.line, "path", tok, raw=tok))
    for span in r.code_spans:
        for tok in path_tokens(span.text):
            out.append(Ref(span.line, "mention", tok, raw=tok))
    out.sort(key=lambda x: x.line)
    return out


def note_anchors(note: Note, style: str = "github") -> set[str]:
    """Every anchor a link may name in ``note``, case-folded, as the store's own tool makes them:
    ``style`` github (plain, mdBook, Dendron: ``-1``, ``-2`` for repeats), pymd (mkdocs:
    Python-Markdown's toc, ``_1`` for repeats) or obsidian (the heading text). Always: ``{#id}``
    attributes, ``<a id|name>`` tags and ``^block`` ids."""
    out: set[str] = set()
    counts: dict[str, int] = {}
    ids: set[str] = set()
    r = note.reading
    for h in r.headings:
        if h.attr_id:
            out.add(h.attr_id.casefold())
            ids.add(h.attr_id)
            if style == "pymd":
                continue
        if style == "pymd":
            out.add(_unique_pymd(slug_pymd(h.text), ids).casefold())
        elif style == "obsidian":
            out.add(heading_text_key(h.text))
        else:
            out.add(_unique_gh(slug(h.text), counts))
            out.add(heading_text_key(h.text))
    out.update(a.casefold() for a in r.html_ids)
    out.update("^" + b.casefold() for b in r.block_ids)
    return out
