"""What some flavours' tools read beyond CommonMark and wikilinks, and how they resolve it:
Logseq's ``((uuid))`` block references (against the graph's ``id:: uuid`` lines) and its
namespaced page files (``a/b`` is ``a___b.md``, or ``a%2Fb.md`` in older graphs), Hugo's
``{{< ref >}}``/``{{< relref >}}`` shortcodes, site URLs (``/docs/install/``), ``aliases`` and
definition-term ids, the render hook that rewrites link forms, and mkdocs' pymdownx snippet
includes (``--8<-- "file"``, resolved from the ``base_path`` mkdocs.yml names).

Apart from ``geode.links.resolver`` so each tool's extra rules stay together and the resolver
only asks for them; each function reads one note's text or the store's files, nothing else.
"""

from __future__ import annotations

import os
import posixpath
import re

from geode.kernel.note import Note
from geode.links.refs import Ref, slug

_UUID = r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
BLOCK_REF = re.compile(r"\(\((" + _UUID + r")\)\)")
BLOCK_ID = re.compile(r"^\s*(?:-\s+)?id::\s*(" + _UUID + r")\s*$", re.M)
SHORTCODE = re.compile(r"\{\{[<%]\s*(rel)?ref\s+\"([^\"]*)\"\s*[>%]\}\}")
SNIPPET = re.compile(r"^\s*-{1,}8<-{1,}\s+[\"']([^\"'\n]+)[\"']\s*$")
_FENCE = re.compile(r"^\s*(```|~~~)")
HUGO_HOOK = "layouts/_default/_markup/render-link.html"


def _lines_outside_code(text: str):
    """``(line number, line)`` of each line not inside a fenced code block."""
    fenced = False
    for i, line in enumerate(text.split("\n"), 1):
        if _FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            yield i, line


def extra_refs(note: Note, flavour: str) -> list[Ref]:
    """The references ``flavour``'s tool reads in ``note`` that the markdown reader does not."""
    out: list[Ref] = []
    if flavour == "logseq" and "((" in note.text:
        for i, line in _lines_outside_code(note.text):
            for m in BLOCK_REF.finditer(line):
                out.append(Ref(i, "blockref", m.group(1).lower(), raw=m.group(0)))
    if flavour == "hugo" and "ref" in note.text:
        for i, line in _lines_outside_code(note.text):
            for m in SHORTCODE.finditer(line):
                target, _s, anchor = m.group(2).partition("#")
                out.append(Ref(i, "shortcode", target, anchor, raw=m.group(0)))
    if flavour == "mkdocs" and "8<" in note.text:
        for i, line in _lines_outside_code(note.text):
            sm = SNIPPET.match(line)
            if sm:
                path = re.sub(r"(:-?\d*){1,2}$", "", sm.group(1).strip())
                out.append(Ref(i, "snippet", path, raw=sm.group(1)))
    return out


def block_ids(notes) -> set[str]:
    """Every ``id:: uuid`` a Logseq graph declares, lower case."""
    out: set[str] = set()
    for n in notes:
        if "id::" in n.text:
            out.update(m.group(1).lower() for m in BLOCK_ID.finditer(n.text))
    return out


def logseq_names(target: str) -> list[str]:
    """The file stems a Logseq page name may be written to: ``a/b`` -> ``a___b``, ``a%2fb``."""
    t = target.casefold()
    if "/" not in t:
        return []
    return [t.replace("/", "___"), t.replace("/", "%2f"), "pages/" + t.replace("/", "___")]


# -- Hugo ------------------------------------------------------------------------------------
def hugo_content(root: str, dirs: set[str]) -> str:
    """The content folder relative to the store root: ``content`` when the store is the site,
    ``""`` when the store is the content folder itself."""
    return "content" if "content" in dirs else ""


def page_url(path: str, content: str) -> str:
    """The URL Hugo gives a content file (pretty URLs): ``content/docs/install.md`` ->
    ``/docs/install/``, ``content/docs/_index.md`` -> ``/docs/``."""
    rel = path[len(content) + 1 :] if content and path.startswith(content + "/") else path
    stem = rel.rsplit(".", 1)[0]
    parts = stem.split("/")
    if parts[-1] in ("_index", "index"):
        parts = parts[:-1]
    return "/" + "/".join(p for p in parts if p) + ("/" if parts else "")


