"""A note's body as HTML: CommonMark by markdown-it-py with raw HTML off, ``[[wiki links]]``
and relative markdown links pointed at the note page of what they resolve to, and marked
resolved or not.

Why raw HTML is off: a note is text anyone (or any agent) may have written; rendered in a page
that can approve edits, a ``<script>`` in a note would be a cross-site scripting hole. With
``html: False`` markdown-it escapes it, and the page's Content-Security-Policy allows no inline
script either. How a link resolves is not decided here: ``read_note`` resolves every link the
way ``geode read`` does, and this module only looks the target up in what it returned.
"""

from __future__ import annotations

from urllib.parse import quote, unquote

from markdown_it import MarkdownIt

from geode.kernel.mdread import split_wiki, wikilink_rule

ESSENCE_OPEN = "<!-- crystal:essence -->"
ESSENCE_CLOSE = "<!-- /crystal:essence -->"
_EXTERNAL = ("http://", "https://", "mailto:", "ftp://", "tel:")


def note_href(address: str) -> str:
    return "/note?a=" + quote(address, safe="")


def _escape(s: str) -> str:
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")


class NoteRenderer:
    """One renderer per note: ``links`` is read_note's list (each with ``target``, ``resolved``
    and ``address``)."""

    def __init__(self, links: list[dict]):
        self.targets: dict[str, str | None] = {}
        for lk in links:
            t = str(lk.get("target") or "")
            if t and (t not in self.targets or lk.get("resolved")):
                self.targets[t] = lk.get("address") if lk.get("resolved") else None
        self.md = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False})
        # the one wikilink rule (geode.kernel.mdread), so the page links what upkeep reads
        self.md.inline.ruler.before("link", "wikilink", wikilink_rule)
        # markdown-it binds a render rule to its renderer (the first argument); ours close over self
        self.md.add_render_rule("wikilink", lambda _r, *a: self._render_wikilink(*a))
        self.md.add_render_rule("link_open", lambda _r, *a: self._render_link_open(*a))
        self.md.add_render_rule("image", lambda _r, *a: self._render_image(*a))

    def _lookup(self, target: str) -> tuple[bool, str | None]:
        """(known to read_note, address when resolved)."""
        for t in (target, unquote(target)):
            if t in self.targets:
                return True, self.targets[t]
        return False, None

    def _render_wikilink(self, tokens, idx, options, env) -> str:
        raw = tokens[idx].content
        target, anchor, alias = split_wiki(raw)  # the escaped pipe of a table separates too
        label = alias or raw.replace("\\|", "|").split("|", 1)[0]
        if not target:  # [[#anchor]]: a heading of this note
            return f'<a class="link resolved" href="#{_escape(quote(anchor))}">{_escape(label)}</a>'
        _known, addr = self._lookup(target)
        if addr:
            return (
                f'<a class="link resolved" href="{_escape(note_href(addr))}" title="{_escape(addr)}">'
                f"{_escape(label)}</a>"
            )
        return f'<span class="link unresolved" title="unresolved: {_escape(target)}">{_escape(label)}</span>'

    def _render_link_open(self, tokens, idx, options, env) -> str:
        tok = tokens[idx]
        href = tok.attrGet("href") or ""
        if href.lower().startswith(_EXTERNAL):
            tok.attrSet("class", "link external")
            tok.attrSet("rel", "noopener noreferrer nofollow")
            tok.attrSet("target", "_blank")
        elif href.startswith("#"):
            tok.attrSet("class", "link resolved")
        else:
            target = href.split("#", 1)[0]
            _known, addr = self._lookup(target)
            if addr:
                tok.attrSet("href", note_href(addr))
                tok.attrSet("class", "link resolved")
                tok.attrSet("title", addr)
            else:
                tok.attrSet("href", "#")
                tok.attrSet("class", "link unresolved")
                tok.attrSet("title", f"unresolved: {target}")
        # markdown-it-py's RendererProtocol omits renderToken, which its RendererHTML has
        return self.md.renderer.renderToken(tokens, idx, options, env)  # type: ignore[attr-defined]

    def _render_image(self, tokens, idx, options, env) -> str:
        # no image is fetched from anywhere (the page works offline and loads nothing it
        # did not ship): the alt text stands in
        tok = tokens[idx]
        alt = "".join(c.content for c in (tok.children or []))
        return f'<span class="image-alt" title="{_escape(tok.attrGet("src") or "")}">[image: {_escape(alt)}]</span>'

    def render(self, text: str) -> str:
        return self.md.render(text)


def render_body(body: str, links: list[dict]) -> dict:
    """``{"essence": html or None, "html": the body around it}``: the delivered part apart,
    because that is what an agent reads."""
    r = NoteRenderer(links)
    essence = None
    rest = body
    i, j = body.find(ESSENCE_OPEN), body.find(ESSENCE_CLOSE)
    if i != -1 and j > i:
        essence = r.render(body[i + len(ESSENCE_OPEN) : j])
        rest = body[:i] + body[j + len(ESSENCE_CLOSE) :]
    return {"essence": essence, "html": r.render(rest)}
