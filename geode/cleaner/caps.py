"""The Cleaner's folders over their cap, and the archive proposals that bring them down.

Every folder is found by reading the store (the folders of the notes ``ctx.load`` returns),
never from a list. A folder holds the notes directly in it. Its cap is ``[cleaner] cap``
(default 50; every ``[cleaner]`` key and default is declared in ``geode.kernel.config.SCHEMA``)
or ``[cleaner.caps] "path/to/folder" = N`` (``"."`` or ``""`` is the store's root folder). A
folder holding more than its cap gets a ``folder-over-cap`` finding and one ``archive`` proposal
per note, as many as bring it down to its cap, chosen from evidence in this order: retired
status (deprecated, superseded, archived, legacy), named in another live note's ``supersedes``,
never delivered or read in the ledger, oldest ``last_verified`` (none is oldest), least recently
used, path. Signposts (README, index) are never chosen. An archive moves the note to
``<archive_dir>/<same path>`` (``[cleaner] archive_dir``, default ``archive``) with ``status:
archived``, rewrites its own relative links for the new place and, in the same proposal, the
links of other notes that name it by path (wikilinks by name keep resolving). Undo restores
every byte. The archive folder is not capped. A note whose proposal would touch a file another
proposal of this run touches is passed over (applying one would make the other a conflict); the
next candidate is taken. ``[cleaner] max_archives`` bounds the archives of one run.

Apart from the run (``geode.cleaner.agent``) because it is the one check that moves files and
rewrites other notes' links; it is handed the run's state (``CleanerRun``: ``notes``,
``domain``, ``links``, ``used``, ``cap``, ``caps``, ``archive_dir``, ``resolve``, ``archived``,
``bytes_of``, ``free``, ``prov``) and reads nothing off the agent.

Geode's own edits are never evidence (``geode.queue.provenance``): a folder counts the person's
notes, never a file an applied proposal created (a merge draft, a Gardener stub); a retired
status, a ``supersedes`` or a ``valid_to`` that an applied proposal wrote (and the note still
holds) does not choose a note to archive. Each reason in an archive's rationale says it was
written by a person.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt

from geode.agents.contract import Fact, Finding, Proposed, Report, Skipped
from geode.cleaner.hierarchy import shown as group_name
from geode.cleaner.hierarchy import split_suggestion
from geode.cleaner.notes import CleanerRun, date_of, proposal_key, supersedes_targets
from geode.kernel.crystal import RETIRED_STATUSES
from geode.links.names import is_signpost

#: link syntaxes whose target text names a path (they break when a note moves)
PATH_SYNTAXES = ("markdown", "reference", "path")


class FolderCaps:
    """Findings and archive proposals for folders over their cap."""

    def __init__(self, run: CleanerRun):
        self.run = run

    def check(self, folders: dict[str, list[str]], report: Report) -> None:
        ex = report.examined
        incoming = None
        for folder in sorted(folders):
            if self.run.archived(folder + "/x"):
                continue  # the archive grows by design
            ex["folders_capped"] += 1
            cap = self.run.caps.get(folder, self.run.cap)
            # the person's notes: a file an applied proposal created (a merge draft, a stub) is
            # geode's, and a folder is never "over its cap" by geode's own files
            made = [p for p in folders[folder] if self.run.prov.made_by_geode(p)]
            ex["notes_geode_made"] += len(made)
            members = [p for p in folders[folder] if not self.run.prov.made_by_geode(p)]
            if len(members) <= cap:
                continue
            ex["folders_over_cap"] += 1
            need = len(members) - cap
            shown = group_name(folder, self.run.dotted, self.run.real_folders)
            f = Finding(
                "folder-over-cap",
                shown,
                0,
                shown,
                f"{shown} holds {len(members)} notes, over its cap of {cap}: {need} to archive",
                self.run.domain,
            )
            report.findings.append(f)
            if incoming is None:
                incoming = self._incoming()
            candidates = [p for p in members if not is_signpost(self.run.notes[p])]
            ranked = sorted((p for p in candidates if self._evidence(p)), key=self._archive_rank)
            without = len(candidates) - len(ranked)
            chosen = 0
            passed = 0
            limited = False
            for p in ranked:
                if chosen >= need:
                    break
                if self.run.archives_made >= self.run.max_archives:
                    limited = True
                    break
                if self._archive_proposal(report, p, incoming.get(p, {}), f):
                    chosen += 1
                    self.run.archives_made += 1
                else:
                    passed += 1
            if limited:
                f.message += (
                    f"; {chosen} archive proposals this run: the run reached its limit of "
                    f"{self.run.max_archives} ([cleaner] max_archives); the rest follow on later nights"
                )
            elif chosen < need and without and chosen + passed >= len(ranked):
                split = split_suggestion(members, self.run.dotted and shown.endswith(".*"))
                f.message += (
                    f"; {chosen} archive proposal(s) made, {without} note(s) have no evidence to archive them "
                    f"(no retired status, closed validity window or supersedes, and {self._ledger_said()}): "
                    "not proposed; " + (split or "split it by topic into subfolders") + " instead"
                )
                f.suggestion = split
            elif chosen < need:
                f.message += (
                    f"; only {chosen} archive proposals could be made this run ({passed} candidates touch "
                    f"files other proposals of this run touch, "
                    f"{len(members) - len(candidates)} are signposts)"
                )

    def _person_count(self, folder: str) -> int:
        """The person's notes directly in ``folder`` (counted once per run for every folder:
        a count per archive over the whole store made 1,000 archives quadratic)."""
        counts = getattr(self, "_counts", None)
        if counts is None:
            counts = {}
            for p in self.run.notes:
                if not self.run.prov.made_by_geode(p):
                    f = p.rsplit("/", 1)[0] if "/" in p else ""
                    counts[f] = counts.get(f, 0) + 1
            self._counts = counts
        return counts.get(folder, 0)

    def _ledger_said(self) -> str:
        if self.run.ledger_days >= self.run.evidence_days:
            return f"the ledger covers {self.run.ledger_days:.1f} days, and these were used in the last {self.run.evidence_days}"
        return (
            f"the ledger covers {self.run.ledger_days:.1f} days of the {self.run.evidence_days} needed before "
            "unused means anything ([cleaner] archive_evidence_days)"
        )

    def _evidence(self, path: str) -> list[str]:
        """Why this note may be archived: positive evidence only. Retired status, named in a live
        note's ``supersedes``, a validity window that closed, or not delivered or read in a ledger
        that covers at least ``[cleaner] archive_evidence_days`` of ledger time. Absence of use
        in an empty or young ledger is not evidence. Empty: no evidence, never archived."""
        n = self.run.notes[path]
        why = []
        # a fact geode wrote (a status, a supersedes, a date an applied proposal set) is not
        # evidence: each night's approvals would justify the next night's
        if n.status in RETIRED_STATUSES and not self.run.geode_wrote(path, "status"):
            why.append(f"status {n.status} (written by a person)")
        if path in self._superseded_targets():
            why.append("superseded by a live note (its supersedes written by a person)")
        valid_to = date_of(n, "valid_to")
        if valid_to is not None and valid_to < _dt.date.today() and not self.run.geode_wrote(path, "valid_to"):
            why.append(f"validity window closed {valid_to.isoformat()} (written by a person)")
        if self.run.ledger_days >= self.run.evidence_days:
            _uses, last, _ = self.run.used.get(path, (0, 0.0, 0))
            if last < self.run.ledger_last - self.run.evidence_days * 86400.0:
                why.append(
                    f"not delivered or read in the last {self.run.evidence_days} days of a ledger that covers "
                    f"{self.run.ledger_days:.0f} days"
                )
        return why

    def _archive_rank(self, path: str) -> tuple:
        n = self.run.notes[path]
        uses, last, _ = self.run.used.get(path, (0, 0.0, 0))
        superseded = any(r == path for r in self._superseded_targets())
        return (
            0 if n.status in RETIRED_STATUSES and not self.run.geode_wrote(path, "status") else 1,
            0 if superseded else 1,
            0 if not uses else 1,
            date_of(n, "last_verified") or _dt.date.min,
            last,
            path,
        )

    def _superseded_targets(self) -> set[str]:
        cached = self.run.sup_cache
        if cached is not None and cached[0] is self.run.notes:
            return cached[1]
        out: set[str] = set()
        for n in self.run.notes.values():
            if n.status in RETIRED_STATUSES or self.run.geode_wrote(n.path, "supersedes"):
                continue  # a supersedes geode wrote (or in a file geode made) retires no one
            for t in supersedes_targets(n.frontmatter.get("supersedes")):
                r = self.run.resolve(t)
                if r and r != n.path:
                    out.add(r)
        self.run.sup_cache = (self.run.notes, out)
        return out

    def _incoming(self) -> dict[str, dict[str, list]]:
        """``{target path: {linking note: [(ref, resolved)]}}`` for links that name a note by path."""
        out: dict[str, dict[str, list]] = {}
        links = self.run.links
        for n in self.run.notes.values():
            for ref in links.refs(n):
                path_named = ref.syntax in PATH_SYNTAXES or (ref.syntax in ("wiki", "relation") and "/" in ref.target)
                if not path_named:
                    continue
                res = links.resolve(n, ref)
                if res.status in ("ok", "broken-anchor") and res.path in self.run.notes and res.path != n.path:
                    out.setdefault(res.path, {}).setdefault(n.path, []).append(ref)
        return out

    def _archive_proposal(self, report, path: str, incoming: dict[str, list], f: Finding) -> bool:
        from geode.links.relink import rewrite_line
        from geode.queue.changes import move_changes, set_frontmatter_status
        from geode.queue.proposals import ProposalDraft, ProposalError

        new_path = f"{self.run.archive_dir}/{path}"
        if not self.run.free(path, *incoming) or new_path in self.run.links.files:
            return False
        data = self.run.bytes_of(path)
        if data is None:
            return False
        note = self.run.notes[path]
        links = self.run.links
        # its own links that name a path, rewritten for the new place
        text = data.decode("utf-8")
        lines = text.split("\n")
        moved = dataclasses.replace(note, path=new_path)
        own = 0
        for ref in links.refs(note):
            if ref.syntax not in ("markdown", "reference"):
                continue
            res = links.resolve(note, ref)
            if res.status not in ("ok", "broken-anchor") or not res.path:
                continue
            new_text = links.new_target_text(moved, ref, res.path)
            i = ref.line - 1
            if new_text and 0 <= i < len(lines):
                new = rewrite_line(lines[i], ref, new_text)
                if new is not None and new != lines[i]:
                    lines[i] = new
                    own += 1
        try:
            content = set_frontmatter_status("\n".join(lines).encode("utf-8"), "archived", path)
        except ProposalError as exc:
            report.skipped.append(Skipped(path, 0, "status", f"not archived: {exc}", self.run.domain))
            return False
        rewrites = {}
        for src, refs in sorted(incoming.items()):
            sdata = self.run.bytes_of(src)
            if sdata is None:
                return False
            slines = sdata.decode("utf-8").split("\n")
            for ref in refs:
                new_text = links.new_target_text(self.run.notes[src], ref, new_path)
                i = ref.line - 1
                if not new_text or not 0 <= i < len(slines):
                    return False
                new = rewrite_line(slines[i], ref, new_text)
                if new is None:
                    return False
                slines[i] = new
            rewrites[src] = "\n".join(slines).encode("utf-8")
        try:
            changes = move_changes(
                self.run.ctx.settings, self.run.domain, path, new_path, content=content, rewrites=rewrites
            )
        except ProposalError:
            return False
        self.run.touched.update((path, new_path, *incoming))
        uses, last, last_id = self.run.used.get(path, (0, 0.0, 0))
        verified = date_of(note, "last_verified")
        why = [
            *self._evidence(path),
            f"used {uses} time(s) in the ledger" if uses else "never delivered or read in the ledger",
            f"last_verified {verified.isoformat()}" if verified else "no last_verified",
        ]
        draft = ProposalDraft(
            agent=self.run.name,
            kind="archive",
            domain=self.run.domain,
            title=f"Archive {path}",
            rationale=(
                f"{f.message.split(':')[0]}. Chosen by evidence: "
                + ", ".join(w for w in why if w)
                + "."
                + (
                    f" Rewrites {sum(len(r) for r in incoming.values())} link(s) in {len(incoming)} note(s)"
                    f" that name it by path."
                    if incoming
                    else ""
                )
                + (f" Its own {own} relative link(s) are rewritten for the new place." if own else "")
            ),
            evidence=[],
            changes=changes,
            run_id=self.run.ctx.run_id or "adhoc",
            key=proposal_key(f"archive:{self.run.domain}:{path}"),
        )
        folder = path.rsplit("/", 1)[0] if "/" in path else ""
        facts = [
            Fact(
                "count",
                folder,
                0,
                {"count": self._person_count(folder), "cap": self.run.caps.get(folder, self.run.cap)},
            ),
            Fact("file", path, 0, "the note archived"),
        ]
        # the values its evidence read, for the gate to check again (geode.agents.evidence_gate)
        if note.status in RETIRED_STATUSES and not self.run.geode_wrote(path, "status"):
            facts.append(Fact("frontmatter", path, note.line_of("status"), {"key": "status", "value": note.status}))
        if date_of(note, "valid_to") is not None and not self.run.geode_wrote(path, "valid_to"):
            facts.append(Fact("frontmatter", path, note.line_of("valid_to"), {"key": "valid_to"}))
        report.proposed.append(Proposed(draft, [f], [last_id] if uses else [], facts))
        return True
