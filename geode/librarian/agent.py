"""The Librarian: keeps a store navigable.

It finds links and relations to notes that do not exist (with the one good target when the
note was renamed, known from the move history of applied proposals, or when exactly one note
matches the name, permalink or one of its aliases), file paths named in notes that no longer
exist, anchors to headings that are gone, signposts (index and README notes) whose entries
moved or vanished, orphans, frontmatter other YAML readers reject, and crystals that can never
fire (the delivery core's lint, not a second copy of it). Typed relations to notes not written
yet are forward references, reported as such and never as broken.

It proposes only link rewrites with exactly one good target, one edit per file (two proposals
on one file would conflict once the first is applied); everything else stays a finding.
"""

from __future__ import annotations

import hashlib

from geode.agents.contract import Agent, Context, Fact, Finding, Proposed, Report, Skipped, one_note
from geode.delivery.lint import lint_note
from geode.kernel.crystal import RETIRED_STATUSES
from geode.kernel.header_format import KIND_WORDS, header_kind
from geode.links.names import is_signpost
from geode.links.relink import move_history, rewrite_line
from geode.links.resolver import StoreLinks

#: lint codes that mean a crystal never fires (errors of the binding and the essence);
#: ``essence-over-budget`` fires (cut), so it is not one of them
_FIRES_CUT = {"essence-over-budget"}
#: frontmatter read leniently that strict YAML readers reject
_NOT_YAML = {"unquoted-special", "reserved-indicator", "unquoted-colon"}
#: frontmatter keys that attach a note without links (Cursor rules, skills, crystals)
_ATTACHED_KEYS = ("crystal", "globs", "alwaysApply", "trigger")
#: which examined counter each reference syntax adds to
_COUNTERS = {
    "relation": "relations",
    "wiki": "wikilinks",
    "markdown": "markdown_links",
    "reference": "reference_links",
    "path": "named_paths",
    "mention": "mentions",
    "refuse": "reference_links",
    "blockref": "block_refs",
    "shortcode": "shortcodes",
    "snippet": "snippets",
}
ENTRY_STEMS = {"skill", "agents", "claude", "changelog", "contributing", "license"}


