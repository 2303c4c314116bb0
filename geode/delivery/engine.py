"""Delivery: from an action to the crystals the agent reads, and the ledger rows that say so.

One function per channel, shared by the hooks and ``geode deliver``. Each returns the
documented JSON shape of ``geode deliver --json``:
``{"delivered": [{"name", "path", "domain", "crystal_id", "term", "chars", "truncated"} (+ "exempt": true
 for a ``control: never`` crystal)],
"withheld": [...], "skipped": [...], "suppressed": [...], "text": str}``.

Why the crystal id is ``domain:path``: the original kept one backoff clock per file name, so
two crystals called ``README.md`` in different folders silenced each other. Paths are unique.
"""

from __future__ import annotations

import os
import time

from geode.delivery import ledger
from geode.delivery import match as _match
from geode.delivery.binding import control_exempt, parse_binding, who_matches
from geode.delivery.index import Index
from geode.delivery.pack import Item, cut_boot, pack
from geode.kernel.crystal import content_hash  # noqa: F401 - re-exported: the hook keys deny-once calls with it
from geode.kernel.sqlite import sqlite3

BOOT_TOTAL_CAP = 9000

#: A very long action (a 50 MB Bash command, a Write of a huge file) is matched on its first
#: ``ACT_HEAD_CHARS`` and last ``ACT_TAIL_CHARS`` characters, joined by a newline (a shell
#: operator, so no term spans the cut), as the original product did (docs/DESIGN.md, "Lessons"): splitting and matching cost
#: about half a microsecond a character, and 50 MB took the hook 28 s, past Claude Code's 10 s
#: hook limit. A term only in the middle of such an action does not fire; the README says so.
ACT_HEAD_CHARS = 32_768
ACT_TAIL_CHARS = 8_192


def clip_action(text: str) -> str:
    """``text`` itself, or its head and tail when it is longer than the two together."""
    if len(text) <= ACT_HEAD_CHARS + ACT_TAIL_CHARS:
        return text
    return text[:ACT_HEAD_CHARS] + "\n" + text[-ACT_TAIL_CHARS:]


def _entry(item: Item, chars: int = 0, truncated: bool = False, reason: str = "") -> dict:
    d = {
        "name": item.name,
        "path": item.path,
        "domain": item.domain,
        "crystal_id": item.crystal_id,
        "term": item.term,
        "chars": chars,
        "truncated": truncated,
    }
    if reason:
        d["reason"] = reason
    return d


def empty_result() -> dict:
    return {"delivered": [], "withheld": [], "skipped": [], "suppressed": [], "text": ""}


