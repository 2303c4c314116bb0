"""The lean half of note parsing: read a file safely, split frontmatter, find the essence.

The hook uses this module alone (no ``re``, no dataclasses) when it re-reads a crystal that
changed on disk, so the text it delivers is never stale. ``note.py`` builds the full note
(links, observations, headings) on top of it for the CLI and the agents.
"""

from __future__ import annotations

import os

from geode.kernel.errors import StoreError
from geode.kernel.frontmatter import FrontmatterError, NotInSubset, parse_frontmatter

try:  # the builtin module is cheap; hashlib's OpenSSL binding costs the hook ~2 ms
    from _sha256 import sha256 as _sha256
except ImportError:  # pragma: no cover - Python 3.12+ renamed it
    try:
        from _sha2 import sha256 as _sha256
    except ImportError:
        from hashlib import sha256 as _sha256

ESSENCE_OPEN = "<!-- crystal:essence -->"
ESSENCE_CLOSE = "<!-- /crystal:essence -->"
NOTE_SUFFIXES = (".md", ".mdc", ".markdown")
RETIRED_STATUSES = ("deprecated", "superseded", "archived", "legacy")
DEFAULT_MAX_BYTES = 1_000_000
#: folders that are tool state, never notes. Other dot-folders (``.cursor/rules``) hold notes:
#: the store walk and the hook's index must agree on this, or an agent sees a note the hook
#: never delivers.
SKIP_DIRS = frozenset({".git", ".hg", ".svn", ".obsidian", ".trash", ".geode", "node_modules", "__pycache__", ".venv"})


def name_is_utf8(name: str) -> bool:
    """Whether a name from the file system is UTF-8 text. Python decodes names with
    ``surrogateescape``, so a byte such as ``\\xff`` arrives as a lone surrogate that no UTF-8
    writer (SQLite, JSON, a terminal) accepts: such a name is named and skipped, never indexed."""
    if name.isascii():
        return True
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def shown_name(name: str) -> str:
    """A name as a person can read and every writer can store: its undecodable bytes as
    ``\\xNN`` (``bad\\xffname.md``)."""
    return name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def content_hash(text: str) -> str:
    """sha256 of a delivered essence (the ledger's ``content_hash``; the index keeps it too)."""
    return _sha256(text.encode("utf-8")).hexdigest()


OUTSIDE_HOOK_SUBSET = "outside-hook-subset"
"""The code of a note whose frontmatter the hook's standard-library reader declines (the full
parser reads it off the hook; ``frontmatter.FULL_PARSER``)."""


class NoteError(StoreError, ValueError):
    """A file that cannot be read as a note; ``line`` is 1-based (0 when it is the whole file)."""

    def __init__(self, path: str, line: int, code: str, message: str, severity: str = "error"):
        super().__init__(f"{path}:{line}: {message}")
        self.path = path
        self.line = line
        self.code = code
        self.message = message
        self.severity = severity


def read_text(root: str, rel: str, max_bytes: int = DEFAULT_MAX_BYTES) -> str:
    """The file's text, or ``NoteError`` (code ``skip-*``) saying exactly why not."""
    full = os.path.join(root, rel)
    try:
        if os.path.islink(full):
            target = os.path.realpath(full)
            root_real = os.path.realpath(root)
            if not (target == root_real or target.startswith(root_real + os.sep)):
                raise NoteError(
                    rel, 0, "skip-symlink-outside", f"symlink points outside the store (to {target}); skipped"
                )
            raise NoteError(
                rel,
                0,
                "skip-symlink-inside",
                f"symlink to {os.path.relpath(target, root_real)} inside the store; the target is loaded itself",
                "info",
            )
        st = os.stat(full)
        if st.st_mode & 0o170000 != 0o100000:  # a FIFO or device named x.md would block or stream forever
            raise NoteError(rel, 0, "skip-not-regular", "not a regular file (a pipe, socket or device); skipped")
        size = st.st_size
        if size > max_bytes:
            raise NoteError(
                rel, 0, "skip-too-large", f"{size:,} bytes is over the {max_bytes:,}-byte limit for a note; skipped"
            )
        with open(full, "rb") as fh:
            data = fh.read(max_bytes + 1)
    except OSError as exc:
        raise NoteError(rel, 0, "skip-unreadable", f"cannot read: {exc.strerror or exc}") from None
    nul = data.find(b"\0")  # the whole file (memchr, well under a millisecond a megabyte), not its first 8 KB
    if nul >= 0:
        raise NoteError(rel, 0, "skip-binary", f"binary file (a NUL byte at offset {nul:,}); skipped")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise NoteError(
            rel, line, "skip-not-utf8", f"not UTF-8 (byte 0x{data[exc.start]:02x} at offset {exc.start}); skipped"
        ) from None


