"""The one gate every agent's proposals pass before they are filed: held back when already
decided or waiting, and never filed when approving them would do harm.

Why one gate and not a check in each agent: the promise "a person who approves one night's
queue is never worse off" is about the queue, not about any one agent; an agent added later
(``[upkeep] agents``) gets it without knowing it exists. ``geode.agents.upkeep.run_agent``
calls ``screen`` between the agent's ``examine`` and the filing.

Three checks, in this order:

1. **Held back** (idempotent across runs, not only within one). Each draft has an evidence
   fingerprint: the domain, the kind (``status`` counts as ``edit``: both only modify
   files), every file change (path, sha256 before, sha256 after)
   and the evidence it rests on (its findings' kind, path and target, and the ledger rows it
   cites). Not the agent: the Corrector drafting the very edit of the Librarian's a person
   undid is the same proposal. A draft whose fingerprint equals that of a proposal already
   ``pending`` (or ``conflict``/``failed``: still waiting for a person), ``rejected`` or
   ``undone`` is not filed again; the report counts it under that status. When the file or the
   evidence changed, the fingerprint differs and the draft is filed.
2. **No harm.** The remaining drafts are applied to a copy of the store in memory and the links
   re-checked with the Librarian's resolver (``geode.links.resolver.StoreLinks``, public API
   only): a draft is not filed when a link that resolves today would no longer resolve to the
   same note (moves followed), or when it writes a link in a form that does not resolve. It
   becomes a ``proposal-would-break-links`` finding for a person, counted under
   ``would-break-links``. The drafts of one run are checked together (an agent's proposals of
   one run touch disjoint files); a draft found harmful is taken out and the rest re-checked.
3. **Never on geode's own writing** (``geode.agents.evidence_gate``, run between the header
   check and the no-harm check): every fact a draft rests on (the ones its agent names and
   the places of its findings) is checked against the applied proposals; a draft resting on a
   status, a ``superseded_by``, a link, a date, a folder count or a file that geode wrote is
   not filed but becomes a ``proposal-rests-on-geode`` finding, counted under
   ``geode-made-evidence``. The facts of the drafts that pass are filed with them, each with
   its provenance (``proposal_fact``).
"""

from __future__ import annotations

import hashlib
import json
import os
import posixpath
from collections import Counter
from dataclasses import dataclass, field

from geode.agents.contract import Finding, Proposed, Report

#: statuses of a proposal that keep an identical draft from being filed again, and the reason
#: the report gives (conflict and failed still wait for a person, like pending)
HOLD_REASONS = {
    "pending": "pending",
    "conflict": "pending",
    "failed": "pending",
    "rejected": "rejected",
    "undone": "undone",
}
#: the reason counted for drafts the no-harm check kept out of the queue
WOULD_HARM = "would-break-links"
HARM_FINDING = "proposal-would-break-links"
#: resolutions that mean "does not resolve"
BAD = frozenset({"broken", "missing-file", "broken-anchor", "undefined-reference"})


# -- fingerprints ----------------------------------------------------------------------------
#: kinds that are one kind for the fingerprint: a status change is an edit of the same bytes
SAME_KIND = {"status": "edit"}


def fingerprint(
    domain: str,
    kind: str,
    changes: list[tuple[str, str | None, str | None]],
    findings: list[tuple[str, str, str]],
    ledger_events: list[int],
) -> str:
    """The evidence fingerprint: the same for the same change resting on the same evidence.

    Finding messages and lines are left out on purpose (a count in a message, or a line that
    moved, is not new evidence); the finding's kind, path and target are in."""
    raw = json.dumps(
        [
            domain,
            SAME_KIND.get(kind, kind),
            sorted([p, b or "", a or ""] for p, b, a in changes),
            sorted({(k, p, t) for k, p, t in findings}),
            sorted({int(e) for e in ledger_events}),
        ],
        ensure_ascii=False,
    )
    return hashlib.sha256(raw.encode("utf-8", "surrogatepass")).hexdigest()


