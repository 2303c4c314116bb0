"""Resolving what a note points at, in whatever shape the store uses.

Every reference a note makes is one ``Ref``: a typed relation (``- relates_to [[X]]``), a
wikilink (``[[target|alias]]``, or ``[[alias|target]]`` in stores that write it that way,
detected per store), a markdown link, a reference-style definition, a bare relative path
named in the prose (``see ../testing/SKILL.md``, ``@rules/other.mdc``), or a reference-style
use whose label is never defined. ``StoreLinks.resolve`` says of each one: ``ok``,
``broken`` (a note that does not exist), ``missing-file`` (a file that does not exist),
``broken-anchor`` (the note exists, the heading does not), ``forward`` (a typed relation to a
note not written yet), ``undefined-reference``, or ``skipped`` with a reason (a link to a
generated page, a path the store cannot vouch for). Nothing is dropped silently.

How the store's own tool reads a link (where a wikilink resolves, how a heading becomes an
anchor, what a path in backticks is relative to) depends on its flavour, detected from the
store or configured (``geode.links.flavour``); a path in backticks is a ``mention``,
checked only where the flavour defines its base (``broken-mention``) and never rewritten. A
suggested new target needs evidence of a rename (``StoreLinks.suggest``), never a similar name.

Rules, each chosen for a kind of store:

- Wikilinks and relations resolve by path (from the root or the note's folder), file stem,
  ``name``, ``permalink`` or ``title``, case-insensitively (Obsidian's rule).
- Markdown links resolve relative to the note's folder (``/x`` from the store root),
  percent-decoded, case-sensitively as the file system does. ``x.html`` resolves to ``x.md``
  (mdBook writes chapter links so); in an mdBook (``book.toml`` or ``SUMMARY.md`` at the root)
  a ``.html`` link with no chapter is broken, elsewhere it is a generated page and skipped.
- ``mdc:`` targets (Cursor) are workspace-relative; the store is usually ``.cursor/rules``, so
  leading folders are dropped until the path lands inside the store.
- Anchors are checked against the target's headings (GitHub/mdBook slugs, or the heading
  text as Obsidian writes it), ``{#id}`` attributes, ``<a id|name>`` tags and ``^block`` ids.
- A bare path is checked against the note's folder, the store root and the project root (the
  nearest folder above the store holding ``.git``). When none of them holds even its first
  folder, it names something outside what the store can see: skipped, with that reason.

What a note's own text holds (``Ref``, the prose references, the anchors) is read by
``geode.links.refs``; following a move (the move history, one line rewritten) is
``geode.links.relink``; how names are compared loosely and which notes are signposts,
``geode.links.names``. This module resolves references against one store.
"""

from __future__ import annotations

import os
import posixpath
import re
from dataclasses import dataclass
from urllib.parse import quote, unquote

from geode.kernel.crystal import NOTE_SUFFIXES
from geode.kernel.linkpath import markdown_candidates, markdown_rel
from geode.kernel.note import Note
from geode.kernel.store import SKIP_DIRS, StoreLoad
from geode.kernel.store import walk as store_walk
from geode.links.flavour import Flavour, dendron_target, detect, range_start, skill_root
from geode.links.names import ATTACHMENT_EXTS, HTML_SUFFIXES, strip_suffix
from geode.links.refs import Ref, heading_text_key, note_anchors, prose_refs, slug

HUGO_HOOK_NAME = "layouts/_default/_markup/render-link.html"


@dataclass
class Resolution:
    status: str  # ok | broken | missing-file | broken-anchor | forward | undefined-reference | skipped
    path: str = ""  # the note or file it resolves to, relative to the root
    reason: str = ""
    suggestion: str = ""  # the path of the one good target, when there is one


def find_project_root(root: str) -> str | None:
    """The nearest folder above the store (or the store itself) that holds ``.git``."""
    cur = os.path.realpath(root)
    while True:
        if os.path.exists(os.path.join(cur, ".git")):
            return cur
        parent = os.path.dirname(cur)
        if parent == cur:
            return None
        cur = parent