class Delivery:
    """One delivery's context: settings, the open index, the ledger connection, the session."""

    def __init__(self, settings, session: str, agent: str = "main", idx: Index | None = None):
        self.settings = settings
        self.session = session or "no-session"
        self.agent = agent
        self.idx = idx or Index(settings)
        self.events: list[dict] = []
        self._ledger_conn: sqlite3.Connection | None = None  # opened for the control arm's plan
        self._plan: dict | None = None
        self._ts: float | None = None  # one time for every row of one action: lint counts actions by it
        #: crystal ids whose binding says ``control: never``: the control arm never withholds them,
        #: and their delivered rows say so (``control.EXEMPT_DETAIL``), so study counts them apart
        self._exempt: set[str] = set()
        self._unverified: set[str] = set()  # act items built without their stat (``_verify``)

    # -- the control arm -------------------------------------------------------
    def _withhold(self, crystal_id: str) -> tuple[bool, str]:
        if crystal_id in self._exempt:
            from geode.delivery.control import EXEMPT_REASON

            return False, EXEMPT_REASON
        if self.settings.withhold_rate <= 0 and self.settings.withhold_rate_source == "GEODE_WITHHOLD_RATE":
            return False, "control arm off (GEODE_WITHHOLD_RATE=0)"
        from geode.delivery import control  # here, not above: with the arm off a call never loads it

        path = self.settings.records_file
        if self._ledger_conn is None and path is not None and os.path.exists(path):
            try:
                self._ledger_conn = ledger.connect(self.settings)
            except (sqlite3.Error, OSError):  # locked or unreadable: the plan is read from the config instead
                self._ledger_conn = None
        if self._plan is None:
            self._plan = control.load_plan(self.settings, self._ledger_conn)
        return control.should_withhold(self.settings, self._ledger_conn, self.session, crystal_id, plan=self._plan)

    def close(self) -> None:
        if self._ledger_conn is not None:
            self._ledger_conn.close()
            self._ledger_conn = None

    # -- building items -----------------------------------------------------------
    # Why a stat and not a parse: a common command can match hundreds of crystals, and only
    # the few that fit the budget are delivered. Re-reading and re-parsing every match to be
    # sure it is fresh cost 55 ms at 240 matches. Now one ``stat`` per match tells whether the
    # index's copy of the binding, salience and essence length still holds; an item is read
    # (essence only, no frontmatter parse, its hash checked against the index) when the packer
    # decides it fits, and a file that changed is parsed as before. The delivered text is
    # still always read from the file at delivery time.
    #
    # The act channel goes one step further (issue 25): a command matching 240 crystals made 240
    # ``stat`` calls for the six that fit. There an item is built from the index alone
    # (``defer``), and the one ``stat`` is made when the packer is about to admit it
    # (``_verify``, called by ``_admitter``): only what can be delivered is checked. An item
    # whose file changed is then parsed as before and dropped when it no longer applies; one
    # skipped for budget is not checked now (it is checked when it fits, on a later action).
    def _fresh_item(self, row, term: str, carried: bool, action: str | None, prepared=None, defer: bool = False):
        """The crystal as an item (its essence read later, when it fits); None when it no
        longer applies (edited, removed, unbound)."""
        deferred = defer and row.mtime_ns is not None and row.domain in self.settings.domains
        if deferred or self.idx.is_current(row):
            if not row.essence_len:
                return None
            if row.exempt:
                self._exempt.add(row.crystal_id)
            root = self.settings.domains[row.domain]
            item = Item(
                row.crystal_id,
                row.domain,
                row.path,
                os.path.join(root, row.path),
                row.name,
                term,
                None,
                row.salience,
                carried,
                row.essence_hash,
                essence_len=row.essence_len,
                spec=row.spec or float(len(term)),
                source=(row, action, prepared),
            )
            if deferred:
                self._unverified.add(row.crystal_id)
            return item
        return self._parsed_item(row, term, carried, action, prepared)

    def _verify(self, item: Item) -> bool:
        """The deferred ``stat`` of an act item about to be admitted: True when it still
        applies (an item whose file changed is re-read in place), False when it no longer does."""
        if item.crystal_id not in self._unverified:
            return True
        self._unverified.discard(item.crystal_id)
        row, action, prepared = item.source
        if self.idx.is_current(row):
            return True
        fresh = self._parsed_item(row, item.term, item.carried, action, prepared, force=True)
        if fresh is None:
            return False
        item.name, item.term, item.essence, item.salience = fresh.name, fresh.term, fresh.essence, fresh.salience
        item.content_hash, item.spec = fresh.content_hash, fresh.spec
        item.essence_len = len(fresh.essence or "")
        return True

    def _load(self, item: Item) -> str | None:
        """The essence of an item that fits; None when the file no longer delivers it."""
        row, action, prepared = item.source
        essence = self.idx.essence_of(row)
        if essence is not None:
            return essence
        fresh = self._parsed_item(row, item.term, item.carried, action, prepared, force=True)
        if fresh is None:
            return None
        item.content_hash, item.term, item.salience = fresh.content_hash, fresh.term, fresh.salience
        return fresh.essence

    def _parsed_item(self, row, term: str, carried: bool, action: str | None, prepared=None, force: bool = False):
        """Read and parse the crystal now; None when it no longer applies."""
        parsed, changed = self.idx.reload(row.domain, row.path)
        if parsed is None or not parsed.essence:
            return None
        spec = row.spec or float(len(term))
        if changed or force:
            crystal = parsed.frontmatter.get("crystal")
            if not isinstance(crystal, dict):
                return None
            b = parse_binding(crystal, parsed.fm_lines, self.settings.known_agents)
            if action is not None:
                if "act" not in b.deliver or action not in b.on:
                    return None
                fired = [_match.compile_term(t, action) for t in b.terms]
                fired = [t for t in fired if prepared is not None and _match.matches(t, prepared)]
                if not fired:
                    return None
                counts = self.idx.term_counts(t.orig for t in fired)
                best = max(fired, key=lambda t: (_match.specificity(t.length, counts.get(t.orig, 1)), len(t.orig)))
                term, spec = best.orig, _match.specificity(best.length, counts.get(best.orig, 1))
            if not who_matches(b.who, self.agent):
                return None
        fm = parsed.frontmatter
        if control_exempt(fm.get("crystal")):
            self._exempt.add(row.crystal_id)
        else:
            self._exempt.discard(row.crystal_id)
        try:
            sal = float(fm.get("salience", 0.5))
        except (TypeError, ValueError):
            sal = 0.5
        root = self.settings.domains[row.domain]
        return Item(
            row.crystal_id,
            row.domain,
            row.path,
            os.path.join(root, row.path),
            str(fm.get("name") or row.name),
            term,
            parsed.essence,
            sal,
            carried,
            content_hash(parsed.essence),
            spec=spec,
        )

    def _event(
        self,
        kind: str,
        item: Item | None,
        action: str,
        channel: str,
        chars: int = 0,
        truncated: bool = False,
        detail: str = "",
    ) -> None:
        fields: dict[str, object] = {"session": self.session, "action": action, "channel": channel, "agent": self.agent}
        if self._ts is not None:
            fields["ts"] = self._ts
        if item is not None:
            fields.update(
                domain=item.domain,
                crystal_id=item.crystal_id,
                path=item.path,
                content_hash=item.content_hash,
                term=item.term,
            )
        self.events.append(ledger.new_event(kind, chars=chars, truncated=truncated, detail=detail, **fields))

    def record(self, kind: str, action: str, channel: str, detail: str = "", domain: str = "") -> None:
        """Collect a ledger row about no crystal: the hook's own decisions (a deny-once hold, a
        blocked or marked lookup in ``domain``, a session's end, a Stop that asked for a note).

        The row carries this delivery's session, agent and action time like every other, and is
        written with them by ``flush``; the hook never builds or edits rows itself."""
        self._event(kind, None, action, channel, detail=detail)
        if domain:
            self.events[-1]["domain"] = domain

    # -- act ----------------------------------------------------------------------
    def act(self, actions: tuple[str, ...], text: str, label: str | None = None, path: str = "", cwd: str = "") -> dict:
        """Crystals bound to ``actions`` (e.g. ``("bash", "commit")``) whose terms occur in ``text``;
        for a Write or Edit of ``path``, also the team rules whose globs match it (``team_sync``)."""
        result = empty_result()
        label = label or actions[0]
        self._ts = time.time()
        text = clip_action(text)
        prepared = _match.prepare(actions, text)
        idx = self.idx
        found: dict[str, tuple] = {}
        for row, term in idx.candidates(actions, text, prepared):
            if "act" in row.deliver and who_matches(row.who, self.agent):
                found[row.crystal_id] = (row, term)
        if path and self.settings.team_rules and any(a in ("write", "edit") for a in actions):
            from geode.delivery import team_sync

            hits = team_sync.attached(self.settings, path, cwd)
            rows = idx.rows_at([(d, p) for d, p, _g in hits])
            for d, p, glob in hits:
                attached = rows.get((d, p))
                if attached is not None and "act" in attached.deliver:
                    attached.spec = float(len(glob))
                    found.setdefault(attached.crystal_id, (attached, glob))
        # crystals skipped for budget earlier in this session go first when they match again
        pending = idx.sess_get(self.session, "pending")
        items: list[Item] = []
        for cid, (row, term) in found.items():
            action = next((a for a in actions if a in row.on), actions[0])
            glob_bound = not row.terms  # a team rule attached by its globs: no match terms to re-check
            it = self._fresh_item(row, term, cid in pending, None if glob_bound else action, prepared, defer=True)
            if it is not None:
                items.append(it)
        # backoff (off by default): per crystal id, never per file name
        if self.settings.repeat_backoff_s > 0 and items:
            last = idx.sess_get(self.session, "delivered")
            now = time.time()
            keep = []
            for it in items:
                ts = last.get(it.crystal_id, (0, 0))[0]
                if now - ts < self.settings.repeat_backoff_s:
                    result["suppressed"].append(_entry(it, reason=f"delivered {int(now - ts)} s ago"))
                    self._event(
                        "suppressed_backoff", it, label, "act", detail=f"backoff {self.settings.repeat_backoff_s}s"
                    )
                else:
                    keep.append(it)
            items = keep
        delivered, skipped, text_out = pack(
            items, self.settings.budget, label, load=self._load, admit=self._admitter(label, "act", result)
        )
        self._record(result, delivered, skipped, label, "act", f"budget {self.settings.budget}")
        result["text"] = text_out
        self._session_updates(delivered, skipped)
        self._ts = None
        return result

    # -- shared by the channels ---------------------------------------------------------
    def _admitter(self, action: str, channel: str, result: dict):
        """``pack``'s ``admit``: the control arm's decision for an item that would be delivered
        now; a withheld one is recorded and listed in ``result``."""

        def admit(it: Item) -> bool:
            if not self._verify(it):
                return False  # its file no longer delivers it: dropped, as an unfit match always was
            withhold, why = self._withhold(it.crystal_id)
            if withhold:
                result["withheld"].append(_entry(it, reason=why))
                self._event("withheld", it, action, channel, detail=why)
            return not withhold

        return admit

    def _control_arm(self, items: list[Item], action: str, channel: str, result: dict) -> list[Item]:
        """Withhold the control arm's units (recorded, and listed in ``result``); the rest go on."""
        keep = []
        for it in items:
            withhold, why = self._withhold(it.crystal_id)
            if withhold:
                result["withheld"].append(_entry(it, reason=why))
                self._event("withheld", it, action, channel, detail=why)
            else:
                keep.append(it)
        return keep

    def _record(self, result: dict, delivered, skipped, action: str, channel: str, limit: str) -> None:
        """One ledger row and one result entry per delivered crystal; one result entry per
        skipped crystal and one row per action holding the skipped set. A crystal skipped again
        while it is still pending from an earlier action of the session is listed but not
        recorded again (a common command matching 300 crystals would otherwise record 300 skips
        per call, every call, saying the same thing)."""
        for it, block, truncated in delivered:
            entry = _entry(it, len(block), truncated)
            detail = ""
            if it.crystal_id in self._exempt:
                from geode.delivery.control import EXEMPT_DETAIL  # only for an exempt crystal: the arm may be off

                entry["exempt"] = True
                detail = EXEMPT_DETAIL
            result["delivered"].append(entry)
            self._event("delivered", it, action, channel, len(block), truncated, detail)
        fresh: list[tuple[str, str]] = []
        for it in skipped:
            result["skipped"].append(_entry(it, reason=limit))
            if not it.carried:
                fresh.append((it.crystal_id, it.term))
        # one row per action holds the set (``ledger.skip_set_details``; read by ``ledger.skipped_items``)
        for detail in ledger.skip_set_details(limit, fresh):
            self._event("skipped_budget", None, action, channel, detail=detail)

    def _session_updates(self, delivered, skipped) -> None:
        try:
            if delivered:
                ids = [it.crystal_id for it, _b, _t in delivered]
                self.idx.sess_put(self.session, "delivered", ids)
                self.idx.sess_del(self.session, "pending", ids)
                self._offer([it.abs_path for it, _b, t in delivered if t])
            fresh = [it.crystal_id for it in skipped if not it.carried]
            if fresh:
                self.idx.sess_put(self.session, "pending", fresh)
        except sqlite3.Error:
            pass  # session state is best effort (the index locked or read-only); the ledger rows are what count

    def _offer(self, paths: list[str]) -> None:
        """Remember the notes this session was handed cut, each ending "full note: <path>": a Read
        of exactly that path is then the agent following geode's own pointer, which the lookup
        guard lets through and records as a follow-up (``hook.HookRun._lookup``), whichever
        channel cut the note (act or boot)."""
        if not paths:
            return
        try:
            self.idx.sess_put(self.session, "offered", [os.path.normpath(p) for p in paths])
        except sqlite3.Error:
            pass  # best effort like all session state: without it the Read is denied, never wrongly allowed

    # -- boot and inject ------------------------------------------------------------
    def boot(self) -> dict:
        """Session start: every boot crystal for this agent, each cut at ``boot_chars``."""
        result = empty_result()
        parts = []
        total = 0
        head = "geode: notes to start this session with (reference data from the project's memory):\n"
        items = []
        for row in self.idx.channel("boot"):
            if not who_matches(row.who, self.agent):
                continue
            it = self._fresh_item(row, "session start", False, None, None)
            if it is not None:
                items.append(it)
        delivered, skipped = [], []
        for it in self._control_arm(items, "boot", "boot", result):
            if it.essence is None:
                it.essence = self._load(it)
                if it.essence is None:
                    continue
            body, truncated = cut_boot(it, self.settings.boot_chars)
            block = f"\n◆ {it.name} ({it.domain}/{it.path}): {body}\n"
            if total + len(block) + len(head) > BOOT_TOTAL_CAP:
                skipped.append(it)
                continue
            parts.append(block)
            total += len(block)
            delivered.append((it, block, truncated))
        self._record(result, delivered, skipped, "boot", "boot", f"boot cap {BOOT_TOTAL_CAP}")
        self._offer([it.abs_path for it, _b, t in delivered if t])
        if parts:
            result["text"] = head + "".join(parts)
        return result

    def inject(self, prompt: str) -> dict:
        """Every prompt: inject crystals (all of them, or those whose terms occur in the prompt)."""
        result = empty_result()
        prepared = _match.prepare(("prompt",), prompt)
        items = []
        for row in self.idx.channel("inject"):
            if not who_matches(row.who, self.agent):
                continue
            term = ""
            if row.terms:  # the word rule, as for file text (``match.py``)
                term = next(
                    (
                        t
                        for t in sorted(row.terms, key=len, reverse=True)
                        if _match.matches(_match.compile_term(t, "prompt"), prepared)
                    ),
                    "",
                )
                if not term:
                    continue
            it = self._fresh_item(row, term or "every prompt", False, None, None)
            if it is not None:
                items.append(it)
        delivered, skipped, text_out = pack(
            items,
            self.settings.inject_budget,
            "prompt",
            load=self._load,
            admit=self._admitter("prompt", "inject", result),
        )
        self._record(result, delivered, skipped, "prompt", "inject", f"inject budget {self.settings.inject_budget}")
        result["text"] = text_out
        return result

    def flush(self) -> str:
        """Write the collected ledger events; returns where they went ("db", "spool", "none")."""
        if not self.events:
            return "none"
        where = ledger.append(self.settings, self.events, conn=self._ledger_conn)
        self.events = []
        return where