def draft_fingerprint(prop: Proposed) -> str:
    from geode.queue.proposals import sha256

    d = prop.draft
    return fingerprint(
        d.domain,
        d.kind,
        [(c.path, c.before_sha, sha256(c.after)) for c in d.changes],
        [(f.kind, f.path, f.target) for f in prop.findings],
        list(prop.ledger_events),
    )


def held_fingerprints(engine, run_id: str = "") -> dict[str, str]:
    """``{fingerprint: reason}`` of the proposals (of any agent) that hold an identical draft
    back. Those of ``run_id`` itself are left out: a rerun of the same run lists its own
    proposals again (``file_proposal`` finds them by ``(run_id, key)``), it is not held back."""
    from sqlalchemy import inspect, select

    from geode.agents.contract import tables
    from geode.queue.tables import C, P

    out: dict[str, str] = {}
    if engine is None or not inspect(engine).has_table("proposal"):
        return out
    _run, finding = tables()
    with engine.connect() as conn:
        rows = conn.execute(
            select(P.c.id, P.c.domain, P.c.kind, P.c.status, P.c.evidence)
            .where(P.c.status.in_(tuple(HOLD_REASONS)), P.c.run_id != run_id)
            .order_by(P.c.id)
        ).all()
        if not rows:
            return out
        ids = [r.id for r in rows]
        changes: dict[int, list] = {}
        for start in range(0, len(ids), 500):
            for pid, path, before, after in conn.execute(
                select(C.c.proposal_id, C.c.path, C.c.before_sha, C.c.after_sha).where(
                    C.c.proposal_id.in_(ids[start : start + 500])
                )
            ):
                changes.setdefault(pid, []).append((path, before, after))
        evidence: dict[int, list] = {}
        finding_ids: set[int] = set()
        for r in rows:
            try:
                ev = [e for e in json.loads(r.evidence or "[]") if isinstance(e, dict)]
            except ValueError:
                ev = []
            evidence[r.id] = ev
            finding_ids.update(int(e["finding"]) for e in ev if "finding" in e)
        found: dict[int, tuple[str, str, str]] = {}
        fids = sorted(finding_ids)
        for start in range(0, len(fids), 500):
            for fid, kind, path, target in conn.execute(
                select(finding.c.id, finding.c.kind, finding.c.path, finding.c.target).where(
                    finding.c.id.in_(fids[start : start + 500])
                )
            ):
                found[fid] = (kind, path, target)
    for r in rows:
        ev = evidence[r.id]
        fp = fingerprint(
            r.domain,
            r.kind,
            changes.get(r.id, []),
            [found[int(e["finding"])] for e in ev if "finding" in e and int(e["finding"]) in found],
            [int(e["ledger_event"]) for e in ev if "ledger_event" in e],
        )
        out[fp] = HOLD_REASONS[r.status]
    return out


# -- no harm ---------------------------------------------------------------------------------
@dataclass
class _Links:
    """What one note's links resolve to: ok destinations counted, the forms written, the bad ones."""

    ok: Counter = field(default_factory=Counter)
    forms: set = field(default_factory=set)
    bad: list = field(default_factory=list)  # (line, form, status)


def _dest_key(links, note_path: str, res) -> str:
    """Where an ok link lands, comparable before and after a move: a store path, or the
    absolute place outside the store."""
    p = res.path
    if p in links.notes or p in links.files or p in links.dirs:
        return p
    if res.reason == "in the project":
        return "project:" + p
    base = posixpath.dirname(note_path)
    return "outside:" + os.path.normpath(os.path.join(links.root, base, p))