def _name_keys(n: Note) -> tuple[set[str], str, set[str]]:
    """The names a wikilink may call note ``n`` by (folded), its stem, and its aliases."""
    keys = {
        strip_suffix(n.path).casefold(),
        n.stem.casefold(),
        n.name.casefold(),
        n.permalink.casefold(),
        n.path.casefold(),
    }
    if n.frontmatter.get("title"):
        keys.add(str(n.frontmatter["title"]).casefold())
    aliases = {a.strip().casefold() for a in n.aliases if a.strip()}
    if aliases and isinstance(n.frontmatter.get("alias"), str):
        from geode.kernel.header_format import LOGSEQ, header_kind

        if header_kind(n.path, n.text) == LOGSEQ:
            keys |= aliases  # Logseq's alias:: names the page: [[alias]] opens it, nothing to rewrite
    return keys, n.stem.casefold(), aliases


class StoreLinks:
    """The link resolver for one loaded store."""

    def __init__(
        self,
        load: StoreLoad,
        project_root: str | None = None,
        moves: dict[str, str] | None = None,
        find_project: bool = True,
        flavour: str | None = None,
        git_moves: bool = True,
    ):
        self.load = load
        self.root = load.root
        self.project_root = (
            project_root if project_root is not None else (find_project_root(load.root) if find_project else None)
        )
        self._moves_arg = dict(moves or {})
        self.moves = dict(self._moves_arg)
        self.notes = {n.path: n for n in load.notes}
        self.files: set[str] = set()
        self.dirs: set[str] = {""}
        self._files_folded: dict[str, list[str]] = {}
        self._by_basename: dict[str, list[str]] = {}
        self._walk()
        # names a wikilink may use, folded: {name: the paths of the notes that go by it}, kept as
        # tuples (a set of one path is 216 bytes, a tuple 48: 100 MB at 100,000 notes)
        by_key: dict[str, list[str]] = {}
        by_alias: dict[str, list[str]] = {}
        stems: dict[str, list[str]] = {}
        for n in load.notes:
            keys, stem, aliases = _name_keys(n)
            for k in keys:
                by_key.setdefault(k, []).append(n.path)
            stems.setdefault(stem, []).append(n.path)
            for k in aliases:
                by_alias.setdefault(k, []).append(n.path)
        self.by_key: dict[str, tuple[str, ...]] = {k: tuple(v) for k, v in by_key.items()}
        self.by_alias: dict[str, tuple[str, ...]] = {k: tuple(v) for k, v in by_alias.items()}
        self.stems: dict[str, tuple[str, ...]] = {k: tuple(v) for k, v in stems.items()}
        del by_key, by_alias, stems
        self._flavour_arg = flavour
        self._moves_given = bool(moves)
        self._finish(git_moves)

    def _index(self, n: Note, add: bool) -> None:
        """Put note ``n`` in (or take it out of) the name indexes, replacing each tuple (a
        resolver made by ``with_notes`` shares the unchanged ones with the one it came from)."""
        keys, stem, aliases = _name_keys(n)
        pairs = [(self.by_key, k) for k in keys] + [(self.stems, stem)] + [(self.by_alias, k) for k in aliases]
        for index, k in pairs:
            have = index.get(k, ())
            if add:
                if n.path not in have:
                    index[k] = (*have, n.path)
                continue
            left = tuple(p for p in have if p != n.path)
            if left:
                index[k] = left
            else:
                index.pop(k, None)

    def _finish(self, git_moves: bool) -> None:
        load = self.load
        self.flavour: Flavour = detect(self.root, load.notes, self.files, self._flavour_arg)
        self.is_mdbook = self.flavour.name == "mdbook" or (
            "book.toml" in self.files or "SUMMARY.md" in self.files or "src/SUMMARY.md" in self.files
        )
        if git_moves and self.project_root:
            from geode.links.relink import git_renames

            for old, new in git_renames(self.root, self.project_root).items():
                self.moves.setdefault(old, new)
        self._git_moves = git_moves
        # the redirects and aliases the site declares: evidence that this very page moved
        from geode.links.redirects import store_redirects

        content = ""
        if self.flavour.name == "hugo":
            from geode.links.flavour_refs import hugo_content

            content = hugo_content(self.root, self.dirs)
        elif self.flavour.name == "mkdocs" and "docs" in self.dirs:
            content = "docs"
        self.redirects = store_redirects(self.root, self.notes, self.flavour.name, content)
        for old, r in self.redirects.items():
            self.moves.setdefault(old, r.new)
        if self.flavour.name == "dendron":
            self.wiki_order, self.wiki_order_votes = "alias|target", {"alias|target": 0, "target|alias": 0}
        else:
            self.wiki_order, self.wiki_order_votes = self._detect_wiki_order()
        self._anchor_cache: dict[str, set[str]] = {}
        self._flavour_state()

    def _flavour_state(self) -> None:
        """What the flavour's own rules need from the whole store (``geode.links.flavour_refs``)."""
        from geode.links import flavour_refs as fr

        name = self.flavour.name
        self.block_ids = fr.block_ids(self.load.notes) if name == "logseq" else set()
        self.hugo_content = fr.hugo_content(self.root, self.dirs) if name == "hugo" else ""
        self.hugo_urls = fr.url_index(self.load.notes, self.hugo_content) if name == "hugo" else {}
        self.hugo_hook = name == "hugo" and any(
            os.path.exists(os.path.join(b, fr.HUGO_HOOK)) for b in (self.root, os.path.dirname(self.root))
        )
        self.snippet_bases = fr.snippet_bases(self.root) if name == "mkdocs" else []

    def built_as_default(self) -> bool:
        """Whether this resolver is what ``StoreLinks(self.load)`` would build: no moves or
        flavour given, git renames on, and the project root the one found above the store."""
        return (
            not self._moves_given
            and self._flavour_arg is None
            and self._git_moves
            and self.project_root == find_project_root(self.root)
        )

    def with_notes(self, load: StoreLoad) -> StoreLinks:
        """The resolver ``StoreLinks(load, <this one's arguments>)`` would build for ``load``, the
        same store folder with some notes replaced, added or removed (a copy of the store as
        proposals would leave it), made from this one: the walk of the disk copied instead of
        repeated (``files`` and ``dirs`` are the new one's own, to amend), the name indexes
        shared but for the notes that differ, the flavour, the git renames and the wikilink order
        worked out again over ``load``. Why: the no-harm gate built a second resolver from scratch
        over 100,000 notes (a second walk and a second set of indexes, 200 MB)."""
        if load.root != self.root:
            raise ValueError(f"with_notes: {load.root} is not the store {self.root}")
        new = StoreLinks.__new__(StoreLinks)
        new.load, new.root, new.project_root = load, self.root, self.project_root
        new.moves = {k: v for k, v in self._moves_arg.items()}
        new._moves_arg = self._moves_arg
        new.notes = {n.path: n for n in load.notes}
        new.files, new.dirs = set(self.files), set(self.dirs)
        new._files_folded, new._by_basename = self._files_folded, self._by_basename  # never changed
        new.by_key, new.by_alias, new.stems = dict(self.by_key), dict(self.by_alias), dict(self.stems)
        for path, n in self.notes.items():
            if new.notes.get(path) is not n:
                new._index(n, add=False)
        for path, n in new.notes.items():
            if self.notes.get(path) is not n:
                new._index(n, add=True)
        new._flavour_arg, new._moves_given = self._flavour_arg, self._moves_given
        new._finish(self._git_moves)
        return new

    # -- the store's files -----------------------------------------------------------
    def _walk(self) -> None:
        root = self.root
        for dirpath, dirnames, filenames in store_walk(root):
            dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS)
            rel_dir = os.path.relpath(dirpath, root).replace(os.sep, "/")
            rel_dir = "" if rel_dir == "." else rel_dir
            for d in dirnames:
                self.dirs.add(f"{rel_dir}/{d}" if rel_dir else d)
            for f in filenames:
                rel = f"{rel_dir}/{f}" if rel_dir else f
                self.files.add(rel)
                self._files_folded.setdefault(rel.casefold(), []).append(rel)
                self._by_basename.setdefault(f.casefold(), []).append(rel)

    def exists(self, rel: str) -> bool:
        return rel in self.files or rel in self.dirs

    # -- which way round are [[a|b]] written? ------------------------------------------
    def _detect_wiki_order(self) -> tuple[str, dict]:
        left = right = 0
        for n in self.load.notes:
            for lk in n.links:
                if lk.kind in ("wiki", "relation") and lk.alias:
                    a = self._wiki_lookup(lk.target, n) is not None
                    right_target = lk.alias.split("#", 1)[0].strip()
                    b = self._wiki_lookup(right_target, n) is not None
                    left += a and not b
                    right += b and not a
        votes = {"target|alias": left, "alias|target": right}
        return ("alias|target" if right > left else "target|alias"), votes

    # -- references of a note --------------------------------------------------------
    def refs(self, note: Note) -> list[Ref]:
        out: list[Ref] = []
        swapped = self.wiki_order == "alias|target"
        for lk in note.links:
            if lk.kind in ("wiki", "relation"):
                target, anchor, alias = lk.target, lk.anchor, lk.alias
                if swapped and lk.alias:
                    right = lk.alias
                    r_anchor = ""
                    if "#" in right:
                        right, r_anchor = right.split("#", 1)
                    target, anchor, alias = right.strip(), r_anchor.strip(), lk.target
                out.append(Ref(lk.line, lk.kind, target, anchor, alias, lk.relation, target))
            else:
                out.append(Ref(lk.line, lk.kind, lk.target, lk.anchor, lk.alias, lk.relation, lk.target))
        out.extend(prose_refs(note))
        from geode.links import flavour_refs as fr

        if self.flavour.name == "mkdocs":
            body = fr.admonition_body(note.body)
            if body is not None:
                from geode.kernel.mdread import read_markdown

                seen = {(r.line, r.target) for r in out}  # a body line CommonMark already read (lazy continuation)
                for md in read_markdown(body, note.body_line).links:
                    if (
                        md.kind in ("markdown", "reference", "wiki")
                        and not md.external
                        and (md.line, md.target) not in seen
                    ):
                        out.append(
                            Ref(
                                md.line,
                                md.kind,
                                md.target,
                                md.anchor,
                                md.text,
                                raw=md.raw or md.target,
                            )
                        )
        extra = fr.extra_refs(note, self.flavour.name)
        if extra:
            # a path inside a ref shortcode or a snippet include is the directive's, not prose naming a file
            inside = {(r.line, r.target.split("/")[-1]) for r in extra}
            out = [
                r
                for r in out
                if not (r.syntax == "path" and any(ln == r.line and r.target.endswith(t) for ln, t in inside))
            ]
        if extra:
            out.extend(extra)
            out.sort(key=lambda x: x.line)
        return out

    # -- resolution ------------------------------------------------------------------
    def _wiki_lookup(self, target: str, note: Note) -> str | None:
        t = dendron_target(unquote(target).strip())
        if not t:
            return note.path
        folded = t.casefold()
        base = note.path.rsplit("/", 1)[0] if "/" in note.path else ""
        cands = [folded, strip_suffix(folded)]
        if base:
            joined = posixpath.normpath(posixpath.join(base, t)).casefold()
            cands += [joined, strip_suffix(joined)]
        if self.flavour.name == "logseq":
            from geode.links.flavour_refs import logseq_names

            cands += logseq_names(t)
        for c in cands:
            hit = self.by_key.get(c)
            if hit:
                return sorted(hit, key=lambda p: (p.count("/"), p))[0]
        if self.flavour.name == "folder-notes":
            inner = self._folder_note(t.strip("/"))
            if inner:
                return inner
        if t.lower().endswith(NOTE_SUFFIXES) or "." in t.rsplit("/", 1)[-1]:
            # a wikilink to a file that is not a note (an image, a PDF): Obsidian embeds
            for c in (t, posixpath.normpath(posixpath.join(base, t)) if base else t):
                if c in self.files:
                    return c
            hits = self._by_basename.get(t.rsplit("/", 1)[-1].casefold())
            if hits:
                return sorted(hits, key=lambda p: (p.count("/"), p))[0]
        return None

    def _folder_note(self, rel: str) -> str | None:
        """In a folder-per-note store the folder is the note: its README.md or index.md."""
        for name in ("README.md", "readme.md", "index.md"):
            cand = f"{rel}/{name}" if rel else name
            if cand in self.notes:
                return cand
        return None

    def suggest(
        self, target: str, note_path: str = "", domain_moves: dict[str, str] | None = None, wiki: bool = False
    ) -> str:
        """The one good target for a broken reference, only on evidence that the note is now
        there: the move history (applied move and archive proposals, renames in the git
        history where the store is a repository, and the redirects and aliases the site
        declares, ``geode.links.redirects``), the same path differing only in case (the file
        the author's case-insensitive file system opened), or, for a wikilink, the one note that
        declares the name among its ``aliases``. Never a similar name alone: a name that merely
        looks like another note's is not evidence that it was renamed. Empty when there is none
        or more than one."""
        moves = domain_moves if domain_moves is not None else self.moves
        t = unquote(target).strip()
        base = note_path.rsplit("/", 1)[0] if "/" in note_path else ""
        for cand in (t, posixpath.normpath(posixpath.join(base, t)) if base else t):
            for key in (cand, cand + ".md", strip_suffix(cand) + ".md"):
                seen = set()
                cur = key
                while cur in moves and cur not in seen:
                    seen.add(cur)
                    cur = moves[cur]
                if seen and cur in self.notes:
                    return cur
        if wiki:
            hits = self.by_alias.get(t.casefold(), ())
            return next(iter(hits)) if len(hits) == 1 else ""
        for rel in {posixpath.normpath(t), posixpath.normpath(posixpath.join(base, t)) if base else ""} - {""}:
            folded = self._files_folded.get(rel.casefold(), [])
            if len(folded) == 1 and folded[0] != rel:
                return folded[0]
        return ""

    def anchors_of(self, path: str) -> set[str]:
        if path in self._anchor_cache:
            return self._anchor_cache[path]
        note = self.notes.get(path)
        out = note_anchors(note, self.flavour.slug_style) if note is not None else set()
        if note is not None and self.flavour.name == "hugo":
            from geode.links.flavour_refs import definition_term_ids

            out = out | definition_term_ids(note)
        self._anchor_cache[path] = out
        return out

    def anchor_resolves(self, path: str, anchor: str) -> bool:
        """Whether ``path#anchor`` names a heading, id or block of that note, as this store's
        flavour slugs them (the Librarian asks before rewriting a link with an anchor)."""
        return self._anchor_ok(path, anchor)

    def _anchor_ok(self, path: str, anchor: str) -> bool:
        if path not in self.notes:
            return True  # not a note (an image, a folder): nothing to check against
        a = unquote(anchor).strip()
        if self.flavour.name == "dendron" and (":" in a or "," in a):
            a, end = range_start(a)
            if end and end != "*" and not self._anchor_ok(path, end):
                return False
        if not a or a == "*":
            return True
        if "#" in a and self.flavour.slug_style == "obsidian":
            # a nested heading link [[Note#H1#H2]]: every heading on the way must be there
            return all(self._anchor_ok(path, part) for part in a.split("#") if part.strip())
        have = self.anchors_of(path)
        if a.casefold() in have:
            return True
        if self.flavour.slug_style == "pymd":
            return False  # the id as Python-Markdown wrote it, or nothing: a browser matches exactly
        return heading_text_key(a) in have or slug(a) in have

    def resolve(self, note: Note, ref: Ref) -> Resolution:
        if ref.syntax == "refuse":
            return Resolution("undefined-reference", reason=f"reference-style link [{ref.target}] has no definition")
        if ref.syntax in ("wiki", "relation"):
            hit = self._wiki_lookup(ref.target, note)
            last = ref.target.rsplit("/", 1)[-1]
            if (
                hit is None
                and "." in last
                and not last.lower().endswith(NOTE_SUFFIXES)
                and re.fullmatch(r"[A-Za-z][A-Za-z0-9]{0,7}", last.rsplit(".", 1)[1])
                and last.rsplit(".", 1)[1].lower() in ATTACHMENT_EXTS
            ):
                return Resolution("missing-file", ref.target, reason="no such file in the store")
            if hit is None and self.flavour.name == "logseq":
                # a [[page]] creates the page: Logseq opens it, empty, whether a file exists or not
                return Resolution("ok", "", reason="a Logseq page the reference creates")
            if hit is None:
                sugg = self.suggest(ref.target, note.path, wiki=True)
                # Obsidian Publish reads "- see [[X]]" as a list item with a link, not a typed
                # relation to a note not written yet
                forward = (ref.relation != "links_to" or self.flavour.name == "basic-memory") and (
                    self.flavour.name != "obsidian-publish"
                )
                if ref.syntax == "relation" and forward and not sugg:
                    return Resolution("forward", reason=f"{ref.relation} names a note not written yet")
                return Resolution("broken", suggestion=sugg, reason="no note has this path, name, permalink or title")
            if ref.anchor and not self._anchor_ok(hit, ref.anchor):
                return Resolution("broken-anchor", hit, reason=f"{hit} has no heading #{ref.anchor}")
            return Resolution("ok", hit)
        if ref.syntax == "blockref":
            if ref.target in self.block_ids:
                return Resolution("ok", note.path)
            return Resolution("broken-block", reason="no block in the graph has this id:: uuid")
        if ref.syntax == "shortcode":
            from geode.links.flavour_refs import ref_lookup

            hit = ref_lookup(ref.target, note.path, self.hugo_content, self.notes)
            if hit is None:
                # moved, when an alias or a redirect says so (from the content root, as Hugo reads a ref)
                t = ref.target.strip().lstrip("/")
                sugg = self.suggest(posixpath.join(self.hugo_content, t) if self.hugo_content else t, note.path)
                return Resolution("broken", suggestion=sugg, reason="no page for this ref (Hugo fails the build)")
            return self._anchored(hit, ref)
        if ref.syntax == "snippet":
            for b in self.snippet_bases:
                if os.path.isfile(os.path.join(b, ref.target)):
                    return Resolution("ok", ref.target, reason="a snippet include")
            return Resolution("missing-file", ref.target, reason="no such file under the snippets base_path")
        if ref.syntax == "path":
            return self._resolve_path(note, ref)
        if ref.syntax == "mention":
            return self._resolve_mention(note, ref)
        return self._resolve_markdown(note, ref)

    def _resolve_mention(self, note: Note, ref: Ref) -> Resolution:
        """A path in backticks: checked against what the flavour says it is relative to (a
        skill's root; the workspace of Cursor rules), never rewritten; elsewhere unjudged."""
        t = ref.target.lstrip("@")
        if not self.flavour.checks_mentions:
            return Resolution("unchecked", t, reason=f"a {self.flavour.name} store defines no base for paths in code")
        base = note.path.rsplit("/", 1)[0] if "/" in note.path else ""
        bases = [base]
        if self.flavour.name == "skills":
            bases.append(skill_root(note.path, self.files))
        bases.append("")
        rels = [posixpath.normpath(posixpath.join(b, t)) if b else posixpath.normpath(t) for b in bases]
        found = self._existing(rels, base, t)
        if found is not None:
            return found
        if self.flavour.name == "cursor" and not self.project_root:
            return Resolution("unchecked", t, reason="no workspace root found to check it against")
        where = "the skill's root" if self.flavour.name == "skills" else "the workspace"
        return Resolution("broken-mention", t, reason=f"no such file relative to the note's folder or {where}")

    def _existing(self, rels: list[str], base: str, t: str) -> Resolution | None:
        """``ok`` when a path resolves: one of ``rels`` (root-relative candidates) inside the
        store, else ``t`` beside the note's folder on disk (outside the store), else in the
        project root; None when it names nothing that exists."""
        for rel in rels:
            if not rel.startswith("..") and (rel in self.files or rel in self.dirs):
                return Resolution("ok", rel)
        if os.path.exists(os.path.normpath(os.path.join(self.root, base, t))):
            return Resolution("ok", t, reason="outside the store")
        if self.project_root and os.path.exists(os.path.join(self.project_root, t)):
            return Resolution("ok", t, reason="in the project")
        return None

    def _rel(self, note: Note, target: str) -> str | None:
        """The target relative to the store root (None when it leaves the store): the rule the
        note page shares (``geode.kernel.linkpath``)."""
        return markdown_rel(note.path, target)

    def _outside(self, note: Note, target: str) -> bool | None:
        """Whether a target that leaves the store exists on disk (None: cannot tell)."""
        base = os.path.dirname(os.path.join(self.root, note.path))
        full = os.path.normpath(os.path.join(base, target))
        return os.path.exists(full)

    def _resolve_markdown(self, note: Note, ref: Ref) -> Resolution:
        target = unquote(ref.target.strip())
        mdc = False
        if target.lower().startswith("mdc:"):
            target, mdc = target[4:], True
        if target.lower().startswith("file:"):
            return Resolution("skipped", reason="file: URL outside the store")
        if target.lower().startswith(("memory://", "dendron://")):
            key = target.split("://", 1)[1].strip("/") if target.lower().startswith("memory://") else target
            hit = self._wiki_lookup(key, note)
            if hit is None:
                return Resolution("broken", reason="no note has this permalink")
            return self._anchored(hit, ref)
        if self.flavour.name == "hugo" and target and not target.lower().endswith(NOTE_SUFFIXES):
            from geode.links.flavour_refs import hugo_url_lookup

            hit = hugo_url_lookup(target, note.path, self.hugo_content, self.hugo_urls)
            if hit is not None:
                return self._anchored(hit, ref)
            rel0 = self._rel(note, target)
            if rel0 is not None and (rel0 in self.files or rel0 in self.dirs):
                return self._anchored(rel0, ref)
            if self.hugo_hook:
                return Resolution(
                    "skipped", target, reason=f"a link form the site's render hook rewrites ({HUGO_HOOK_NAME})"
                )
            return Resolution("broken", target, reason="no page has this URL or alias")
        if not target:  # [x](#anchor): this note
            if ref.anchor and not self._anchor_ok(note.path, ref.anchor):
                return Resolution("broken-anchor", note.path, reason=f"no heading #{ref.anchor} in this note")
            return Resolution("ok", note.path)
        if mdc:
            rel = self._mdc(target)
            if rel is None:
                sugg = self.suggest(target, note.path) or self._mdc_case(target)
                return Resolution("broken", suggestion=sugg, reason="no file in the store ends with this mdc: path")
        else:
            rel = self._rel(note, target)
        if rel is None:
            if self._outside(note, target):
                return Resolution("ok", target, reason="outside the store")
            if self.project_root:
                return Resolution("missing-file", target, reason="leaves the store; not found on disk either")
            return Resolution("skipped", target, reason="points outside the store (no project root to check against)")
        low = rel.lower()
        if low.endswith(HTML_SUFFIXES):
            md = rel.rsplit(".", 1)[0] + ".md"
            if md in self.files:
                return self._anchored(md, ref)
            if rel in self.files:
                return Resolution("ok", rel)
            if self.is_mdbook:
                sugg = self.suggest(md, note.path)
                return Resolution("broken", suggestion=sugg, reason=f"no chapter {md} for {rel}")
            return Resolution("skipped", rel, reason="generated page (.html with no markdown source in the store)")
        if self.flavour.name == "folder-notes" and rel in self.dirs:
            inner = self._folder_note(rel)
            if inner:
                return self._anchored(inner, ref)
        if rel in self.files or rel in self.dirs:
            return self._anchored(rel, ref)
        for cand in markdown_candidates(rel)[1:]:
            if cand in self.files:
                return self._anchored(cand, ref)
        if low.endswith(NOTE_SUFFIXES) or "." not in rel.rsplit("/", 1)[-1]:
            sugg = self.suggest(rel if "." in rel.rsplit("/", 1)[-1] else rel + ".md", note.path)
            return Resolution("broken", rel, suggestion=sugg, reason="no such note")
        sugg = self.suggest(rel)
        return Resolution(
            "missing-file", rel, suggestion=sugg if sugg and sugg in self.files else "", reason="no such file"
        )

    def _anchored(self, rel: str, ref: Ref) -> Resolution:
        if ref.anchor and not self._anchor_ok(rel, ref.anchor):
            return Resolution("broken-anchor", rel, reason=f"{rel} has no heading #{ref.anchor}")
        return Resolution("ok", rel)

    def _mdc_case(self, target: str) -> str:
        """The one store file an ``mdc:`` path names when case is ignored (the same file on the
        case-insensitive file system it was written on), or ""."""
        parts = [p for p in target.split("/") if p not in ("", ".")]
        for i in range(len(parts)):
            hits = self._files_folded.get("/".join(parts[i:]).casefold(), [])
            if len(hits) == 1:
                return hits[0]
        return ""

    def _mdc(self, target: str) -> str | None:
        parts = [p for p in target.split("/") if p not in ("", ".")]
        for i in range(len(parts)):
            cand = "/".join(parts[i:])
            if cand in self.files:
                return cand
        return None

    def _resolve_path(self, note: Note, ref: Ref) -> Resolution:
        t = ref.target
        base = note.path.rsplit("/", 1)[0] if "/" in note.path else ""
        rels = []
        if not t.startswith(("./", "../")):
            rels.append(posixpath.normpath(t))
        rels.insert(0, posixpath.normpath(posixpath.join(base, t)) if base else posixpath.normpath(t))
        found = self._existing(rels, base, t)
        if found is not None:
            return found
        is_note = t.lower().endswith(NOTE_SUFFIXES)
        first = t.split("/", 1)[0]
        anchored = t.startswith(("./", "../")) or is_note or "/" not in t
        if not anchored:
            anchored = any((posixpath.normpath(posixpath.join(b, first)) in self.dirs) for b in ({base, ""})) or bool(
                self.project_root and os.path.isdir(os.path.join(self.project_root, first))
            )
        if not anchored:
            return Resolution(
                "skipped",
                t,
                reason="names a path outside anything the store can see "
                f"(no folder {first!r} in the store or the project)",
            )
        rel = rels[0]
        sugg = self.suggest(t, note.path) if is_note else ""
        if is_note:
            return Resolution("broken", rel, suggestion=sugg, reason="no such note")
        return Resolution("missing-file", rel, reason="no such file")

    # -- rewriting one reference ---------------------------------------------------------
    def new_target_text(self, note: Note, ref: Ref, new_path: str) -> str:
        """How ``ref`` should name ``new_path``, in the syntax it was written in."""
        if ref.syntax in ("wiki", "relation"):
            if "/" in ref.target:
                text = new_path if ref.target.lower().endswith(NOTE_SUFFIXES) else strip_suffix(new_path)
            else:
                stem = new_path.rsplit("/", 1)[-1]
                stem_ns = strip_suffix(stem)
                unique = len(self.stems.get(stem_ns.casefold(), ())) <= 1
                if unique:
                    text = stem if ref.target.lower().endswith(NOTE_SUFFIXES) else stem_ns
                else:
                    text = strip_suffix(new_path)
            return text
        base = note.path.rsplit("/", 1)[0] if "/" in note.path else ""
        rel = posixpath.relpath(new_path, base or ".")
        raw = ref.raw or ref.target
        if raw.lower().startswith("mdc:"):
            # workspace-relative: keep the folders the original named and swap the file name,
            # when the note stayed in the same folder of the store; otherwise no safe rewrite
            orig = raw[4:]
            orig_dir = orig.rsplit("/", 1)[0] if "/" in orig else ""
            new_dir = new_path.rsplit("/", 1)[0] if "/" in new_path else ""
            if new_dir and not orig_dir.endswith(new_dir):
                return ""
            if not new_dir and orig_dir and self._mdc(orig_dir + "/" + new_path) != new_path:
                return ""
            return "mdc:" + (orig_dir + "/" if orig_dir else "") + new_path.rsplit("/", 1)[-1]
        if raw.lower().endswith(HTML_SUFFIXES):
            rel = rel.rsplit(".", 1)[0] + ".html"
        if raw.startswith("./") and not rel.startswith("."):
            rel = "./" + rel
        if ref.syntax in ("markdown", "reference") and (" " in rel) and "%20" in raw:
            rel = quote(rel, safe="/#.-_~")
        return rel
