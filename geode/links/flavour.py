"""Which tool a store was written for, read from the store itself, and what that tool means by
a link: where a wikilink resolves, how a heading becomes an anchor, what a path in backticks is
relative to.

Detection looks only at files the tool itself writes or requires: ``.obsidian/`` (Obsidian),
``dendron.yml`` (Dendron, at the store or its workspace above), ``mkdocs.yml`` (mkdocs, at the
store or up to two folders above: ``docs/`` under the project), ``book.toml`` or ``SUMMARY.md``
(mdBook), ``.mdc`` rules (Cursor), ``SKILL.md`` (Claude skills), and notes whose frontmatter
carries ``permalink`` with typed relations in the body (basic-memory). A vault copied out of its
Dendron workspace (no ``dendron.yml``) is still Dendron when half its notes carry Dendron's ``id``
and ``title`` and half have dotted names, the hierarchy the Cleaner's caps also read. Anything
else is plain markdown. ``[upkeep] flavour`` in the configuration overrides it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

FLAVOURS = (
    "obsidian",
    "obsidian-publish",
    "dendron",
    "mkdocs",
    "mdbook",
    "cursor",
    "skills",
    "basic-memory",
    "logseq",
    "foam",
    "hugo",
    "folder-notes",
    "plain",
)

#: how each flavour's tool makes a heading's id (see ``geode.links.refs.note_anchors``)
SLUG_STYLE = {
    "obsidian": "obsidian",
    "obsidian-publish": "obsidian",
    "logseq": "github",
    "foam": "github",
    "hugo": "github",  # Hugo's autoHeadingIDType "github" (its default)
    "folder-notes": "github",
    "dendron": "github",
    "mkdocs": "pymd",
    "mdbook": "github",
    "cursor": "github",
    "skills": "github",
    "basic-memory": "github",
    "plain": "github",
}


@dataclass(frozen=True)
class Flavour:
    name: str
    evidence: str  # what it was detected from, in words (or "configured")
    #: how sure the detection is: high (a file the tool itself writes), medium (the notes' own
    #: shapes), none (no tool found: read conservatively), configured
    confidence: str = "high"

    @property
    def said(self) -> str:
        """How the report states it: ``logseq (logseq/config.edn at the store; confidence high)``."""
        if self.confidence == "configured":
            return f"{self.name} ({self.evidence})"
        return f"{self.name} ({self.evidence}; confidence {self.confidence})"

    @property
    def slug_style(self) -> str:
        return SLUG_STYLE[self.name]

    @property
    def checks_mentions(self) -> bool:
        """Whether a path in backticks has a defined base: a skill's root (skills), the
        workspace (Cursor rules). Elsewhere a mention is counted, never judged."""
        return self.name in ("skills", "cursor")


def found_above(root: str, name: str, levels: int) -> str:
    cur = os.path.realpath(root)
    for _ in range(levels + 1):
        if os.path.exists(os.path.join(cur, name)):
            return cur
        parent = os.path.dirname(cur)
        if parent == cur:
            break
        cur = parent
    return ""


def detect(root: str, notes: list, files: set[str], configured: str | None = None) -> Flavour:
    """The store's flavour (``notes``: the loaded notes; ``files``: every file, root-relative)."""
    if configured:
        if configured not in FLAVOURS:
            raise ValueError(f"[upkeep] flavour = {configured!r}: not one of {', '.join(FLAVOURS)}")
        return Flavour(configured, "configured", "configured")
    if os.path.isdir(os.path.join(root, ".obsidian")):
        if {"publish.css", "publish.js"} & files or any("publish" in x.frontmatter for x in notes):
            return Flavour("obsidian-publish", ".obsidian/ with publish.css/publish.js or publish: in a note")
        return Flavour("obsidian", ".obsidian/ at the store")
    where = found_above(root, "logseq/config.edn", 1)
    if where:
        return Flavour(
            "logseq", "logseq/config.edn " + ("at the store" if where == os.path.realpath(root) else "above it")
        )
    for name in ("hugo.toml", "hugo.yaml", "hugo.json"):
        where = found_above(root, name, 1)
        if where:
            return Flavour("hugo", f"{name} " + ("at the store" if where == os.path.realpath(root) else "above it"))
    if os.path.isdir(os.path.join(root, ".foam")) or _foam_workspace(root):
        return Flavour("foam", ".foam/ or Foam recommended in .vscode/extensions.json")
    where = found_above(root, "dendron.yml", 1)
    if where:
        return Flavour("dendron", "dendron.yml " + ("at the store" if where == os.path.realpath(root) else "above it"))
    where = found_above(root, "mkdocs.yml", 2)
    if where:
        return Flavour("mkdocs", "mkdocs.yml " + ("at the store" if where == os.path.realpath(root) else "above it"))
    if {"book.toml", "SUMMARY.md", "src/SUMMARY.md"} & files:
        return Flavour("mdbook", "book.toml or SUMMARY.md")
    n = len(notes) or 1
    logseq = _logseq_notes(notes, files)
    if logseq:
        return Flavour("logseq", logseq, "medium")
    mdc = sum(1 for x in notes if x.path.endswith(".mdc"))
    if mdc * 2 >= n and mdc:
        return Flavour("cursor", f"{mdc} of {len(notes)} notes are .mdc rules")
    skills = sum(1 for f in files if f == "SKILL.md" or f.endswith("/SKILL.md"))
    if skills:
        return Flavour("skills", f"{skills} SKILL.md file(s)")
    dendron = _dendron_notes(notes)
    if dendron:
        return Flavour("dendron", dendron)
    perma = sum(1 for x in notes if x.frontmatter.get("permalink"))
    if perma and any("publish" in x.frontmatter for x in notes if x.frontmatter.get("permalink")):
        # Obsidian Publish's permalink: the page's URL, beside its publish: key (basic-memory
        # writes neither publish: nor reads permalink so)
        return Flavour("obsidian-publish", f"{perma} note(s) carry permalink: beside publish:", "medium")
    if perma * 2 >= n and perma and any(x.reading.relation_lines for x in notes if x.frontmatter.get("permalink")):
        return Flavour("basic-memory", f"{perma} of {len(notes)} notes carry a permalink, with typed relations")
    folder = _folder_notes(notes)
    if folder:
        return Flavour("folder-notes", folder, "medium")
    return Flavour(
        "plain",
        "unknown kind: no tool's own files found; read conservatively, only what plain CommonMark defines",
        "none",
    )