def _links_of(links, note) -> _Links:
    out = _Links()
    for ref in links.refs(note):
        res = links.resolve(note, ref)
        form = (ref.syntax, ref.raw or ref.target, ref.anchor)
        out.forms.add(form)
        if res.status == "ok":
            out.ok[_dest_key(links, note.path, res)] += 1
        elif res.status in BAD:
            out.bad.append((ref.line, form, res.status))
    return out


def _stem(path: str) -> str:
    base = path.rsplit("/", 1)[-1]
    return base.rsplit(".", 1)[0].casefold() if "." in base else base.casefold()


def _identity(note) -> tuple:
    """What a link may name a note by, besides its path."""
    return (note.name, note.title, note.permalink, tuple(note.aliases))


def _keys(note) -> set[str]:
    """The last words a link that lands on ``note`` can end with (casefolded, suffix dropped)."""
    keys = {_stem(note.path), note.stem.casefold()}
    for k in (note.name, note.title, note.permalink, *note.aliases):
        if k:
            keys.add(_stem(str(k)))
    if _stem(note.path) in ("readme", "index") and "/" in note.path:
        keys.add(_stem(note.path.rsplit("/", 1)[0]))  # a link to the folder lands on its README
    return keys


def _ref_key(ref) -> str:
    from urllib.parse import unquote

    t = unquote(ref.target).strip().rstrip("/")
    return _stem(t) if t else ""


class Baseline:
    """The store's links as they resolve today, worked out only as far as a check needs: the
    resolver is built on first use, a note's links once each, and who links to a note by a
    pass that resolves only the references whose last word could name it."""

    def __init__(self, load, links=None) -> None:
        self.load = load
        self.notes = {n.path: n for n in load.notes}
        # the agent's own resolver, when it is the one this would build (``StoreLinks(load)``):
        # a second one over 100,000 notes cost the Cleaner 200 MB and a walk of the store
        self._links = links if links is not None and links.load is load and links.built_as_default() else None
        self._of: dict[str, _Links] = {}
        stems: dict[str, list[str]] = {}
        for n in load.notes:
            stems.setdefault(_stem(n.path), []).append(n.path)
        self.stems: dict[str, tuple[str, ...]] = {k: tuple(v) for k, v in stems.items()}  # tuples: less memory

    @property
    def links(self):
        if self._links is None:
            from geode.links.resolver import StoreLinks

            self._links = StoreLinks(self.load)
        return self._links

    def of(self, path: str) -> _Links:
        if path not in self._of:
            note = self.notes.get(path)
            self._of[path] = _links_of(self.links, note) if note is not None else _Links()
        return self._of[path]

    def incoming(self, targets: set[str]) -> dict[str, set[str]]:
        """``{target: notes whose links resolve to it today}`` for ``targets``."""
        keys: set[str] = set()
        for t in targets:
            if t in self.notes:
                keys |= _keys(self.notes[t])
            keys.add(_stem(t))
        out: dict[str, set[str]] = {}
        links = self.links
        for n in self.load.notes:
            for ref in links.refs(n):
                if _ref_key(ref) not in keys and ref.target.strip():
                    continue
                res = links.resolve(n, ref)
                if res.status == "ok" and res.path in targets:
                    out.setdefault(res.path, set()).add(n.path)
        return out


def _harmless(base: Baseline, draft) -> bool:
    """A draft that only edits frontmatter values no link resolves by (status, salience, a
    binding, dates): it cannot change where any link lands; not re-checked."""
    from geode.kernel.errors import GeodeError
    from geode.kernel.note import parse_note

    for c in draft.changes:
        if c.before_sha is None or c.after is None or c.path not in base.notes:
            return False
        try:
            after = parse_note(bytes(c.after).decode("utf-8"), c.path)
        except (UnicodeDecodeError, GeodeError, ValueError):
            return False
        before = base.notes[c.path]
        if after.body != before.body or _identity(after) != _identity(before):
            return False
    return True


