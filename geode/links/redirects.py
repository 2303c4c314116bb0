"""Redirects and aliases a store declares: evidence that this very document moved.

Why: a link rewrite needs evidence that the document the link named is now elsewhere (issue
21), never a similar name. Besides the applied moves and the git history of the path, a site
says so itself when a page moves, in its tool's own syntax:

- **mkdocs-redirects**: ``plugins: - redirects: redirect_maps: {'old.md': 'new.md'}`` in
  ``mkdocs.yml``; both sides are markdown files relative to ``docs_dir`` (default ``docs``);
  a value that is an external URL is not a move inside the store.
- **Hugo** ``aliases`` in a page's front matter (YAML, TOML or JSON): the URLs the page was
  published at before. An alias that starts with ``/`` is server-relative; one that does not
  is relative to the page's own section (Hugo resolves ``aliases = ['a-old']`` on
  ``content/examples/a.md`` to ``/examples/a-old/``).
- **``_redirects``** (Netlify, Cloudflare Pages, GitLab Pages): one rule a line, ``from to
  [status]``, ``#`` starts a comment, the first rule for a source wins. Rules with a splat
  (``*``), a placeholder (``:name``), query conditions or a ``to`` outside the site say
  nothing about one document and are left out; so are rewrites (status 200) and errors (4xx).
  Looked for at the store, in its ``static/``, ``public/`` and ``docs/``, and at the site root
  above a store that is the site's content folder.

A URL is turned into the source files a page of that URL comes from (``/a/b/`` is ``a/b.md``,
``a/b/index.md`` or ``a/b/_index.md`` under the content folder); a redirect counts only when its
target is a note of the store. Each is a ``Redirect`` with the file and line that declares it,
so a proposal can name it as a fact (kind ``redirect``) and the filing gate can check that a
person wrote it.
"""

from __future__ import annotations

import os
import posixpath
import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Redirect:
    """``old`` (a store path or a URL as links write it) now lives at ``new`` (a note's path),
    as ``source`` (the declaring file, store-relative) says at ``line``, in ``syntax``."""

    old: str
    new: str
    source: str
    line: int
    syntax: str  # mkdocs-redirects | hugo-aliases | _redirects


_SKIP_STATUS = re.compile(r"^(200|4\d\d)!?$")


def _rel(path: str, root: str) -> str:
    return os.path.relpath(path, root).replace(os.sep, "/")


def _url_sources(url: str, content: str) -> list[str]:
    """The store paths a page published at ``url`` may come from."""
    u = url.split("#", 1)[0].split("?", 1)[0].strip()
    if not u or "://" in u:
        return []
    u = posixpath.normpath("/" + u.lstrip("/")).lstrip("/")
    if u in ("", "."):
        stems = ["index", "_index"]
    elif u.endswith(".html"):
        stems = [u[: -len(".html")]]
        if stems[0].endswith("/index"):
            stems.append(stems[0][: -len("/index")])
    elif u.endswith(".md"):
        stems = [u[: -len(".md")]]
    else:
        stems = [u, u + "/index", u + "/_index"]
    pre = content.strip("/") + "/" if content.strip("/") else ""
    return [f"{pre}{s}.md" for s in stems]


def _add(out: dict[str, Redirect], r: Redirect) -> None:
    out.setdefault(r.old, r)  # the first rule for a source wins