class Librarian(Agent):
    name = "librarian"

    def __init__(self, project_root: str | None = None, find_project: bool = True):
        self.project_root = project_root
        self.find_project = find_project

    def examine(self, ctx: Context) -> Report:
        report = Report(agent=self.name)
        ex = report.examined
        for key in (
            "notes",
            "unreadable",
            "folders",
            "links",
            "relations",
            "wikilinks",
            "markdown_links",
            "reference_links",
            "named_paths",
            "mentions",
            "mentions_unchecked",
            "resolved",
            "anchors",
            "crystals",
            "signposts",
            "notes_without_frontmatter",
            "mdc_rules",
        ):
            ex.setdefault(key, 0)
        from sqlalchemy.exc import SQLAlchemyError

        try:
            moves_all = move_history(ctx.engine)
        except SQLAlchemyError as exc:  # the queue unreadable: say so, carry on without suggestions from it
            moves_all = {}
            report.message = f"move history unavailable ({exc}); renames are matched by name only"
        orders = []
        flavours = []
        configured = ctx.settings.upkeep.flavour  # [upkeep] flavour: None means detect
        for domain, load in ctx.readable(report):
            ex["folders"] += load.folders
            links = StoreLinks(
                load,
                project_root=self.project_root,
                moves=moves_all.get(domain, {}),
                find_project=self.find_project,
                flavour=configured,
            )
            flavours.append(f"{domain}: {links.flavour.said}")
            if sum(links.wiki_order_votes.values()):
                orders.append(
                    f"{domain}: [[{links.wiki_order}]] ({links.wiki_order_votes[links.wiki_order]} of "
                    f"{sum(links.wiki_order_votes.values())} piped links decided)"
                )
            self._domain(ctx, domain, load, links, report)
        tool = {k: report.examined.get(f"header:{k}", 0) for k in KIND_WORDS}
        if any(tool.values()):
            said = ", ".join(f"{n} {KIND_WORDS[k]}" for k, n in tool.items() if n)
            report.message = "; ".join(filter(None, [report.message, f"headers in their tool's own format: {said}"]))
        if flavours:
            report.message = "; ".join(filter(None, [report.message, "flavour " + ", ".join(flavours)]))
        if orders:
            report.message = "; ".join(filter(None, [report.message, "wikilink order " + ", ".join(orders)]))
        return report

    # -- one domain --------------------------------------------------------------------
    def _domain(self, ctx: Context, domain: str, load, links: StoreLinks, report: Report) -> None:
        ex = report.examined
        incoming: dict[str, int] = {}
        internal_edges = 0
        rewrites: dict[str, list[tuple[object, str, Finding]]] = {}
        from geode.links.plausible import audit, construct_of

        read = {note.path: [(ref, links.resolve(note, ref)) for ref in links.refs(note)] for note in load.notes}
        unreadable = audit(
            ((p, ref, res.status, bool(res.suggestion)) for p, pairs in read.items() for ref, res in pairs)
        )
        for u in sorted(unreadable.values(), key=lambda u: u.construct):
            # said once, as a failure of the reading: no finding or proposal rests on it
            report.findings.append(Finding("cannot-read", "", 0, u.construct, u.message, domain, severity="error"))
        for note in load.notes:
            ex["notes"] += 1
            if not note.has_frontmatter:
                ex["notes_without_frontmatter"] += 1
            if note.path.endswith(".mdc"):
                ex["mdc_rules"] += 1
            signpost = is_signpost(note) and not (links.flavour.name == "folder-notes" and "/" in note.path)
            ex["signposts"] += signpost
            kind = header_kind(note.path, note.text)
            if kind in KIND_WORDS:
                # the tool's own format: read as its tool reads it, never judged as YAML
                ex[f"header:{kind}"] = ex.get(f"header:{kind}", 0) + 1
            for line, code, message in note.fm_warnings if kind not in KIND_WORDS else ():
                if code in _NOT_YAML:
                    report.findings.append(
                        Finding(
                            "frontmatter-not-yaml",
                            note.path,
                            line,
                            "",
                            f"{message} (other YAML readers reject this file)",
                            domain,
                        )
                    )
            if "crystal" in note.frontmatter:
                ex["crystals"] += 1
                for p in lint_note(note, ctx.settings, domain):
                    if p.severity == "error" and p.code not in _FIRES_CUT:
                        report.findings.append(
                            Finding(
                                "never-fires",
                                note.path,
                                p.line,
                                p.code,
                                f"{p.message} [{p.code}]",
                                domain,
                                severity="error",
                            )
                        )
            for ref, res in read[note.path]:
                ex["links"] += 1
                counter = _COUNTERS[ref.syntax]
                ex[counter] = ex.get(counter, 0) + 1
                if ref.anchor:
                    ex["anchors"] += 1
                if unreadable and construct_of(ref, res.status) in unreadable:
                    ex["unreadable_uses"] = ex.get("unreadable_uses", 0) + 1
                    continue
                shown = ref.target + (f"#{ref.anchor}" if ref.anchor else "")
                if res.status == "unchecked":
                    ex["mentions_unchecked"] += 1
                    continue
                if res.status == "broken-mention":
                    report.findings.append(
                        Finding(
                            "broken-mention", note.path, ref.line, shown, f"mentions {ref.target}: {res.reason}", domain
                        )
                    )
                    continue
                if res.status == "ok":
                    ex["resolved"] += 1
                    if res.path in links.notes and res.path != note.path:
                        incoming[res.path] = incoming.get(res.path, 0) + 1
                        internal_edges += 1
                    continue
                if res.status == "skipped":
                    report.skipped.append(Skipped(note.path, ref.line, shown, res.reason, domain))
                    continue
                if res.status == "forward":
                    report.findings.append(
                        Finding(
                            "forward-reference",
                            note.path,
                            ref.line,
                            ref.target,
                            f"{ref.relation} [[{ref.target}]]: {res.reason}",
                            domain,
                            severity="info",
                        )
                    )
                    continue
                if res.status == "broken-anchor":
                    if res.path in links.notes and res.path != note.path:
                        incoming[res.path] = incoming.get(res.path, 0) + 1
                        internal_edges += 1
                    report.findings.append(Finding("broken-anchor", note.path, ref.line, shown, res.reason, domain))
                    continue
                if res.status == "undefined-reference":
                    report.findings.append(
                        Finding("broken-reference", note.path, ref.line, ref.target, res.reason, domain)
                    )
                    continue
                if res.status == "broken-block":
                    report.findings.append(
                        Finding("broken-block-ref", note.path, ref.line, ref.target, res.reason, domain)
                    )
                    continue
                if res.status == "missing-file":
                    report.findings.append(
                        Finding("missing-path", note.path, ref.line, shown, f"names {ref.target}: {res.reason}", domain)
                    )
                    continue
                # broken: a note that does not exist
                kind = "signpost-stale" if signpost else "broken-link"
                sugg = res.suggestion
                rewritable = bool(sugg)
                if sugg and ref.anchor and not links.anchor_resolves(sugg, ref.anchor):
                    # the file moved but the heading is not there: a rewrite would still not
                    # resolve (the no-harm gate would refuse the whole proposal); leave it to a person
                    rewritable = False
                    msg = (
                        f"links to {ref.target!r}, which does not exist; it is now {sugg}, which has no "
                        f"heading #{ref.anchor} (not rewritten)"
                    )
                elif sugg:
                    msg = f"links to {ref.target!r}, which does not exist; it is now {sugg}"
                else:
                    msg = f"links to {ref.target!r}, which does not exist ({res.reason})"
                if signpost:
                    msg = ("signpost entry moved: " if sugg else "signpost entry missing: ") + msg
                f = Finding(kind, note.path, ref.line, shown, msg, domain, sugg)
                report.findings.append(f)
                if rewritable and ref.syntax != "mention":
                    new_text = links.new_target_text(note, ref, sugg)
                    if (
                        new_text
                        and ref.syntax in ("wiki", "relation")
                        and not ref.alias
                        and not ref.anchor
                        and new_text != ref.target
                    ):
                        # keep what the reader saw: [[Old]] -> [[New|Old]] (or [[Old|New]] where the
                        # store writes the alias first)
                        new_text = (
                            f"{ref.target}|{new_text}"
                            if links.wiki_order == "alias|target"
                            else f"{new_text}|{ref.target}"
                        )
                    if new_text:
                        rewrites.setdefault(note.path, []).append((ref, new_text, f))
        # orphans: nobody links to them, in a store whose notes link to each other at all
        if unreadable:
            report.skipped.append(
                Skipped("", 0, "", "a construct of this store cannot be read: orphans not judged", domain)
            )
        elif internal_edges == 0:
            report.skipped.append(
                Skipped("", 0, "", "no links between notes in this store: orphans not judged", domain)
            )
        else:
            for note in load.notes:
                if incoming.get(note.path) or note.status in RETIRED_STATUSES:
                    continue
                if is_signpost(note) and not (links.flavour.name == "folder-notes" and "/" in note.path):
                    continue
                if links.flavour.name == "logseq" and note.path.startswith("journals/"):
                    continue  # a journal page is the day's entry: nothing is meant to link to it
                if any(k in note.frontmatter for k in _ATTACHED_KEYS) or note.stem.casefold() in ENTRY_STEMS:
                    continue
                report.findings.append(
                    Finding("orphan", note.path, 0, "", "no other note links here", domain, severity="info")
                )
        self._propose(ctx, domain, load, links, rewrites, report)

    # -- proposals ----------------------------------------------------------------------
    def _propose(self, ctx: Context, domain: str, load, links: StoreLinks, rewrites, report: Report) -> None:
        if not rewrites:
            return
        root = load.root
        for path, items in sorted(rewrites.items()):
            with one_note(report, self.name, domain, path):
                self._propose_one(ctx, domain, root, links, path, items, report)

    def _propose_one(
        self, ctx: Context, domain: str, root: str, links: StoreLinks, path: str, items, report: Report
    ) -> None:
        """The rewrite proposal of one note's links (none when it changed since it was read)."""
        import os

        from geode.queue.proposals import FileChange, ProposalDraft

        full = os.path.join(root, path)
        with open(full, "rb") as fh:
            data = fh.read()
        note = links.notes[path]
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            return
        if text != note.text:  # changed since it was read: the next run proposes on what is there
            return
        if "\r" in text.replace("\r\n", ""):  # a CR alone breaks lines the reader counts and split("\n") does not
            report.skipped.append(
                Skipped(path, 0, "", "a carriage return that does not end a line: links not rewritten", domain)
            )
            return
        lines = text.split("\n")
        applied: list[Finding] = []
        for ref, new_text, finding in items:
            i = ref.line - 1
            if not 0 <= i < len(lines):
                continue
            new = rewrite_line(lines[i], ref, new_text)
            if new is None or new == lines[i]:
                continue
            lines[i] = new
            applied.append(finding)
        if not applied:
            return
        after = "\n".join(lines).encode("utf-8")
        key = f"rewrite:{domain}:{path}"
        if len(key) > 255:
            key = "rewrite:" + hashlib.sha256(key.encode()).hexdigest()
        targets = ", ".join(f"{f.target} -> {f.suggestion}" for f in applied)
        draft = ProposalDraft(
            agent=self.name,
            kind="edit",
            domain=domain,
            title=f"Rewrite {len(applied)} link(s) in {path}",
            rationale=f"Each link names a note that does not exist and exactly one note is its good target: {targets}.",
            evidence=[],
            changes=[FileChange(path, hashlib.sha256(data).hexdigest(), after)],
            run_id=ctx.run_id or "adhoc",
            key=key,
        )
        # the new targets: a file geode created (a merge draft, a stub) is no target to send a
        # person's link to (geode.agents.evidence_gate); each link's own line is its finding's
        facts = [Fact("file", t, 0, "the link's new target") for t in sorted({f.suggestion for f in applied})]
        for ref, _new, f in items:
            target = links.notes.get(f.suggestion)
            if (
                f in applied
                and target is not None
                and ref.target.casefold() in {str(a).casefold() for a in target.aliases}
            ):
                # found by the alias it declares: the alias must be a person's too
                facts.append(Fact("frontmatter", f.suggestion, target.line_of("aliases"), {"key": "aliases"}))
        facts += redirect_facts(links, path, items, applied)
        report.proposed.append(Proposed(draft, applied, facts=facts))


def redirect_facts(links: StoreLinks, path: str, items, applied: list[Finding]) -> list[Fact]:
    """The redirect or alias each rewrite follows, as a fact naming the file and line that
    declares it (a Hugo alias is also a frontmatter value: a person's, or no evidence)."""
    import posixpath

    base = path.rsplit("/", 1)[0] if "/" in path else ""
    out: list[Fact] = []
    for ref, _new, f in items:
        if f not in applied:
            continue
        t = ref.target.strip()
        forms = {t, posixpath.normpath(posixpath.join(base, t)) if base else t}
        forms |= {x + ".md" for x in list(forms)}
        for r in links.redirects.values():
            if r.new == f.suggestion and r.old in forms:
                out.append(Fact("redirect", r.source, r.line, {"from": r.old, "to": r.new, "syntax": r.syntax}))
                if r.syntax == "hugo-aliases":
                    out.append(Fact("frontmatter", r.source, r.line, {"key": "aliases"}))
                break
    return out