def harms(base: Baseline, drafts: list) -> dict[int, list[str]]:
    """``{index of draft: [what it would break]}`` for the drafts that would do harm, applied
    together to a copy of the store (a harmful one is taken out and the rest checked again)."""
    active = [i for i, d in enumerate(drafts) if not _harmless(base, d)]
    found: dict[int, list[str]] = {}
    while active:
        problems = _check(base, {i: drafts[i] for i in active})
        if not problems:
            break
        found.update(problems)
        active = [i for i in active if i not in problems]
    return found


def _check(base: Baseline, drafts: dict) -> dict[int, list[str]]:
    from geode.kernel.errors import GeodeError
    from geode.kernel.note import parse_note
    from geode.kernel.store import StoreLoad

    problems: dict[int, list[str]] = {}
    notes = dict(base.notes)
    owner: dict[str, int] = {}
    moves: dict[str, str] = {}
    created: set[str] = set()
    removed: set[str] = set()
    modified: set[str] = set()
    for i, d in drafts.items():
        gone = [c.path for c in d.changes if c.after is None]
        made = [c.path for c in d.changes if c.before_sha is None]
        if len(gone) == 1 and len(made) == 1:
            moves[gone[0]] = made[0]
        for c in d.changes:
            owner[c.path] = i
            if c.after is None:
                removed.add(c.path)
                notes.pop(c.path, None)
                continue
            (created if c.before_sha is None else modified).add(c.path)
            if not c.path.lower().endswith((".md", ".mdc", ".markdown")):
                continue
            try:
                notes[c.path] = parse_note(bytes(c.after).decode("utf-8"), c.path)
            except (UnicodeDecodeError, GeodeError, ValueError) as exc:
                problems.setdefault(i, []).append(f"{c.path} would become unreadable: {exc}")
    if problems:
        return problems
    load = base.load
    copy = StoreLoad(load.root, load.domain, list(notes.values()), list(load.problems), load.files_seen, load.folders)
    after = base.links.with_notes(copy)  # what StoreLinks(copy) builds, from today's resolver
    # the walk read the disk as it is today: the copy's files are today's, moved
    after.files.difference_update(removed)
    after.files.update(created)
    for c in created:
        parts = c.split("/")[:-1]
        for k in range(1, len(parts) + 1):
            after.dirs.add("/".join(parts[:k]))
    inverse = {v: k for k, v in moves.items()}

    # the notes whose links may resolve differently: the changed ones, those that link to a
    # changed or removed note, and those that link to a note sharing a new file's name
    touched_targets = set(removed | modified)
    for c in created:
        touched_targets.update(base.stems.get(_stem(c), ()))
    incoming = base.incoming(touched_targets) if touched_targets else {}
    sources: set[str] = set(created | modified)
    for t in touched_targets:
        for src in incoming.get(t, ()):
            sources.add(moves.get(src, src))

    def blame(*paths: str) -> set[int]:
        got = {owner[p] for p in paths if p in owner}
        if not got:  # a name shared with a new file: the drafts that made a file of that name
            stems = {_stem(p) for p in paths}
            got = {owner[c] for c in created if _stem(c) in stems}
        return got or {owner[p] for p in created | removed}

    for a in sorted(sources):
        note = notes.get(a)
        if note is None:
            continue
        b = inverse.get(a, a if a not in created else None)
        now = _links_of(after, note)
        if b is not None:
            was = base.of(b)
            for d, n in was.ok.items():
                d2 = moves.get(d, d)
                if now.ok[d2] < n:
                    lost = n - now.ok[d2]
                    where = d if d2 == d else f"{d} (moved to {d2})"
                    for i in blame(a, d, d2):
                        problems.setdefault(i, []).append(
                            f"{lost} of the {n} link(s) in {b} to {where} that resolve today would not resolve"
                        )
            forms_before = was.forms
        else:
            # a new note: a link it copies from a note of its own proposal (a merge stub) keeps
            # the form it had there; any other that does not resolve is the proposal's doing
            forms_before = set()
            for p, i in owner.items():
                if i == owner.get(a) and p in base.notes:
                    forms_before |= base.of(p).forms
        for line, form, status in now.bad:
            if form in forms_before:
                continue  # written that way before the proposal: not its doing
            for i in blame(a):
                problems.setdefault(i, []).append(
                    f"{a}:{line}: the link {form[1]!r} would be written in a form that does not resolve ({status})"
                )
    return problems


