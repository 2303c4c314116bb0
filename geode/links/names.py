"""How notes and link targets are named and compared: a name reduced for loose matching
(case, separators, suffix and folders ignored), a path without its note suffix, the file
extensions a wikilink embeds rather than links, and which notes are signposts (an index or
README that lists other notes).

Apart from resolution (``geode.links.resolver``) because agents that never resolve a link use
them too: the Cleaner compares titles loosely and skips signposts.
"""

from __future__ import annotations

import re
import unicodedata

from geode.kernel.crystal import NOTE_SUFFIXES
from geode.kernel.note import Note

HTML_SUFFIXES = (".html", ".htm")
#: extensions a wikilink names when it embeds a file rather than a note (Obsidian attachments)
ATTACHMENT_EXTS = frozenset(
    {
        "png",
        "jpg",
        "jpeg",
        "gif",
        "svg",
        "webp",
        "bmp",
        "pdf",
        "mp3",
        "mp4",
        "webm",
        "wav",
        "ogg",
        "m4a",
        "mov",
        "csv",
        "xlsx",
        "docx",
        "pptx",
        "zip",
        "canvas",
        "excalidraw",
        "txt",
        "json",
    }
)
SIGNPOST_STEMS = frozenset({"readme", "index", "_index", "summary", "moc", "contents", "toc", "home"})


def loose(text: str) -> str:
    """A name reduced for matching: case, separators, suffix and folders ignored."""
    t = text.strip().rsplit("/", 1)[-1]
    for suf in NOTE_SUFFIXES + HTML_SUFFIXES:
        if t.lower().endswith(suf):
            t = t[: -len(suf)]
            break
    t = unicodedata.normalize("NFC", t).casefold()
    return re.sub(r"[\s_\-.]+", "-", t).strip("-")


def strip_suffix(path: str) -> str:
    low = path.lower()
    for suf in NOTE_SUFFIXES:
        if low.endswith(suf):
            return path[: -len(suf)]
    return path


def is_signpost(note: Note) -> bool:
    """An index or README note that lists other notes."""
    t = str(note.frontmatter.get("type") or "").lower()
    return t in ("index", "signpost", "moc", "toc") or note.stem.lower() in SIGNPOST_STEMS