def url_index(notes, content: str) -> dict[str, str]:
    """``{url: path}`` of every page, and of every alias its front matter declares."""
    out: dict[str, str] = {}
    for n in notes:
        out.setdefault(page_url(n.path, content).casefold(), n.path)
    for n in notes:
        al = n.frontmatter.get("aliases")
        for a in al if isinstance(al, list) else [al] if isinstance(al, str) else []:
            u = "/" + str(a).strip().strip("/") + "/"
            out.setdefault(u.casefold().replace("//", "/"), n.path)
    return out


def hugo_url_lookup(target: str, note_path: str, content: str, urls: dict[str, str]) -> str | None:
    """The page a site URL names (absolute, or relative to the page's own URL)."""
    base = page_url(note_path, content)
    u = target if target.startswith("/") else posixpath.join(base, target)
    u = posixpath.normpath(u)
    key = ("/" + u.strip("/") + "/").replace("//", "/").casefold()
    return urls.get(key)


def ref_lookup(target: str, note_path: str, content: str, notes: dict) -> str | None:
    """A ``ref``/``relref`` target: a path relative to the page's folder, else to the content
    root, with or without ``.md``, a bundle's ``index.md`` or a section's ``_index.md``."""
    t = target.strip()
    if not t:
        return note_path
    here = note_path.rsplit("/", 1)[0] if "/" in note_path else ""
    bases = [content] if t.startswith("/") else [here, content]
    for b in bases:
        p = posixpath.normpath(posixpath.join(b, t.lstrip("/"))) if b else posixpath.normpath(t.lstrip("/"))
        for cand in (p, p + ".md", p + "/index.md", p + "/_index.md"):
            if cand in notes:
                return cand
    return None


_DT = re.compile(r"^(\S[^\n]*)\n(?::[ \t]+\S)", re.M)


def definition_term_ids(note: Note) -> set[str]:
    """The ids goldmark's autoDefinitionTermID gives the terms of description lists (``Term``
    then ``: definition``), as GitHub-style slugs."""
    out: set[str] = set()
    if "\n:" not in note.body:
        return out
    for m in _DT.finditer(note.body):
        term = m.group(1).strip()
        if term.startswith(("#", "-", "*", ">", ":")):
            continue
        out.add(slug(term).casefold())
    return out


# -- mkdocs ----------------------------------------------------------------------------------
def snippet_bases(root: str) -> list[str]:
    """The folders pymdownx snippets reads includes from: each ``base_path`` mkdocs.yml names,
    relative to the folder mkdocs.yml is in (mkdocs runs there); ``.`` when none is named."""
    from geode.links.flavour import found_above

    where = found_above(root, "mkdocs.yml", 2)
    if not where:
        return [root]
    try:
        with open(os.path.join(where, "mkdocs.yml"), encoding="utf-8") as fh:
            text = fh.read()
    except OSError:
        return [where]
    m = re.search(r"pymdownx\.snippets:\s*\n((?:[ \t]+.*\n?)*)", text)
    bases: list[str] = []
    if m:
        block = m.group(1)
        one = re.search(r"base_path:\s*\[([^\]]*)\]", block) or re.search(r"base_path:\s*([^\n\[]+)\n", block)
        if one and one.group(1).strip():
            bases = [b.strip().strip("'\"") for b in one.group(1).split(",") if b.strip()]
        else:
            listed = re.search(r"base_path:\s*\n((?:[ \t]+-[^\n]*\n?)+)", block)
            if listed:
                bases = [b.strip().lstrip("-").strip().strip("'\"") for b in listed.group(1).splitlines() if b.strip()]
    return [os.path.normpath(os.path.join(where, b)) for b in bases or ["."]]


_ADMONITION = re.compile(r"^(\s*)(!!!|\?\?\?\+?)\s+\w")


def admonition_body(body: str) -> str | None:
    """``body`` with each admonition's indented content dedented by four spaces (the same
    lines, so line numbers hold), or None when the note has no admonition: mkdocs renders that
    content as markdown, CommonMark would read it as indented code."""
    if "!!!" not in body and "???" not in body:
        return None
    lines = body.split("\n")
    out: list[str] = []
    depth: int | None = None
    for line in lines:
        m = _ADMONITION.match(line)
        if m:
            depth = len(m.group(1)) + 4
            out.append("")
            continue
        if depth is not None and (not line.strip() or line.startswith(" " * depth)):
            out.append(line[depth:] if line.strip() else "")
            continue
        depth = None
        out.append("")
    return "\n".join(out)