# -- the gate ------------------------------------------------------------------------------------
def screen(ctx, agent: str, report: Report) -> None:
    """Keep in ``report.proposed`` only what may be filed; count the rest in
    ``report.held_back`` and add a finding for each draft that would do harm."""
    if not report.proposed:
        return
    held = held_fingerprints(ctx.engine, ctx.run_id)
    keep: list[Proposed] = []
    counts: Counter = Counter()
    seen: set[str] = set()
    for prop in report.proposed:
        fp = draft_fingerprint(prop)
        reason = held.get(fp)
        if reason is not None:
            counts[reason] += 1
            continue
        if fp in seen:  # the same draft twice in one run: filed once
            continue
        seen.add(fp)
        if prop.draft.domain in (getattr(ctx.settings, "team_rules", None) or {}):
            # a team-rules domain is derived from a team's own files: no agent edits it
            counts["team-rules domain"] += 1
            continue
        keep.append(prop)
    keep = _header_screen(ctx, keep, report, counts)
    from geode.agents.evidence_gate import provenance_screen

    keep = provenance_screen(ctx, keep, report, counts)
    by_domain: dict[str, list[int]] = {}
    for i, prop in enumerate(keep):
        by_domain.setdefault(prop.draft.domain, []).append(i)
    harmful: dict[int, list[str]] = {}
    for domain, idx in by_domain.items():
        try:
            load = ctx.load(domain)
        except (KeyError, OSError):
            continue  # an unknown domain: filing refuses the draft with its own message
        found = harms(Baseline(load, ctx.resolvers.get(domain)), [keep[i].draft for i in idx])
        harmful.update({idx[j]: why for j, why in found.items()})
    for i, why in sorted(harmful.items()):
        d = keep[i].draft
        main = next((c.path for c in d.changes if c.after is None), d.changes[0].path if d.changes else "")
        report.findings.append(
            Finding(
                HARM_FINDING,
                main,
                0,
                d.key,
                f"not filed: {d.title} ({d.kind}) would break links: "
                + "; ".join(why[:5])
                + (f"; and {len(why) - 5} more" if len(why) > 5 else ""),
                d.domain,
                severity="warning",
            )
        )
        counts[WOULD_HARM] += 1
    report.proposed = [p for i, p in enumerate(keep) if i not in harmful]
    report.held_back = {k: counts[k] for k in sorted(counts)}


def _header_screen(ctx, keep: list[Proposed], report: Report, counts: Counter) -> list[Proposed]:
    """The drafts that leave every tool's own header as its tool reads it
    (``geode.agents.header_gate``); the others become findings."""
    from geode.agents.header_gate import HEADER_FINDING, WOULD_CHANGE_HEADER, header_harms

    out: list[Proposed] = []
    roots: dict[str, str | None] = {}
    for prop in keep:
        d = prop.draft
        if d.domain not in roots:
            try:
                roots[d.domain] = ctx.load(d.domain).root
            except (KeyError, OSError):
                roots[d.domain] = None
        root = roots[d.domain]
        why = header_harms(root, d) if root else []
        if not why:
            out.append(prop)
            continue
        report.findings.append(
            Finding(
                HEADER_FINDING,
                d.changes[0].path if d.changes else "",
                0,
                d.key,
                f"not filed: {d.title} ({d.kind}): " + "; ".join(why[:5]),
                d.domain,
                severity="warning",
            )
        )
        counts[WOULD_CHANGE_HEADER] += 1
    return out
