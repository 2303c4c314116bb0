"""The Gardener: grows the store from what was used, never from what it read.

It works from the usage ledger. What it reads of the store is what a binding is made of (the
``crystal:`` block, ``salience``, ``status``, ``valid_from``, file names and paths): never a
note's body. What it writes is built from ledger rows (terms the agent hunted or searched for,
the action that came before) and fixed templates, so no proposal of it carries a sentence
taken from a note or a document (principle 4; the source's scar is a pipeline that minted an
invented statistic from text it had been handed). Four rules, each a reversible proposal:


1. **Blocked lookups -> crystal stubs** (``new_note``): ``geode.gardener.stubs``.
2. **Never fired -> widen or retire** (``edit`` / ``status``): ``geode.gardener.never_fired``.
3. **Searched but unbound -> bind** (``edit``): ``geode.gardener.bind``.
4. **Salience** follows work unlocked (``edit``): ``geode.gardener.salience``.
5. **Failed, then fixed -> crystal drafts** (``new_note``): ``geode.gardener.capture``. It runs
   first and whatever the ledger's age (a pair is one session's evidence, not a pattern of use);
   ``geode drafts`` runs this rule alone (``Gardener(capture_only=True)``).

Each rule is a plain class handed the run's state (``geode.gardener.keys.GardenerRun``); this
module holds the agent that composes them and the run: the ``[gardener]`` settings, the notes read, the one pass over the ledger window (``geode.gardener.scan``), what it proposed
before, and the per-rule cap.

A rerun files nothing twice: rows cited by an earlier stub are not grouped again, a key with a
pending, conflicting or rejected proposal is not proposed again, and salience counts only
deliveries after its watermark. An empty ledger, or one younger than the window (less than
``window_days`` of ledger time from its oldest row to its newest), is ``nothing-to-learn``: not a
failure, not green, and nothing is filed from it. Hand calls of ``geode deliver`` (sessions
``manual:...``) are not use and are left out of the ledger it reads.
"""

from __future__ import annotations

import json
import os

from geode.agents.contract import NOTHING_TO_LEARN, Agent, Context, Report, Skipped
from geode.delivery.capture import RETENTION_DAYS
from geode.gardener.bind import Bind
from geode.gardener.capture import Capture
from geode.gardener.keys import DAY, GardenerRun, iso_stamp
from geode.gardener.never_fired import NeverFired
from geode.gardener.salience import Salience
from geode.gardener.scan import scan
from geode.gardener.stubs import Stubs
from geode.kernel.config import SCHEMA

#: proposal statuses that keep the Gardener from proposing the same thing again
_HOLD = ("pending", "conflict", "failed", "rejected")


