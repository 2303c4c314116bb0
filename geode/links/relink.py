"""What a move does to links: the history of where notes went (the applied move and archive
proposals of the queue) and one line's reference rewritten to name a new target.

Apart from ``geode.links.resolver`` (resolution) because these are the two halves of following a
move, used by the agents that propose link rewrites (the Librarian, the Cleaner's archiving, the
Corrector), and the history reads the approval queue, which resolution never does.
"""

from __future__ import annotations

import re
from urllib.parse import unquote

from geode.links.refs import Ref


def rewrite_line(line: str, ref: Ref, new_text: str) -> str | None:
    """``line`` with ``ref``'s target replaced by ``new_text``; None when it cannot be found.

    Where the target sits is the markdown reader's to say: the line is read again and the link
    it names is found among its links, then its destination is replaced where it is written.
    A mention (a path in backticks) is never rewritten."""
    from geode.kernel.mdread import read_markdown

    old = ref.raw or ref.target
    if ref.syntax not in LINK_SYNTAXES or is_include_directive(line):
        return None  # a file name in prose or code, or an include: words, not a link target
    found = read_markdown(line.lstrip()).links
    if ref.syntax in ("wiki", "relation"):
        for lk in found:
            if lk.kind not in ("wiki", "embed", "relation"):
                continue
            if old.strip() not in (lk.target, lk.text):
                continue
            # find this wikilink's text on the line and rewrite the part naming the target
            pos = 0
            while True:
                i = line.find("[[", pos)
                if i < 0:
                    break
                j = line.find("]]", i + 2)
                if j < 0:
                    break
                inner = line[i + 2 : j]
                sep = "\\|" if "\\|" in inner else "|"
                parts = inner.split(sep)
                for k, part in enumerate(parts):
                    head = part.split("#", 1)[0]
                    if head.strip() == old.strip():
                        lead = head[: len(head) - len(head.lstrip())]
                        trail = head[len(head.rstrip()) :]
                        parts[k] = lead + new_text + trail + part[len(head) :]
                        new_inner = sep.join(parts)
                        return line[: i + 2] + new_inner + line[j:]
                pos = j + 2
        return None
    if ref.syntax in ("markdown", "reference"):
        for lk in found:
            if lk.kind not in ("markdown", "image", "reference") or not lk.raw:
                continue
            head = lk.raw.split("#", 1)[0]
            if head != old and unquote(head) != unquote(old):
                continue
            marker = "]:" if lk.kind == "reference" else "]("
            i = line.find(marker)
            while i >= 0:
                k = line.find(lk.raw, i)
                if k >= 0:
                    return line[:k] + new_text + line[k + len(head) :]
                i = line.find(marker, i + 1)
        return None
    return None


#: the reference syntaxes whose target is a link target, the only text a rewrite may change
#: (a bare path in prose, ``path``, and one in backticks, ``mention``, are the author's words)
LINK_SYNTAXES = ("wiki", "relation", "markdown", "reference")

#: include directives: the file is pulled into the page at build time, from a base path the
#: tool names (pymdownx snippets, Jinja/Liquid includes, Hugo's readfile shortcode, mdBook's
#: include); never a link, never rewritten
_INCLUDE = re.compile(
    r"""(?:^\s*-{1,2}8<-{1,2}\s)|\{%-?\s*(?:include|include_relative|import|from)\b|\{\{[<%]\s*(?:readfile|include|code)\b|\{\{#(?:include|rustdoc_include|playground)\b"""
)


def is_include_directive(line: str) -> bool:
    """Whether ``line`` holds an include directive (``--8<-- "file"``, ``{% include %}``,
    ``{{< readfile >}}``, ``{{#include}}``)."""
    return bool(_INCLUDE.search(line))


