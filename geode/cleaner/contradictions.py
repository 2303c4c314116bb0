"""The Cleaner's contradictions: two versions of one truth told by their frontmatter.

- two ``status: stable`` notes on one subject (frontmatter ``subject``, else the title) whose
  validity windows overlap (``geode.kernel.dates.ValidityWindow``: ``valid_from`` and
  ``valid_to`` both inclusive, ``valid_to`` the last day a note holds, an absent date unbounded;
  a window sharing one boundary day overlaps): the older (earlier ``valid_from``, then
  ``last_verified``) is proposed ``superseded``. A pair where either date is not YYYY-MM-DD is
  not judged (skipped, with the file and line);
- a note named in the ``supersedes`` of a live note and still ``status: stable``: proposed
  ``superseded``;
- a ``supersedes`` chain with a loop: the oldest note of the loop gets one edit that drops its
  ``supersedes`` entries naming the loop and sets it ``superseded``.

Apart from the run (``geode.cleaner.agent``) because it is one check with its own graph work
(strongly connected components of the ``supersedes`` edges) and its own frontmatter edit; it is
handed the run's state (``CleanerRun``: ``notes``, ``domain``, ``resolve``, ``bytes_of``,
``free``, ``status_proposal``, ``prov``) and reads nothing off the agent.

Only a person's word counts (``geode.queue.provenance``): a ``supersedes`` an applied proposal
wrote (or in a file one created, such as a merge draft) makes no edge, and a ``status: stable``
geode set is not compared. This is the one way a note becomes superseded: a person writes
``supersedes:`` in the note that stays, and this check proposes that one status change.
"""

from __future__ import annotations

import hashlib

from geode.agents.contract import Finding, Proposed, Report, Skipped
from geode.cleaner.notes import CleanerRun, note_age, proposal_key, supersedes_targets
from geode.kernel.crystal import RETIRED_STATUSES
from geode.kernel.dates import ValidityWindow
from geode.kernel.frontmatter_edit import FrontmatterEditError, set_key
from geode.links.names import loose