class Gardener(Agent):
    name = "gardener"

    #: the settings of ``[gardener]``: keys, types, defaults and what each means are declared in
    #: ``geode.kernel.config.SCHEMA``; ``_configure`` puts them in each run's ``GardenerRun``
    SETTINGS = tuple(SCHEMA["gardener"])

    def __init__(self, capture_only: bool = False, session: str | None = None, **overrides):
        unknown = set(overrides) - set(self.SETTINGS)
        if unknown:
            raise TypeError(f"unknown Gardener setting(s): {', '.join(sorted(unknown))}")
        self._overrides = overrides
        self.capture_only = capture_only  # ``geode drafts``: only the failed-then-fixed drafts
        self.session = session  # ... of this session only

    #: the rules, in the order they run, each with the name its proposals and caps go under
    RULES = (("stub", Stubs), ("never-fired", NeverFired), ("bind", Bind), ("salience", Salience))

    def _configure(self, settings) -> GardenerRun:
        """``settings.gardener`` (``[gardener]``, checked by load_settings), then the constructor's overrides."""
        cfg = settings.gardener.replace(**self._overrides)
        cfg = cfg.replace(salience_step=min(max(float(cfg.salience_step), 0.0), 1.0))
        return GardenerRun(name=self.name, cfg=cfg)

    # -- the run -----------------------------------------------------------------------
    def examine(self, ctx: Context) -> Report:
        settings = ctx.settings
        report = Report(agent=self.name)
        run = self._configure(settings)
        messages: list[str] = []
        ex = report.examined
        for key in ("notes", "unreadable", "crystals", "ledger_rows", "window_rows"):
            ex.setdefault(key, 0)
        for domain, load in ctx.readable(report):
            for note in load.notes:
                ex["notes"] += 1
                if "crystal" in note.frontmatter:
                    ex["crystals"] += 1
                run.notes[f"{domain}:{note.path}"] = (domain, note)

        if settings.team_rules:  # a team's sections that name commands: drafts of act bindings, never minted
            from geode.gardener import team_drafts

            team_drafts.propose(ctx, report, self.name)
        engine = self._engine(ctx)
        run.prior = self._prior(engine)
        run.rule = "capture"
        Capture(run, self.session).check(ctx, engine, report)
        if self.capture_only:
            n = report.examined.get("capture_pairs", 0)
            report.message = f"{n} failed-then-fixed pair(s) in the ledger's last {RETENTION_DAYS} days"
            return report
        s = scan(
            engine,
            dict(settings.domains),
            run.cfg.window_days * DAY,
            watermarks=run.prior["watermarks"],
            consumed=run.prior["consumed"],
        )
        ex["ledger_rows"] = s.total_rows
        if s.total_rows == 0:
            report.status = NOTHING_TO_LEARN
            report.message = "; ".join(["nothing to learn from yet: the usage ledger is empty (0 rows)", *messages])
            return report
        ex["window_rows"] = s.rows
        ex["window_days"] = int(run.cfg.window_days)
        ex["window_first_ts"] = int(s.first_ts)
        ex["window_last_ts"] = int(s.last_ts)
        ex["ledger_first_ts"] = int(s.ledger_first_ts)
        ex["sessions"] = s.sessions
        for kind, n in sorted(s.by_kind.items()):
            ex[f"rows_{kind}"] = n
        ex["blocked_without_terms"] = s.blocked_without_terms
        covered = (s.ledger_last_ts - s.ledger_first_ts) / DAY
        ex["ledger_days"] = int(covered)
        if covered < run.cfg.window_days:
            # a ledger younger than the window says too little about use: nothing is filed from it
            report.status = NOTHING_TO_LEARN
            report.message = "; ".join(
                [
                    f"nothing to learn from yet: the ledger covers {covered:.1f} days of ledger time "
                    f"({s.total_rows} rows from {iso_stamp(s.ledger_first_ts)}), less than the "
                    f"{run.cfg.window_days:g}-day window ([gardener] window_days): nothing is filed from it",
                    *messages,
                ]
            )
            return report
        kinds = ", ".join(f"{k} {n}" for k, n in sorted(s.by_kind.items()))
        messages.insert(
            0,
            f"ledger window {iso_stamp(s.first_ts)} to {iso_stamp(s.last_ts)} (the last {run.cfg.window_days:g} days "
            f"of ledger time; the ledger holds {s.total_rows} rows from {iso_stamp(s.ledger_first_ts)}): "
            f"{s.rows} rows examined ({kinds})",
        )
        if s.blocked_without_terms:
            messages.append(
                f"{s.blocked_without_terms} blocked lookup(s) carry no command or tool input in their "
                "detail: nothing to take match terms from"
            )
            report.skipped.append(
                Skipped(
                    "",
                    0,
                    "blocked",
                    f"{s.blocked_without_terms} blocked lookup row(s) without "
                    "a command or tool input in detail: no terms",
                )
            )
        for rule, check in self.RULES:
            run.rule = rule
            check(run).check(ctx, s, report)
            if run.capped[rule]:
                report.skipped.append(
                    Skipped(
                        "",
                        0,
                        rule,
                        f"{run.capped[rule]} more {rule} proposal(s) not made "
                        f"this run: at most {run.cfg.max_proposals} per rule",
                    )
                )
        report.message = "; ".join(messages)
        return report

    def _engine(self, ctx: Context):
        if ctx.engine is not None:
            return ctx.engine
        settings = ctx.settings
        if not settings.database_url and not os.path.exists(str(settings.records_file)):
            return None  # no ledger file: never create one just to find it empty
        from geode.records.models import engine_for

        return engine_for(settings)

    def _prior(self, engine) -> dict:
        """What this agent proposed before: keys held (pending, conflict, failed, rejected),
        blocked rows already cited by a stub, and per crystal the newest delivery row a
        salience proposal cited (its watermark)."""
        held: set[str] = set()  # keys of proposals still pending, conflicting, failed or rejected
        consumed: set[int] = set()  # ledger rows an earlier stub cited
        watermarks: dict[str, int] = {}  # "domain:path" -> newest delivery row a salience proposal cited
        out = {"held": held, "consumed": consumed, "watermarks": watermarks}
        if engine is None:
            return out
        from sqlalchemy import inspect, select

        if not inspect(engine).has_table("proposal"):
            return out
        from geode.queue.tables import C, P

        q = (
            select(P.c.key, P.c.status, P.c.evidence, P.c.domain, C.c.path)
            .select_from(P.join(C, C.c.proposal_id == P.c.id))
            .where(P.c.agent == self.name)
        )
        with engine.connect() as conn:
            rows = conn.execute(q).all()
        for key, status, evidence, domain, path in rows:
            if status in _HOLD:
                held.add(key)
            if status == "undone":
                continue
            try:
                ids = [
                    int(e["ledger_event"])
                    for e in json.loads(evidence or "[]")
                    if isinstance(e, dict) and "ledger_event" in e
                ]
            except (ValueError, TypeError):
                ids = []
            if key.startswith("stub:") or key.startswith("capture:"):
                consumed.update(ids)
            elif key.startswith("salience:") and ids:
                cid = f"{domain}:{path}"
                watermarks[cid] = max(watermarks.get(cid, 0), max(ids))
        return out