def mkdocs_redirects(root: str, notes: dict) -> dict[str, Redirect]:
    """``redirect_maps`` of the mkdocs.yml at the store or up to two folders above it."""
    from geode.links.flavour import found_above

    site = found_above(root, "mkdocs.yml", 2)
    if not site:
        return {}
    cfg_path = os.path.join(site, "mkdocs.yml")
    try:
        with open(cfg_path, encoding="utf-8") as fh:
            text = fh.read(1_000_000)
    except (OSError, UnicodeDecodeError):
        return {}
    import yaml

    class _Lenient(yaml.SafeLoader):
        """mkdocs.yml may hold ``!!python/name:`` and ``!ENV`` tags: read as plain values."""

    _Lenient.add_multi_constructor("", lambda loader, suffix, node: None)
    try:
        cfg = yaml.load(text, Loader=_Lenient)  # noqa: S506  (a SafeLoader subclass: no object is built)
    except yaml.YAMLError:
        return {}
    if not isinstance(cfg, dict):
        return {}
    docs = os.path.normpath(os.path.join(site, str(cfg.get("docs_dir") or "docs")))
    real = os.path.realpath(root)
    maps: dict = {}
    for plugin in cfg.get("plugins") or []:
        if isinstance(plugin, dict) and isinstance(plugin.get("redirects"), dict):
            maps = plugin["redirects"].get("redirect_maps") or {}
    if not isinstance(maps, dict):
        return {}
    lines = text.split("\n")
    out: dict[str, Redirect] = {}
    source = _rel(cfg_path, real)
    for old, new in maps.items():
        if not isinstance(old, str) or not isinstance(new, str) or "://" in new:
            continue
        new_path = _rel(os.path.join(docs, new.split("#", 1)[0]), real)
        if new_path not in notes:
            continue
        line = next((i + 1 for i, t in enumerate(lines) if old in t and new in t), 0)
        _add(out, Redirect(_rel(os.path.join(docs, old), real), new_path, source, line, "mkdocs-redirects"))
    return out


def hugo_aliases(notes: dict, content: str) -> dict[str, Redirect]:
    """Each page's front-matter ``aliases``: the URLs it had, and the files those came from."""
    from geode.links.flavour_refs import page_url

    out: dict[str, Redirect] = {}
    for path, n in sorted(notes.items()):
        al = n.frontmatter.get("aliases")
        items = al if isinstance(al, list) else [al] if isinstance(al, str) else []
        line = n.fm_lines.get("aliases", 1)
        for a in items:
            a = str(a).strip()
            if not a or "://" in a:
                continue
            section = page_url(path, content).rstrip("/").rsplit("/", 1)[0]
            url = a if a.startswith("/") else posixpath.join(section or "/", a)
            r = Redirect("", path, path, line, "hugo-aliases")
            for old in [url, *_url_sources(url, content)]:
                if old != path and old not in notes:
                    _add(out, Redirect(old, r.new, r.source, r.line, r.syntax))
    return out


def redirects_files(root: str, notes: dict, content: str) -> dict[str, Redirect]:
    """The rules of the ``_redirects`` files this store's site publishes."""
    real = os.path.realpath(root)
    places = [real, *(os.path.join(real, d) for d in ("static", "public", "docs"))]
    parent = os.path.dirname(real)
    places += [parent, os.path.join(parent, "static")]
    out: dict[str, Redirect] = {}
    for folder in places:
        f = os.path.join(folder, "_redirects")
        try:
            with open(f, encoding="utf-8") as fh:
                text = fh.read(1_000_000)
        except (OSError, UnicodeDecodeError):
            continue
        source = _rel(f, real)
        for i, raw in enumerate(text.split("\n"), 1):
            parts = raw.split("#", 1)[0].split() if not raw.lstrip().startswith("#") else []
            if len(parts) < 2:
                continue
            src, dst, rest = parts[0], parts[1], parts[2:]
            if "*" in src or ":" in src or "=" in dst or any("=" in p for p in rest[1:]):
                continue  # a splat, a placeholder, a condition: not one document's move
            if rest and _SKIP_STATUS.match(rest[0]):
                continue  # a rewrite (200) or an error page: the document did not move
            if "=" in (rest[0] if rest else ""):
                continue  # a query condition written before the target
            targets = [t for t in _url_sources(dst, content) if t in notes]
            if len(targets) != 1:
                continue
            for old in [src, *_url_sources(src, content)]:
                if old not in notes:
                    _add(out, Redirect(old, targets[0], source, i, "_redirects"))
    return out


def store_redirects(root: str, notes: dict, flavour: str, content: str = "") -> dict[str, Redirect]:
    """Every redirect the store's site declares, by the old path or URL a link may name."""
    out: dict[str, Redirect] = {}
    for part in (
        mkdocs_redirects(root, notes) if flavour == "mkdocs" else {},
        hugo_aliases(notes, content) if flavour == "hugo" else {},
        redirects_files(root, notes, content),
    ):
        for r in part.values():
            _add(out, r)
    return out