class Contradictions:
    """Findings and status/edit proposals for the three kinds above."""

    def __init__(self, run: CleanerRun):
        self.run = run

    def check(self, report: Report) -> None:
        ex = report.examined
        notes = self.run.notes
        edges: dict[str, list[tuple[str, str]]] = {}  # path -> [(target text, resolved path)]
        for p, n in notes.items():
            if self.run.geode_wrote(p, "supersedes"):
                continue  # a supersedes geode wrote (a file it made, an edit it applied) is no one's word
            for t in supersedes_targets(n.frontmatter.get("supersedes")):
                ex["supersedes_edges"] += 1
                r = self.run.resolve(t)
                if r is not None:
                    edges.setdefault(p, []).append((t, r))
        loops = _loops({p: [r for _t, r in es] for p, es in edges.items()})
        in_loop = {p for comp in loops for p in comp}
        # 1. loops
        for comp in loops:
            members = sorted(comp)
            oldest = min((notes[p] for p in members), key=note_age)
            drop = [t for t, r in edges.get(oldest.path, []) if r in comp]
            chain = " -> ".join(members)
            f = Finding(
                "supersedes-loop",
                oldest.path,
                oldest.line_of("supersedes"),
                chain,
                f"supersedes chain loops ({chain}); the oldest note of the loop, {oldest.path}, "
                f"drops its supersedes entries {drop} and becomes superseded",
                self.run.domain,
            )
            report.findings.append(f)
            # after the drop, the members still superseded by a member of the loop (the head, the
            # one nobody in the loop supersedes any more, stays)
            left = {r for q in members if q != oldest.path for _t, r in edges.get(q, []) if r in comp}
            others = sorted(q for q in left if q != oldest.path and notes[q].status not in RETIRED_STATUSES)
            self._loop_proposal(report, oldest, drop, len(comp) > 1, others, f)
        # 2. superseded but still stable
        for p, es in sorted(edges.items()):
            if notes[p].status in RETIRED_STATUSES:
                continue
            for _t, r in es:
                if r == p or r in in_loop or notes[r].status != "stable":
                    continue
                old = notes[r]
                f = Finding(
                    "superseded-still-stable",
                    r,
                    old.line_of("status"),
                    p,
                    f"{p} supersedes {r}, which is still marked stable",
                    self.run.domain,
                )
                report.findings.append(f)
                self.run.status_proposal(
                    report,
                    r,
                    "superseded",
                    f"supersede:{self.run.domain}:{r}",
                    f"Mark {r} superseded (superseded by {p})",
                    f"{p} names {r} in its supersedes, yet {r} is still status: stable; two "
                    f"versions of one truth would both be delivered. Facts: {p}: supersedes {r} "
                    f"(written by a person: no applied proposal wrote it).",
                    [f],
                )
        # 3. two stable notes on one subject with overlapping validity
        related = {(a, b) for a, es in edges.items() for _t, b in es}
        subjects: dict[str, list] = {}
        for n in notes.values():
            if n.status != "stable" or self.run.geode_wrote(n.path, "status"):
                continue  # a stable status geode set is not a person's claim to compare
            ex["stable_notes"] += 1
            subj = n.frontmatter.get("subject") or n.title
            key = loose(str(subj))
            if key:
                subjects.setdefault(key, []).append(n)
        for _subj, group in sorted(subjects.items()):
            group.sort(key=note_age)
            for i in range(len(group)):
                for j in range(i + 1, len(group)):
                    a, b = group[i], group[j]
                    ex["subject_pairs"] += 1
                    if (a.path, b.path) in related or (b.path, a.path) in related:
                        continue
                    bad = next(((n, e) for n in (a, b) for e in _window(n).problems), None)
                    if bad is not None:
                        n, e = bad
                        report.skipped.append(
                            Skipped(
                                n.path,
                                n.line_of(e.field),
                                b.path if n is a else a.path,
                                f"not judged against a note on the same subject: {e}",
                                self.run.domain,
                            )
                        )
                        continue
                    if not _overlap(a, b):
                        continue
                    f = Finding(
                        "contradiction",
                        a.path,
                        a.line_of("status"),
                        b.path,
                        f"{a.path} and {b.path} are both stable on one subject "
                        f"({a.frontmatter.get('subject') or a.title!s}) with overlapping validity",
                        self.run.domain,
                    )
                    report.findings.append(f)
                    self.run.status_proposal(
                        report,
                        a.path,
                        "superseded",
                        f"overlap:{self.run.domain}:{a.path}",
                        f"Mark {a.path} superseded by the newer {b.path}",
                        f"Both are status: stable on the same subject and their validity windows "
                        f"overlap; {a.path} is the older (valid_from/last_verified). Facts: both "
                        f"statuses stable (written by a person: no applied proposal wrote them).",
                        [f],
                    )

    def _loop_proposal(self, report, note, drop: list[str], set_status: bool, others: list[str], f: Finding) -> None:
        from geode.queue.changes import set_frontmatter_status
        from geode.queue.proposals import FileChange, ProposalDraft, ProposalError

        if not self.run.free(note.path, *others):
            return
        data = self.run.bytes_of(note.path)
        if data is None:
            return
        try:
            after = _drop_supersedes(data, drop, note.path)
            if after is None:
                return  # not a mechanical edit: the finding stays for a person
            if set_status:
                after = set_frontmatter_status(after, "superseded", note.path)
            changes = [FileChange(note.path, hashlib.sha256(data).hexdigest(), after)]
            for q in others:
                qd = self.run.bytes_of(q)
                if qd is None:
                    return
                changes.append(
                    FileChange(q, hashlib.sha256(qd).hexdigest(), set_frontmatter_status(qd, "superseded", q))
                )
        except (ProposalError, FrontmatterEditError) as exc:
            report.skipped.append(Skipped(note.path, f.line, f.target, f"no proposal: {exc}", self.run.domain))
            return
        self.run.touched.update((note.path, *others))
        draft = ProposalDraft(
            agent=self.run.name,
            kind="edit",
            domain=self.run.domain,
            title=f"Break the supersedes loop at {note.path}",
            rationale=f"The supersedes chain loops ({f.target}). {note.path} is the oldest "
            f"note of the loop: its entries {drop} are dropped"
            + (" and it is marked superseded." if set_status else ".")
            + (
                f" {', '.join(others)}, still superseded within the chain, are marked superseded too." if others else ""
            ),
            evidence=[],
            changes=changes,
            run_id=self.run.ctx.run_id or "adhoc",
            key=proposal_key(f"loop:{self.run.domain}:{note.path}"),
        )
        report.proposed.append(Proposed(draft, [f]))


def _window(note) -> ValidityWindow:
    return ValidityWindow.from_frontmatter(note.frontmatter)


def _overlap(a, b) -> bool:
    """Whether the validity windows of two notes share a day (both ends inclusive)."""
    return _window(a).overlaps(_window(b))


def _loops(graph: dict[str, list[str]]) -> list[set[str]]:
    """Strongly connected components with a cycle (size > 1, or a note superseding itself)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[set[str]] = []
    counter = [0]
    nodes = sorted(set(graph) | {t for ts in graph.values() for t in ts})
    for start in nodes:
        if start in index:
            continue
        work = [(start, iter(graph.get(start, [])))]
        index[start] = low[start] = counter[0]
        counter[0] += 1
        stack.append(start)
        on.add(start)
        while work:
            v, it = work[-1]
            advanced = False
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(graph.get(w, []))))
                    advanced = True
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = set()
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.add(w)
                    if w == v:
                        break
                if len(comp) > 1 or v in graph.get(v, []):
                    out.append(comp)
    return sorted(out, key=lambda c: sorted(c))


def _drop_supersedes(data: bytes, drop: list[str], path: str = "") -> bytes | None:
    """``data`` with the ``supersedes`` entries ``drop`` removed from the frontmatter, by the one
    frontmatter editor (a flow list stays a flow list, a block list a block list; a scalar that
    is dropped leaves ``[]``); None when no entry of it is one of ``drop``.
    ``FrontmatterEditError`` when the edit cannot be made safely."""
    from geode.kernel.note import parse_note

    try:
        note = parse_note(data.decode("utf-8"), path)
    except (UnicodeDecodeError, ValueError):
        return None
    value = note.frontmatter.get("supersedes")
    items = value if isinstance(value, list) else [value]
    drop_set = {d.strip() for d in drop}
    keep = [t for t in items if not (isinstance(t, str) and next(iter(supersedes_targets(t)), None) in drop_set)]
    if len(keep) == len(items):
        return None
    return set_key(data, "supersedes", keep, path=path)
