"""The filing gate's provenance check: no proposal of any agent rests on a fact geode wrote.

Why here, as the last line, and not only in each agent: a trusting person approves every
proposal, and a chain that justifies itself needs only one agent to forget (the Cleaner read
its own ``superseded`` status as a person's the night after; the Librarian could rewrite a link
to a merge stub that exists only because a proposal made it; the Gardener could retire the
crystal its own stub created). Every draft's facts are worked out again here against the
applied proposals (``geode.queue.provenance``), whatever the agent said about them:

- the facts the agent named (``Proposed.facts``: a frontmatter value, a line, a file, a
  folder's count, a move, a redirect);
- and a fact for the place of each finding it rests on: the finding's line (``line``) or, for a
  whole-file finding, the file (``file``); not for a proposal that says its findings only place
  the change (``Proposed.place_facts``: a salience step rests on the ledger rows it cites).

A fact is geode's when an applied proposal wrote it and the store still holds what it wrote:
a file it created (not the new place of a moved note), a frontmatter value it set, a line it
added, a folder count that is more than the person's notes in it. A ``move`` fact (an applied
move of this very document) is the one kind that may be geode's: a person approved that move,
and following it is what it asked for. A draft resting on any other geode-made fact is not
filed: it becomes a ``proposal-rests-on-geode`` finding naming the fact and the proposal that
wrote it, counted under ``geode-made-evidence``. The facts of the drafts that pass are kept on
the draft, each with its provenance, for the queue (``proposal_fact``) and a person.
"""

from __future__ import annotations

from collections import Counter

from geode.agents.contract import Fact, Finding, Proposed, Report

#: the finding a refused draft becomes, and the reason it is counted under
GEODE_FINDING = "proposal-rests-on-geode"
GEODE_MADE = "geode-made-evidence"
#: fact kinds that may rest on an applied proposal: the person approved that very move
MAY_BE_GEODE = frozenset({"move"})


def _facts_of(prop: Proposed, notes: dict) -> list[Fact]:
    """The agent's facts, then one for the place of each finding (once each)."""
    out = list(prop.facts)
    seen = {(f.kind, f.path, f.line) for f in out}
    for f in prop.findings if prop.place_facts else ():
        note = notes.get(f.path)
        if note is None:
            continue  # a folder, a store-wide finding: the agent names its count or file
        if f.line > 0:
            lines = note.text.split("\n")
            text = lines[f.line - 1] if f.line <= len(lines) else ""
            fact = Fact("line", f.path, f.line, text.rstrip("\r"))
        else:
            fact = Fact("file", f.path, 0, "exists")
        if (fact.kind, fact.path, fact.line) not in seen:
            seen.add((fact.kind, fact.path, fact.line))
            out.append(fact)
    return out


_FOLDERS: dict[int, tuple[dict, dict[str, list[str]]]] = {}


def _folders(notes: dict) -> dict[str, list[str]]:
    """``{folder: the notes directly in it}``, worked out once per store load (a count fact
    per proposal over the whole store made 1,000 archives quadratic)."""
    got = _FOLDERS.get(id(notes))
    if got is None or got[0] is not notes:
        out: dict[str, list[str]] = {}
        for p in notes:
            out.setdefault(p.rsplit("/", 1)[0] if "/" in p else "", []).append(p)
        _FOLDERS.clear()
        _FOLDERS[id(notes)] = got = (notes, out)
    return got[1]


def _who(fact: Fact, prov, notes: dict) -> int | None:
    """The applied proposal that wrote this fact as the store holds it now, or None."""
    from geode.queue.provenance import ABSENT

    kind, path = fact.kind, fact.path
    if kind == "file":
        return prov.made_by_geode(path)
    if kind == "line":
        note = notes.get(path)
        if note is None:
            return prov.made_by_geode(path)
        lines = note.text.split("\n")
        text = lines[fact.line - 1] if 0 < fact.line <= len(lines) else str(fact.value or "")
        return prov.wrote_line(path, text.rstrip("\r"))
    if kind == "frontmatter":
        key = (fact.value or {}).get("key", "") if isinstance(fact.value, dict) else str(fact.value or "")
        note = notes.get(path)
        current = note.frontmatter.get(key, ABSENT) if note is not None else ABSENT
        return prov.wrote(path, key, current)
    if kind == "count":
        claimed = int((fact.value or {}).get("count", 0)) if isinstance(fact.value, dict) else int(fact.value or 0)
        members = _folders(notes).get(path.strip("/"), ())
        made = [prov.made_by_geode(p) for p in members if prov.made_by_geode(p)]
        if made and claimed > len(members) - len(made):
            return made[0]  # the count holds files geode created: "over its cap" by its own stubs
        return None
    if kind == "move":
        v = fact.value if isinstance(fact.value, dict) else {}
        return prov.moved_by.get(str(v.get("to", "")))
    if kind == "redirect":
        # the file that declares it: one geode created, or a line of it geode wrote, is geode's
        made = prov.made_by_geode(path)
        note = notes.get(path)
        if made or note is None or fact.line <= 0:
            return made
        lines = note.text.split("\n")
        return prov.wrote_line(path, lines[fact.line - 1]) if fact.line <= len(lines) else None
    # a git rename, a kind this gate does not know: the file that declares it
    return prov.made_by_geode(path) if path else None


def provenance_screen(ctx, keep: list[Proposed], report: Report, counts: Counter) -> list[Proposed]:
    """The drafts whose every fact is a person's (or an approved move); the others become
    findings. Each kept draft's facts are set on it with their provenance."""
    from geode.queue.provenance import load_provenance

    out: list[Proposed] = []
    per_domain: dict[str, tuple] = {}
    for prop in keep:
        d = prop.draft
        if d.domain not in per_domain:
            try:
                load = ctx.load(d.domain)
                notes = {n.path: n for n in load.notes}
            except (KeyError, OSError):
                notes = {}
            per_domain[d.domain] = (load_provenance(ctx.engine, d.domain), notes)
        prov, notes = per_domain[d.domain]
        facts = _facts_of(prop, notes)
        geode_made = []
        for fact in facts:
            pid = _who(fact, prov, notes)
            fact.provenance = f"geode:{pid}" if pid else "person"
            if pid and fact.kind not in MAY_BE_GEODE:
                geode_made.append((fact, pid))
        if not geode_made:
            d.facts = [f.as_dict() for f in facts]
            out.append(prop)
            continue
        said = "; ".join(
            f"{f.kind} {f.path}{':' + str(f.line) if f.line else ''} was written by proposal #{pid}"
            for f, pid in geode_made[:5]
        )
        report.findings.append(
            Finding(
                GEODE_FINDING,
                geode_made[0][0].path,
                geode_made[0][0].line,
                d.key,
                f"not filed: {d.title} ({d.kind}) rests on what geode itself wrote, never evidence: {said}",
                d.domain,
                severity="warning",
            )
        )
        counts[GEODE_MADE] += 1
    _FOLDERS.clear()  # held only while the drafts are screened
    return out