def git_renames(root: str, project_root: str, limit: int = 5000) -> dict[str, str]:
    """``{old path: new path}`` (relative to the store) from the renames in the git history of
    the repository holding the store, oldest first so a chain ends at the latest name. Empty
    when git is missing or the store is not in a repository: a rename with no record is never
    guessed.

    A rename counts only where it is evidence that this very document moved: git's ``R`` is a
    guess from similar content, so a commit that renames a file *and* adds a sibling (a note in
    the folder it left or the folder it went to, or a new file at the old path) is not
    evidence of which of the two the old name's readers meant (``tutorial.md`` renamed to
    ``tutorial-v1.md`` beside a new ``tutorial-v2.md``); its renames are left out."""
    import os
    import shutil
    import subprocess

    if not shutil.which("git") or not os.path.isdir(os.path.join(project_root, ".git")):
        return {}
    try:
        proc = subprocess.run(
            [
                "git",
                "-C",
                root,
                "log",
                "--name-status",
                "--diff-filter=AR",
                "-M",
                "--format=%x1fcommit",
                f"-n{limit}",
                "--",
                ".",
            ],  # fmt: skip
            capture_output=True,
            text=True,
            timeout=60,
        )
    except (OSError, subprocess.SubprocessError):
        return {}
    if proc.returncode != 0:
        return {}
    prefix = os.path.relpath(os.path.realpath(root), os.path.realpath(project_root)).replace(os.sep, "/")
    prefix = "" if prefix == "." else prefix + "/"
    commits: list[list[list[str]]] = []
    for row in proc.stdout.splitlines():
        if row.startswith("\x1f"):
            commits.append([])
            continue
        parts = row.split("\t")
        if commits and len(parts) >= 2:
            commits[-1].append(parts)
    out: dict[str, str] = {}
    for rows in reversed(commits):  # oldest first
        added = [r[1] for r in rows if r[0].startswith("A")]
        for r in rows:
            if len(r) != 3 or not r[0].startswith("R"):
                continue
            old, new = r[1], r[2]
            if prefix and not (old.startswith(prefix) and new.startswith(prefix)):
                continue
            if _sibling_added(old, new, added):
                continue
            out[old[len(prefix) :]] = new[len(prefix) :]
    return out


def _sibling_added(old: str, new: str, added: list[str]) -> bool:
    """Whether the commit that renamed ``old`` to ``new`` also added a note beside either."""
    import posixpath

    from geode.kernel.crystal import NOTE_SUFFIXES

    folders = {posixpath.dirname(old), posixpath.dirname(new)}
    for a in added:
        if a == old:
            return True
        if a.lower().endswith(NOTE_SUFFIXES) and posixpath.dirname(a) in folders:
            return True
    return False


def move_history(engine) -> dict[str, dict[str, str]]:
    """``{domain: {old path: new path}}`` from the applied move and archive proposals of the
    queue (empty when there is no queue yet). The Librarian and the Corrector suggest a renamed
    note's new place from it."""
    if engine is None:
        return {}
    from sqlalchemy import select

    from geode.queue import tables as q

    q.ensure_tables(engine)
    out: dict[str, dict[str, str]] = {}
    stmt = (
        select(q.P.c.id, q.P.c.domain, q.C.c.path, q.C.c.before_sha, q.C.c.after_sha)
        .join(q.C, q.C.c.proposal_id == q.P.c.id)
        .where(q.P.c.status == "applied", q.P.c.kind.in_(("move", "archive")))
        .order_by(q.P.c.updated_at, q.P.c.id, q.C.c.seq)
    )
    per: dict[int, dict] = {}
    with engine.connect() as conn:
        for pid, domain, path, before_sha, after_sha in conn.execute(stmt):
            p = per.setdefault(pid, {"domain": domain, "src": None, "dst": None})
            if before_sha is None:
                p["dst"] = path
            elif after_sha is None:
                p["src"] = path
    for p in per.values():
        if p["src"] and p["dst"]:
            out.setdefault(p["domain"], {})[p["src"]] = p["dst"]
    return out
