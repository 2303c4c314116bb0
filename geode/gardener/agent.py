"""The Gardener: grows the store from what was used, never from what it read.

It works from the usage ledger. What it reads of the store is what a binding is made of (the
``crystal:`` block, ``salience``, ``status``, ``valid_from``, file names and paths): never a
note's body. What it writes is built from ledger rows (terms the agent hunted or searched for,
the action that came before) and fixed templates, so no proposal of it carries a sentence
taken from a note or a document (principle 4; the source's scar is a pipeline that minted an
invented statistic from text it had been handed). Four rules, each a reversible proposal:

1. **Blocked lookups -> crystal stubs** (``new_note``). Blocked lookups in the window that
   share a hunted term are one group; a group of at least ``min_blocked`` rows becomes one stub
   in ``stub_folder/`` whose binding is pre-filled (``on``: the action the agent was doing
   before the hunt, ``bash`` when none; ``match``: the group's terms, most hunted first) and
   whose essence is left empty for a person to write (an empty essence delivers nothing).
2. **Never fired -> widen or retire** (``edit`` / ``status``). Judged only when the ledger
   covers the whole window of ``window_days`` and the window holds at least
   ``min_deliveries`` deliveries: an act-bound crystal that matched no action in it (not
   delivered, withheld, skipped or backed off), whose file did not change inside the window,
   gets its match terms widened with terms observed in the ledger in sessions where its topic
   came up (a lookup or search named or found it, or hunted one of its terms, tags or
   name words), each seen at least ``widen_min_observed`` times; with no such term it is
   proposed for retirement (``status: deprecated``).
3. **Searched but unbound -> bind** (``edit``). A note without a binding found by at least
   ``min_searches`` searches (``searched`` rows, ``geode.delivery.search_log``) is proposed a binding
   to the action that preceded those searches in their sessions (the most common action of
   the rows just before them; the terms those rows carried, seen before at least two of the
   searches).
4. **Salience** (``edit``). A crystal delivered at least ``salience_min_deliveries`` times
   since its last salience proposal: when at least half of those deliveries unlocked work
   (no lookup followed in that session) it rises by ``salience_step``; when none did it falls
   by the step; always within 0..1 (absent counts as 0.5, as the hook reads it). A delivery is
   counted once: the next move rests only on rows newer than the ones the last move cited.

A rerun files nothing twice: rows cited by an earlier stub are not grouped again, a key with a
pending, conflicting or rejected proposal is not proposed again, and salience counts only
deliveries after its watermark. An empty ledger is ``nothing-to-learn``: not a failure, not
green.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import os
from collections import Counter

from geode.agents.contract import NOTHING_TO_LEARN, Agent, Context, Finding, Proposed, Report, Skipped
from geode.delivery.binding import ACTIONS, parse_binding
from geode.delivery.config import SCHEMA
from geode.delivery.crystal import RETIRED_STATUSES
from geode.delivery.dates import ValidityWindow
from geode.gardener import edits
from geode.gardener.scan import MAX_EVIDENCE, scan
from geode.gardener.terms import clean_term, file_stem, slug

DAY = 86400.0
#: proposal statuses that keep the Gardener from proposing the same thing again
_HOLD = ("pending", "conflict", "failed", "rejected")


def _iso(ts: float) -> str:
    return _dt.datetime.fromtimestamp(ts, _dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ") if ts else "-"


def _day(ts: float) -> str:
    return _dt.datetime.fromtimestamp(ts, _dt.timezone.utc).strftime("%Y-%m-%d")


def _key(rule: str, domain: str, path: str) -> str:
    key = f"{rule}:{domain}:{path}"
    if len(key) > 255:
        key = f"{rule}:" + hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()
    return key


class Gardener(Agent):
    name = "gardener"

    #: the settings of ``[gardener]``: keys, types, defaults and what each means are declared in
    #: ``geode.delivery.config.SCHEMA``; ``_configure`` sets them as attributes for each run
    SETTINGS = tuple(SCHEMA["gardener"])

    def __init__(self, **overrides):
        unknown = set(overrides) - set(self.SETTINGS)
        if unknown:
            raise TypeError(f"unknown Gardener setting(s): {', '.join(sorted(unknown))}")
        self._overrides = overrides

    def _configure(self, settings) -> list[str]:
        """``settings.gardener`` (``[gardener]``, checked by load_settings), then the constructor's overrides."""
        values = dict(settings.gardener)
        values.update(self._overrides)
        for k, v in values.items():
            setattr(self, k, v)
        self.salience_step = min(max(float(self.salience_step), 0.0), 1.0)
        return []

    # -- the run -----------------------------------------------------------------------
    def examine(self, ctx: Context) -> Report:
        settings = ctx.settings
        report = Report(agent=self.name)
        messages = self._configure(settings)
        ex = report.examined
        for key in ("notes", "unreadable", "crystals", "ledger_rows", "window_rows"):
            ex.setdefault(key, 0)
        self.notes: dict[str, tuple[str, object]] = {}  # domain:path -> (domain, note)
        for domain, load in ctx.readable(report):
            for note in load.notes:
                ex["notes"] += 1
                if "crystal" in note.frontmatter:
                    ex["crystals"] += 1
                self.notes[f"{domain}:{note.path}"] = (domain, note)

        engine = self._engine(ctx)
        self.prior = self._prior(engine)
        s = scan(engine, dict(settings.domains), self.window_days * DAY,
                 watermarks=self.prior["watermarks"], consumed=self.prior["consumed"])
        ex["ledger_rows"] = s.total_rows
        if s.total_rows == 0:
            report.status = NOTHING_TO_LEARN
            report.message = "; ".join(["nothing to learn from yet: the usage ledger is empty (0 rows)", *messages])
            return report
        ex["window_rows"] = s.rows
        ex["window_days"] = int(self.window_days)
        ex["window_first_ts"] = int(s.first_ts)
        ex["window_last_ts"] = int(s.last_ts)
        ex["ledger_first_ts"] = int(s.ledger_first_ts)
        ex["sessions"] = s.sessions
        for kind, n in sorted(s.by_kind.items()):
            ex[f"rows_{kind}"] = n
        ex["blocked_without_terms"] = s.blocked_without_terms
        kinds = ", ".join(f"{k} {n}" for k, n in sorted(s.by_kind.items()))
        messages.insert(0, f"ledger window {_iso(s.first_ts)} to {_iso(s.last_ts)} (the last {self.window_days:g} days "
                           f"of ledger time; the ledger holds {s.total_rows} rows from {_iso(s.ledger_first_ts)}): "
                           f"{s.rows} rows examined ({kinds})")
        if s.blocked_without_terms:
            messages.append(f"{s.blocked_without_terms} blocked lookup(s) carry no command or tool input in their "
                            "detail: nothing to take match terms from")
            report.skipped.append(Skipped("", 0, "blocked", f"{s.blocked_without_terms} blocked lookup row(s) without "
                                          "a command or tool input in detail: no terms"))
        self._capped: Counter = Counter()
        self._mine: list[str] = []
        for rule, fn in (("stub", self._stubs), ("never-fired", self._never_fired), ("bind", self._bind),
                         ("salience", self._salience)):
            self._rule = rule
            fn(ctx, s, report)
            if self._capped[rule]:
                report.skipped.append(Skipped("", 0, rule, f"{self._capped[rule]} more {rule} proposal(s) not made "
                                              f"this run: at most {self.max_proposals} per rule"))
        report.message = "; ".join(messages)
        return report

    def _engine(self, ctx: Context):
        if ctx.engine is not None:
            return ctx.engine
        settings = ctx.settings
        if settings.uses_sqlite_ledger and not settings.database_url and not os.path.exists(str(settings.ledger_path)):
            return None  # no ledger file: never create one just to find it empty
        from geode.delivery.models import engine_for

        return engine_for(settings)

    def _prior(self, engine) -> dict:
        """What this agent proposed before: keys held (pending, conflict, failed, rejected),
        blocked rows already cited by a stub, and per crystal the newest delivery row a
        salience proposal cited (its watermark)."""
        out = {"held": set(), "consumed": set(), "watermarks": {}}
        if engine is None:
            return out
        from sqlalchemy import inspect, select

        if not inspect(engine).has_table("proposal"):
            return out
        from geode.agents.queue_tables import C, P

        q = (select(P.c.key, P.c.status, P.c.evidence, P.c.domain, C.c.path)
             .select_from(P.join(C, C.c.proposal_id == P.c.id)).where(P.c.agent == self.name))
        with engine.connect() as conn:
            rows = conn.execute(q).all()
        for key, status, evidence, domain, path in rows:
            if status in _HOLD:
                out["held"].add(key)
            if status == "undone":
                continue
            try:
                ids = [int(e["ledger_event"]) for e in json.loads(evidence or "[]")
                       if isinstance(e, dict) and "ledger_event" in e]
            except (ValueError, TypeError):
                ids = []
            if key.startswith("stub:"):
                out["consumed"].update(ids)
            elif key.startswith("salience:") and ids:
                cid = f"{domain}:{path}"
                out["watermarks"][cid] = max(out["watermarks"].get(cid, 0), max(ids))
        return out

    def _held(self, *keys: str) -> bool:
        """Already proposed and waiting (or refused), or this rule's cap for the run is reached."""
        if any(k in self.prior["held"] for k in keys):
            return True
        if sum(1 for p in self._mine if p == self._rule) >= self.max_proposals:
            self._capped[self._rule] += 1
            return True
        return False

    def _propose(self, report: Report, proposed: Proposed) -> None:
        self._mine.append(self._rule)
        report.proposed.append(proposed)

    # -- rule 1: blocked lookups become stubs ---------------------------------------------
    def _stubs(self, ctx: Context, s, report: Report) -> None:
        from geode.agents.changes import new_note_change
        from geode.agents.proposals import ProposalDraft, ProposalError
        from geode.agents.safepath import UnsafePath

        parent = list(range(len(s.blocked)))

        def find(i):
            while parent[i] != i:
                parent[i] = parent[parent[i]]
                i = parent[i]
            return i

        first_of: dict[str, int] = {}
        for i, b in enumerate(s.blocked):
            for t in b.terms:
                j = first_of.setdefault(t, i)
                ri, rj = find(i), find(j)
                if ri != rj:
                    parent[max(ri, rj)] = min(ri, rj)
        groups: dict[int, list] = {}
        for i, b in enumerate(s.blocked):
            groups.setdefault(find(i), []).append(b)
        report.examined["blocked_groups"] = len(groups)
        used: set[str] = set()
        for _root, group in sorted(groups.items()):
            if len(group) < self.min_blocked:
                continue
            counts = Counter(t for b in group for t in dict.fromkeys(b.terms))
            terms = [t for t, _n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))][: self.max_stub_terms]
            doms = Counter(b.domain for b in group if b.domain in ctx.settings.domains)
            domain = doms.most_common(1)[0][0] if doms else ctx.settings.default_domain
            root = ctx.settings.domains[domain]
            base = f"lookup-{slug(terms[:2])}"
            path, n = f"{self.stub_folder}/{base}.md", 1
            while path in used or os.path.lexists(os.path.join(root, path)):
                n += 1
                path = f"{self.stub_folder}/{base}-{n}.md"
            used.add(path)
            acts = Counter(a for b in group for a in b.before if a in ACTIONS)
            on = acts.most_common(1)[0][0] if acts else "bash"
            sessions = {b.session for b in group if b.session}
            tools = Counter(b.tool for b in group)
            ids = sorted(b.id for b in group)
            tools_s = ", ".join(f"{t} {n}" for t, n in sorted(tools.items()))
            terms_s = ", ".join(f"{t} ({counts[t]})" for t in terms)
            text = self._stub_text(base, on, terms, len(group), len(sessions), tools_s, terms_s,
                                   min(b.ts for b in group), max(b.ts for b in group), ids)
            finding = Finding("blocked-lookups", path, 0, ", ".join(terms),
                              f"{len(group)} blocked lookups in {len(sessions)} session(s) hunted for {terms_s}",
                              domain, severity="info")
            report.findings.append(finding)
            key = _key("stub", domain, path)
            if self._held(key):
                continue
            try:
                change = new_note_change(ctx.settings, domain, path, text)
            except (ProposalError, UnsafePath, OSError) as exc:  # exists already, a refused path, unreadable
                report.skipped.append(Skipped(path, 0, ", ".join(terms), f"stub not proposed: {exc}", domain))
                continue
            draft = ProposalDraft(
                agent=self.name, kind="new_note", domain=domain, title=f"New crystal stub {path} ({', '.join(terms)})",
                rationale=(f"{len(group)} lookups were blocked in {len(sessions)} session(s) between {_day(min(b.ts for b in group))} "
                           f"and {_day(max(b.ts for b in group))}, hunting for {terms_s} ({tools_s}): the store did not "
                           f"hand this over when it was needed. The binding is pre-filled from those commands "
                           f"(on {on}); the essence is empty and delivers nothing until a person writes it."),
                evidence=[], changes=[change], run_id=ctx.run_id or "adhoc", key=key)
            self._propose(report, Proposed(draft, [finding], ids))

    @staticmethod
    def _stub_text(name, on, terms, n, sessions, tools_s, terms_s, first, last, ids) -> str:
        shown = ", ".join(str(i) for i in ids[:20]) + (f" and {len(ids) - 20} more" if len(ids) > 20 else "")
        match = ", ".join(terms)
        return (
            "---\n"
            f"name: {name}\n"
            'description: "<one line: what the agent was looking for; write it, or reject this stub>"\n'
            "type: fact\n"
            "crystal:\n"
            "  deliver: act\n"
            f"  on: {on}\n"
            f'  match: "{match}"\n'
            "  who: all\n"
            "---\n"
            "<!-- A stub the Gardener proposed from blocked lookups. The binding above is filled in from\n"
            "the commands that were blocked; the knowing is yours to write between the markers below.\n"
            "An empty essence delivers nothing (the Librarian reports it until it is written). -->\n"
            "<!-- crystal:essence -->\n"
            "<!-- /crystal:essence -->\n"
            "\n"
            "## Where this came from\n"
            f"{n} blocked lookups ({tools_s}) in {sessions} session(s), {_day(first)} to {_day(last)}; "
            f"ledger rows {shown}.\n"
            f"Terms hunted: {terms_s}.\n"
        )

    # -- rule 2: never fired: widen or retire -----------------------------------------------
    def _never_fired(self, ctx: Context, s, report: Report) -> None:
        from geode.agents.changes import status_change
        from geode.agents.proposals import FileChange, ProposalDraft, ProposalError, sha256
        from geode.agents.safepath import UnsafePath

        ex = report.examined
        ex["never_fired"] = 0
        covered_days = (s.ledger_last_ts - s.ledger_first_ts) / DAY
        delivered = s.by_kind.get("delivered", 0)
        if s.ledger_first_ts > s.window_start:
            report.skipped.append(Skipped("", 0, "never-fired", (
                f"not judged: the ledger covers {covered_days:.1f} days, less than the {self.window_days:g}-day window")))
            return
        if delivered < self.min_deliveries:
            report.skipped.append(Skipped("", 0, "never-fired", (
                f"not judged: the window holds {delivered} deliveries, fewer than the {self.min_deliveries} needed")))
            return
        # sessions by what came up in them
        by_term: dict[str, set] = {}
        for session, obs in s.observed.items():
            for t, _rid in obs:
                by_term.setdefault(t, set()).add(session)
        by_touch: dict[str, set] = {}
        for session, items in s.touched.items():
            for it in items:
                by_touch.setdefault(it, set()).add(session)
        for cid, (domain, note) in sorted(self.notes.items()):
            crystal = note.crystal
            if crystal is None or cid in s.matched or note.status in RETIRED_STATUSES:
                continue
            b = parse_binding(crystal, note.fm_lines)
            if "act" not in b.deliver or any(ch in b.deliver for ch in ("boot", "inject")) or not b.can_fire:
                continue
            if not note.essence:
                continue  # it cannot fire for want of an essence: the Librarian's finding, not ours
            full = os.path.join(ctx.settings.domains[domain], note.path)
            try:
                mtime = os.stat(full).st_mtime
            except OSError:
                continue
            if mtime > s.window_start:
                report.skipped.append(Skipped(note.path, 0, cid, "never fired in the window, but the file changed "
                                              "inside it: its binding has not had the whole window", domain))
                continue
            window = ValidityWindow.from_frontmatter(note.frontmatter)
            if window.opens_after(_day(s.window_start)):
                report.skipped.append(Skipped(note.path, 0, cid, "never fired, but valid only from "
                                              f"{window.valid_from.isoformat()}", domain))
                continue
            ex["never_fired"] += 1
            line = note.fm_lines.get("crystal.match") or note.fm_lines.get("crystal", 1)
            finding = Finding("never-fired", note.path, line, cid,
                              f"matched no action in the {self.window_days:g}-day window ({delivered} deliveries of "
                              "other crystals in it)", domain)
            report.findings.append(finding)
            if self._held(_key("widen", domain, note.path), _key("retire", domain, note.path)):
                continue
            topic = {cid, file_stem(note.path).lower()}
            words = set(b.terms)
            for w in [note.name, *((note.frontmatter.get("tags") or []) if isinstance(note.frontmatter.get("tags"), list)
                                   else [note.frontmatter.get("tags") or ""])]:
                for part in str(w).lower().replace("_", "-").replace(" ", "-").split("-"):
                    t = clean_term(part)
                    if t and len(t) >= 4:
                        words.add(t)
            sessions: set = set()
            for it in topic:
                sessions |= by_touch.get(it, set())
            for w in words:
                sessions |= by_term.get(w, set())
            seen: Counter = Counter()
            rows: dict[str, list[int]] = {}
            for sess in sessions:
                for t, rid in s.observed.get(sess, ()):
                    if t in b.terms:
                        continue
                    seen[t] += 1
                    rows.setdefault(t, []).append(rid)
            new = [t for t, n in sorted(seen.items(), key=lambda kv: (-kv[1], kv[0]))
                   if n >= self.widen_min_observed and not any(t in old or old in t for old in b.terms)]
            new = new[: self.max_new_terms]
            data = open(full, "rb").read()
            if new:
                try:
                    after = edits.widen_match(data, note.path, new)
                except edits.FrontmatterEditError as exc:
                    report.skipped.append(Skipped(note.path, line, cid, "never fired; terms were observed ("
                                                  + ", ".join(new) + f") but the edit is not safe: {exc}", domain))
                    continue
                if after is None:
                    report.skipped.append(Skipped(note.path, line, cid, "never fired; terms were observed ("
                                                  + ", ".join(new) + ") but its match line is written in a form "
                                                  "the Gardener does not rewrite", domain))
                    continue
                ids = sorted({r for t in new for r in rows[t]})[-MAX_EVIDENCE:]
                draft = ProposalDraft(
                    agent=self.name, kind="edit", domain=domain, title=f"Widen the match of {note.path} (+{', '.join(new)})",
                    rationale=(f"{note.path} matched no action in the last {self.window_days:g} days of ledger "
                               f"({delivered} deliveries of other crystals). In {len(sessions)} session(s) where its "
                               f"topic came up, agents hunted or searched for "
                               + ", ".join(f"{t} ({seen[t]}x)" for t in new) + ": added to its match terms."),
                    evidence=[], changes=[FileChange(note.path, sha256(data), after)],
                    run_id=ctx.run_id or "adhoc", key=_key("widen", domain, note.path))
                self._propose(report, Proposed(draft, [finding], ids))
                continue
            try:
                change = status_change(ctx.settings, domain, note.path, self.retire_status)
            except (ProposalError, UnsafePath, OSError) as exc:  # gone meanwhile, a refused path, unreadable
                report.skipped.append(Skipped(note.path, line, cid, f"retirement not proposed: {exc}", domain))
                continue
            draft = ProposalDraft(
                agent=self.name, kind="status", domain=domain, title=f"Retire {note.path} (never fired)",
                rationale=(f"{note.path} matched no action in the last {self.window_days:g} days of ledger "
                           f"({delivered} deliveries of other crystals), and no term was observed often enough in "
                           f"sessions where its topic came up to widen it: status {self.retire_status}."),
                evidence=[], changes=[change], run_id=ctx.run_id or "adhoc", key=_key("retire", domain, note.path))
            self._propose(report, Proposed(draft, [finding]))

    # -- rule 3: searched again and again, no binding: bind it ------------------------------
    def _bind(self, ctx: Context, s, report: Report) -> None:
        from geode.agents.proposals import FileChange, ProposalDraft, sha256

        ex = report.examined
        ex["searched_notes"] = len(s.searched)
        for cid, e in sorted(s.searched.items(), key=lambda kv: (-kv[1].count, kv[0])):
            if e.count < self.min_searches:
                continue
            hit = self.notes.get(cid)
            if hit is None:
                report.skipped.append(Skipped("", 0, cid, f"found by {e.count} searches but not in the store now"))
                continue
            domain, note = hit
            if "crystal" in note.frontmatter or note.status in RETIRED_STATUSES:
                continue
            finding = Finding("searched-unbound", note.path, 0, cid,
                              f"found by {e.count} searches in {len(e.sessions)} session(s) and bound to no action",
                              domain, severity="info")
            report.findings.append(finding)
            if self._held(_key("bind", domain, note.path)):
                continue
            if not e.contexts:
                report.skipped.append(Skipped(note.path, 0, cid, "no ledger rows came before its searches in their "
                                              "sessions: no action to bind it to", domain))
                continue
            acts = Counter(a for c in e.contexts for a in c[0])
            on = sorted(acts.items(), key=lambda kv: (-kv[1], ACTIONS.index(kv[0]) if kv[0] in ACTIONS else 9))[0][0]
            tc: Counter = Counter()
            for c in e.contexts:
                for t in {clean_term(x) for x in c[1]}:
                    if t:
                        tc[t] += 1
            need = 2 if len(e.contexts) >= 2 else 1
            terms = [t for t, n in sorted(tc.items(), key=lambda kv: (-kv[1], kv[0])) if n >= need][:4]
            if not terms:
                report.skipped.append(Skipped(note.path, 0, cid, "the rows before its searches share no term to "
                                              "bind it by", domain))
                continue
            full = os.path.join(ctx.settings.domains[domain], note.path)
            data = open(full, "rb").read()
            try:
                after = edits.add_binding(data, note.path, on, terms)
            except edits.FrontmatterEditError as exc:
                report.skipped.append(Skipped(note.path, exc.line, cid, f"its frontmatter cannot take a binding "
                                              f"safely: {exc}", domain))
                continue
            if after is None:
                report.skipped.append(Skipped(note.path, 0, cid, "its frontmatter cannot take a binding safely", domain))
                continue
            ids = sorted(set(e.ids) | {r for c in e.contexts for r in c[2]})[-MAX_EVIDENCE:]
            marker = "" if note.essence is not None else (
                " It has no essence markers: mark the part to deliver with <!-- crystal:essence --> ... "
                "<!-- /crystal:essence --> before it can deliver anything.")
            draft = ProposalDraft(
                agent=self.name, kind="edit", domain=domain, title=f"Bind {note.path} to {on} ({', '.join(terms)})",
                rationale=(f"{note.path} was found by {e.count} searches in {len(e.sessions)} session(s) but has no "
                           f"binding. Before those searches the agent was at {on} with "
                           + ", ".join(f"{t} ({tc[t]}x)" for t in terms) + "." + marker),
                evidence=[], changes=[FileChange(note.path, sha256(data), after)],
                run_id=ctx.run_id or "adhoc", key=_key("bind", domain, note.path))
            self._propose(report, Proposed(draft, [finding], ids))

    # -- rule 4: salience follows work unlocked -------------------------------------------------
    def _salience(self, ctx: Context, s, report: Report) -> None:
        from geode.agents.proposals import FileChange, ProposalDraft, sha256

        ex = report.examined
        ex["salience_judged"] = ex["salience_at_bound"] = 0
        step = self.salience_step
        for cid, d in sorted(s.deliveries.items()):
            if d.count < self.salience_min_deliveries:
                continue
            hit = self.notes.get(cid)
            if hit is None:
                continue
            domain, note = hit
            if note.crystal is None or note.status in RETIRED_STATUSES:
                continue
            share = d.unlocked / d.count
            if share >= self.salience_rise_share:
                direction = 1
            elif d.unlocked == 0:
                direction = -1
            else:
                continue
            ex["salience_judged"] += 1
            raw = note.frontmatter.get("salience", 0.5)
            try:
                old = float(0.5 if raw is None else raw)
            except (TypeError, ValueError):
                report.skipped.append(Skipped(note.path, note.fm_lines.get("salience", 1), cid,
                                              f"salience {raw!r} is not a number", domain))
                continue
            new = round(min(1.0, max(0.0, old + direction * step)), 2)
            if new == round(old, 2):
                ex["salience_at_bound"] += 1
                continue
            kind = "unlocked-work" if direction > 0 else "never-unlocked"
            msg = (f"{d.unlocked} of {d.count} deliveries were followed by no lookup in their session"
                   if direction > 0 else f"none of {d.count} deliveries unlocked work: a lookup followed each")
            finding = Finding(kind, note.path, note.fm_lines.get("salience", 0), cid, msg, domain, severity="info")
            report.findings.append(finding)
            if self._held(_key("salience", domain, note.path)):
                continue
            full = os.path.join(ctx.settings.domains[domain], note.path)
            data = open(full, "rb").read()
            try:
                after = edits.set_salience(data, note.path, new)
            except edits.FrontmatterEditError as exc:
                report.skipped.append(Skipped(note.path, exc.line, cid, "its frontmatter cannot take a salience line "
                                              f"safely: {exc}", domain))
                continue
            draft = ProposalDraft(
                agent=self.name, kind="edit", domain=domain,
                title=f"Salience of {note.path}: {old:g} -> {new:g}",
                rationale=(f"{msg}. Salience moves by {step:g} per run within 0..1; these deliveries are not "
                           "counted again."),
                evidence=[], changes=[FileChange(note.path, sha256(data), after)],
                run_id=ctx.run_id or "adhoc", key=_key("salience", domain, note.path))
            self._propose(report, Proposed(draft, [finding], list(d.ids)))