def split_frontmatter(text: str, path: str = "") -> tuple[str | None, int, str, int]:
    """Return (frontmatter text or None, its first line, body, body's first line)."""
    if text.startswith("\ufeff"):
        text = text[1:]
    lines = text.split("\n")
    if not lines or lines[0].rstrip("\r").strip() != "---":
        return None, 0, text, 1
    for i in range(1, len(lines)):
        if lines[i].rstrip("\r").strip() in ("---", "..."):
            fm = "\n".join(ln.rstrip("\r") for ln in lines[1:i])
            return fm, 2, "\n".join(lines[i + 1 :]), i + 2
    raise NoteError(path, 1, "unclosed-frontmatter", "frontmatter opened with '---' on line 1 is never closed")


def extract_essence(body: str, body_line: int) -> tuple[str | None, int, list[tuple[int, str, str]]]:
    """The text between the essence markers; problems as (line, code, message)."""
    problems: list[tuple[int, str, str]] = []
    start = body.find(ESSENCE_OPEN)
    if start < 0:
        if ESSENCE_CLOSE in body:
            line = body_line + body[: body.find(ESSENCE_CLOSE)].count("\n")
            problems.append((line, "essence-unopened", "closing essence marker without an opening one"))
        return None, 0, problems
    line = body_line + body[:start].count("\n")
    end = body.find(ESSENCE_CLOSE, start)
    if end < 0:
        problems.append((line, "essence-unclosed", f"'{ESSENCE_OPEN}' is never closed; nothing is delivered"))
        return None, line, problems
    if body.find(ESSENCE_OPEN, end) >= 0:
        second = body_line + body[: body.find(ESSENCE_OPEN, end)].count("\n")
        problems.append((second, "essence-twice", "a second essence block is ignored; only the first is delivered"))
    essence = body[start + len(ESSENCE_OPEN) : end].replace("\r\n", "\n").strip("\n").strip()
    return essence, line, problems


class CrystalText:
    """What the hook needs of one file: frontmatter, its key lines, the essence."""

    __slots__ = (
        "path",
        "frontmatter",
        "fm_lines",
        "fm_warnings",
        "essence",
        "essence_line",
        "body",
        "body_line",
        "text",
        "has_frontmatter",
    )

    def __init__(
        self,
        path: str,
        frontmatter: dict,
        fm_lines: dict[str, int],
        fm_warnings: list[tuple[int, str, str]],
        essence: str | None,
        essence_line: int,
        body: str,
        body_line: int,
        text: str,
    ) -> None:
        self.path = path
        self.frontmatter = frontmatter
        self.fm_lines = fm_lines
        self.fm_warnings = fm_warnings
        self.essence = essence
        self.essence_line = essence_line
        self.body = body
        self.body_line = body_line
        self.text = text
        self.has_frontmatter = False


def parse_crystal_text(text: str, path: str) -> CrystalText:
    """Frontmatter and essence of one file; ``NoteError`` with the line when unreadable."""
    fm_text, fm_first, body, body_line = split_frontmatter(text, path)
    data: dict = {}
    lines: dict[str, int] = {}
    warnings: list[tuple[int, str, str]] = []
    if fm_text is not None:
        try:
            parsed = parse_frontmatter(fm_text, fm_first)
        except NotInSubset as exc:  # only where the full parser is off: the hook
            raise NoteError(path, exc.line, OUTSIDE_HOOK_SUBSET, f"frontmatter: {exc.message}") from None
        except FrontmatterError as exc:
            raise NoteError(path, exc.line, "bad-frontmatter", f"frontmatter: {exc.message}") from None
        except RecursionError:
            raise NoteError(path, fm_first, "bad-frontmatter", "frontmatter nested too deeply") from None
        data, lines, warnings = parsed.data, parsed.lines, parsed.warnings
    essence, essence_line, _problems = extract_essence(body, body_line)
    out = CrystalText(path, data, lines, warnings, essence, essence_line, body, body_line, text)
    out.has_frontmatter = fm_text is not None
    return out
