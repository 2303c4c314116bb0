"""What a move does to links: the history of where notes went (the applied move and archive
proposals of the queue) and one line's reference rewritten to name a new target.

Apart from ``geode.agents.links`` (resolution) because these are the two halves of following a
move, used by the agents that propose link rewrites (the Librarian, the Cleaner's archiving, the
Corrector), and the history reads the approval queue, which resolution never does.
"""

from __future__ import annotations

import re
from urllib.parse import unquote

from geode.agents.note_refs import Ref


def rewrite_line(line: str, ref: Ref, new_text: str) -> str | None:
    """``line`` with ``ref``'s target replaced by ``new_text``; None when it cannot be found."""
    old = ref.raw or ref.target
    if ref.syntax in ("wiki", "relation"):
        pat = re.compile(r"(\[\[)([^\]\n]+)(\]\])")
        for m in pat.finditer(line):
            inner = m.group(2)
            parts = inner.split("|")
            for i, part in enumerate(parts):
                head = part.split("#", 1)[0]
                if head.strip() == old.strip():
                    rest = part[len(head) :]
                    lead = head[: len(head) - len(head.lstrip())]
                    trail = head[len(head.rstrip()) :]
                    parts[i] = lead + new_text + trail + rest
                    new_inner = "|".join(parts)
                    return line[: m.start(2)] + new_inner + line[m.end(2) :]
        return None
    if ref.syntax == "markdown":
        for m in re.finditer(r"\]\(\s*<?([^)\s>]+)", line):
            target = m.group(1)
            head = target.split("#", 1)[0]
            if head == old or unquote(head) == unquote(old):
                return line[: m.start(1)] + new_text + target[len(head) :] + line[m.end(1) :]
        return None
    if ref.syntax == "reference":
        mr = re.match(r"^(\s{0,3}\[[^\]]+\]:\s*<?)(\S+?)(>?(?:\s+.*)?)$", line)
        if mr:
            head = mr.group(2).split("#", 1)[0]
            if head == old or unquote(head) == unquote(old):
                return line[: mr.start(2)] + new_text + mr.group(2)[len(head) :] + line[mr.end(2) :]
        return None
    if ref.syntax == "path":
        idx = line.find(old)
        while idx >= 0:
            before = line[idx - 1] if idx > 0 else " "
            after = line[idx + len(old)] if idx + len(old) < len(line) else " "
            if not (before.isalnum() or before in "/.-_") and not (after.isalnum() or after in "/_-"):
                return line[:idx] + new_text + line[idx + len(old) :]
            idx = line.find(old, idx + 1)
        return None
    return None


def move_history(engine) -> dict[str, dict[str, str]]:
    """``{domain: {old path: new path}}`` from the applied move and archive proposals of the
    queue (empty when there is no queue yet). The Librarian and the Corrector suggest a renamed
    note's new place from it."""
    if engine is None:
        return {}
    from sqlalchemy import select

    from geode.agents import queue_tables as q

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
