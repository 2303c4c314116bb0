"""What a folder's notes share by design (its template), and what each note is about (its subject).

Why: reference pages of sibling functions, alert runbooks and per-library rule files are written
from one template; they share most of their words on purpose and differ in their subject. A
text-overlap test alone calls ``encode`` and ``decode`` one truth twice. So near-duplicate
detection (``geode.cleaner.duplicates``) first learns each folder's template and compares only
what is left, and two notes must also name the same subject.

- **Template lines.** In a folder of at least ``TEMPLATE_MIN_NOTES`` notes, a line (stripped,
  lower-cased, runs of space made one) held by at least ``TEMPLATE_SHARE`` of the folder's notes
  is the template's: its headings, its boilerplate sentences. ``residual`` is a note's body
  without them.
- **Subject words.** The words of a note's title, its file name and the frontmatter keys that
  name it (``name``, ``title``, ``subject``, ``aliases``): split at punctuation and camelCase,
  lower-cased, a plain suffix (-ing, -ed, -s) taken off, stop words dropped, and the words most
  of the folder's notes carry in their names (``rules``, ``runbook``: the template's) dropped.
- **Subject agreement.** The Jaccard index of two notes' subject words is at least
  ``SUBJECT_MIN``; a note with no subject word left is never judged a duplicate (nothing to agree on).
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

TEMPLATE_MIN_NOTES = 4
TEMPLATE_SHARE = 0.5
SUBJECT_MIN = 0.5
#: frontmatter keys that name the note (its subject), besides the title and the file name
NAME_KEYS = ("name", "title", "subject", "aliases")

_SPACE = re.compile(r"\s+")
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_WORD = re.compile(r"[^\W_]+")
_SUFFIX = re.compile(r"\.(md|mdc|markdown)$", re.IGNORECASE)
STOP = frozenset(
    "a an the of on in to for and or with by at from is are be this that these those it its as "
    "into over under about md mdc".split()
)


def line_key(line: str) -> str:
    return _SPACE.sub(" ", line.strip().lower())


def _stem_word(w: str) -> str:
    if len(w) > 5 and w.endswith("ing"):
        return w[:-3]
    if len(w) > 4 and w.endswith("ed"):
        return w[:-2]
    if len(w) > 4 and w.endswith("ies"):
        return w[:-3] + "y"
    if len(w) > 3 and w.endswith("s") and not w.endswith("ss"):
        return w[:-1]
    return w


def words(text: str) -> set[str]:
    """Subject words of a piece of a name: camelCase and punctuation split, suffixes off."""
    out = set()
    for part in _WORD.findall(_CAMEL.sub(" ", str(text))):
        w = part.lower()
        if len(w) < 2 or w in STOP:
            continue
        out.add(_stem_word(w))
    return out


def name_words(note) -> set[str]:
    """Every subject word of the note, before the folder's common ones are dropped."""
    out = words(_SUFFIX.sub("", note.path.rsplit("/", 1)[-1]))
    out |= words(note.title or "")
    fm = note.frontmatter
    for key in NAME_KEYS:
        v = fm.get(key)
        for item in v if isinstance(v, list) else [v]:
            if isinstance(item, (str, int, float)) and str(item).strip():
                out |= words(str(item))
    return out


@dataclass
class Template:
    """One folder's template: its shared lines and the name words most of its notes carry."""

    notes: int = 0
    lines: frozenset[str] = frozenset()
    common_words: frozenset[str] = frozenset()


def learn(folders: dict[str, list]) -> dict[str, Template]:
    """``{folder: Template}`` for ``folders`` (``{folder: [note, ...]}``)."""
    out: dict[str, Template] = {}
    for folder, notes in folders.items():
        t = Template(notes=len(notes))
        if len(notes) >= TEMPLATE_MIN_NOTES:
            lines: Counter = Counter()
            names: Counter = Counter()
            for n in notes:
                lines.update({k for k in (line_key(x) for x in n.body.split("\n")) if k})
                names.update(name_words(n))
            need = TEMPLATE_SHARE * len(notes)
            t.lines = frozenset(k for k, c in lines.items() if c >= need)
            t.common_words = frozenset(w for w, c in names.items() if c >= need)
        out[folder] = t
    return out


def residual(note, template: Template) -> str:
    """The note's body without the template's lines."""
    if not template.lines:
        return note.body
    return "\n".join(x for x in note.body.split("\n") if line_key(x) not in template.lines)


def subject(note, template: Template) -> frozenset[str]:
    return frozenset(name_words(note) - template.common_words)


def subject_agreement(a: frozenset[str], b: frozenset[str]) -> float:
    """Jaccard index of two subject-word sets; 0 when either is empty."""
    if not a or not b:
        return 0.0
    return len(a & b) / len(a | b)