def _foam_workspace(root: str) -> bool:
    """A VS Code workspace that recommends Foam (``.vscode/extensions.json`` naming foam-vscode)."""
    for base in (root, os.path.dirname(os.path.realpath(root))):
        p = os.path.join(base, ".vscode", "extensions.json")
        try:
            with open(p, encoding="utf-8") as fh:
                if "foam.foam-vscode" in fh.read():
                    return True
        except OSError:
            continue
    return False


def _logseq_notes(notes: list, files: set[str]) -> str:
    """A graph copied without ``logseq/``: ``pages/`` or ``journals/`` holding half the notes."""
    n = len(notes)
    inside = sum(1 for x in notes if x.path.startswith(("pages/", "journals/")))
    if n and inside * 2 >= n and any(x.path.startswith("journals/") for x in notes):
        return f"no logseq/config.edn, but {inside} of {n} notes are under pages/ and journals/"
    return ""


def _folder_notes(notes: list) -> str:
    """Folder-per-note (every note a README.md or index.md in a folder named by its id): three
    or more such notes, and half the store's notes or more."""
    n = len(notes)
    inner = sum(1 for x in notes if "/" in x.path and x.path.rsplit("/", 1)[1].lower() in ("readme.md", "index.md"))
    if inner >= 3 and inner * 2 >= n:
        return f"{inner} of {n} notes are a README.md or index.md in a folder of their own"
    return ""


def _dendron_notes(notes: list) -> str:
    """Why a store without ``dendron.yml`` is a Dendron vault ("" when it is not): Dendron
    writes ``id`` and ``title`` into every note's frontmatter and names notes by their dotted
    hierarchy (``lang.python.async.md``); a vault copied out of its workspace keeps both. Half
    the notes or more must carry both keys and half or more have a dotted name, so a store
    that merely uses ``title`` or a few dotted file names stays plain."""
    n = len(notes)
    if not n:
        return ""
    fm = sum(1 for x in notes if "id" in x.frontmatter and "title" in x.frontmatter)
    dotted = sum(1 for x in notes if "." in x.path.rsplit("/", 1)[-1].rsplit(".", 1)[0])
    if fm * 2 >= n and dotted * 2 >= n and dotted:
        return f"no dendron.yml, but {fm} of {n} notes carry Dendron's id and title and {dotted} have dotted names"
    return ""


def skill_root(path: str, files: set[str]) -> str:
    """The folder of the nearest ``SKILL.md`` at or above the note's folder ("" for the store
    root); None-like "" also when there is none (then the store root is the base)."""
    parts = path.split("/")[:-1]
    while parts:
        cand = "/".join(parts)
        if cand + "/SKILL.md" in files:
            return cand
        parts.pop()
    return ""


def dendron_target(target: str) -> str:
    """``dendron://vault/note.name`` -> ``note.name`` (the vault part is the workspace's)."""
    if target.lower().startswith("dendron://"):
        rest = target[len("dendron://") :]
        return rest.split("/", 1)[1] if "/" in rest else ""
    return target


def range_start(anchor: str) -> tuple[str, str]:
    """A Dendron note reference's range ``summary,1:#*`` -> (``summary``, ``*``): the heading
    (or ``^block``) it starts at and where it ends (``*``: the end of the note)."""
    start, _sep, end = anchor.partition(":")
    start = start.split(",", 1)[0].strip()
    end = end.strip().lstrip("#").split(",", 1)[0].strip()
    return start, end
