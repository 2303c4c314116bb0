"""The Gardener's capture rule: failed-then-fixed pairs become crystal drafts (``new_note``).

The PostToolUse hook records each shell command's shape and exit status in the ledger
(``geode.delivery.capture``); this rule reads those rows per session, finds the pairs with the
same ``pairs`` the Stop hook used to name them, and files one draft per pair into the approval
queue. Nothing is minted: a draft is a proposal a person approves or rejects.

What a draft holds, all of it observed (docs/CAPTURE.md): a binding (``on: bash``, one match
term that fires on the failing command and not on the fix, checked with the hook's own matcher
and ``term_problems`` before it is written; when none can be made the draft says so and binds
nothing), a provenance section (date, session, both commands, their exit codes, the files
touched between them, the ledger rows), and an essence of observed facts for the person to
rewrite. No sentence is written that was not observed. The error's first lines are redacted of
secrets (``geode.gardener.redact``) before they enter the draft.

A rejected draft is not proposed again for the same pair: its key (the draft's path, named by
the failing row) is held, and the queue's gate holds back the same evidence (the two rows).
Raw error lines older than ``RETENTION_DAYS`` are blanked from the ledger by every run.
"""

from __future__ import annotations

import json
import os
import time

from geode.agents.contract import Context, Finding, Report
from geode.delivery import capture
from geode.delivery.match import COMMON_SHELL_WORDS, term_matches, term_problems
from geode.gardener.keys import DAY, GardenerRun, day_stamp
from geode.gardener.redact import redact_line, redact_lines

#: the folder drafts are proposed in (in the default domain)
FOLDER = "captured"


def _sql_rows(engine, since: float, session: str | None) -> dict[str, list[tuple[int | None, float, str, str, str]]]:
    from sqlalchemy import inspect, text

    if engine is None or not inspect(engine).has_table("ledger_event"):
        return {}
    sql = (
        "SELECT id, ts, kind, path, detail, session FROM ledger_event WHERE kind IN (:a, :b) AND ts >= :since"
        + (" AND session = :session" if session else "")
        + " ORDER BY session, ts, id"
    )
    args: dict[str, object] = {"a": capture.RUN_KIND, "b": capture.TOUCH_KIND, "since": since}
    if session:
        args["session"] = session
    out: dict[str, list] = {}
    with engine.connect() as conn:
        for rid, ts, kind, path, detail, sess in conn.execute(text(sql), args):
            out.setdefault(str(sess), []).append((int(rid), float(ts), str(kind), str(path or ""), str(detail or "")))
    return out


def expire_raw(engine, now: float | None = None) -> int:
    """Blank the raw error lines of ``shell_run`` rows older than ``RETENTION_DAYS``; returns how many."""
    from sqlalchemy import inspect, text

    if engine is None or not inspect(engine).has_table("ledger_event"):
        return 0
    cutoff = (now or time.time()) - capture.RETENTION_DAYS * DAY
    n = 0
    with engine.begin() as conn:
        rows = conn.execute(
            text("SELECT id, detail FROM ledger_event WHERE kind = :k AND ts < :c AND detail LIKE :e"),
            {"k": capture.RUN_KIND, "c": cutoff, "e": '%"error"%'},
        ).all()
        for rid, detail in rows:
            try:
                d = json.loads(detail or "{}")
            except ValueError:
                continue
            if not isinstance(d, dict) or "error" not in d:
                continue
            d["error"] = []
            d["error_expired"] = True
            conn.execute(text("UPDATE ledger_event SET detail = :d WHERE id = :i"), {"d": json.dumps(d), "i": rid})
            n += 1
    return n


def _quote(term: str) -> str:
    return term.replace("\\", "\\\\").replace('"', '\\"')


def binding_term(fail: dict, fix: dict) -> str | None:
    """A match term that fires on the failing command and not on the fix, and that lint passes;
    None when there is none (the same command line, fixed by an edit)."""
    fcmd, xcmd = str(fail.get("command") or ""), str(fix.get("command") or "")
    head = " ".join(w for w in (fail.get("word"), fail.get("sub")) if w)
    if not head:
        return None
    fwords = list(fail.get("flags") or []) + list(fail.get("args") or [])
    xwords = list(fix.get("flags") or []) + list(fix.get("args") or [])
    only_fail = [w for w in fwords if w not in xwords and " " not in w and '"' not in w]
    only_fix = [w for w in xwords if w not in fwords and " " not in w and '"' not in w and w.strip("-")]
    candidates = [head + " " + w for w in only_fail[:2]]
    candidates += [f"{head} unless:{w}" for w in only_fix[:3]]
    if len(only_fix) > 1:
        candidates.append(head + "".join(f" unless:{w}" for w in only_fix[:3]))
    if fcmd.strip() == xcmd.strip():
        candidates = [head]
    for term in candidates:
        if redact_line(term) != term:
            continue  # a secret in an argument never becomes a match term
        if head.split()[0] in COMMON_SHELL_WORDS and len(head.split()) < 2 and " unless:" not in term:
            continue
        if any(sev != "info" for _c, sev, _m in term_problems(term, "bash")):
            continue
        if not term_matches(term, ("bash",), fcmd):
            continue
        if fcmd.strip() != xcmd.strip() and term_matches(term, ("bash",), xcmd):
            continue
        return term
    return None


def draft_text(pair: dict, session: str, term: str | None) -> str:
    """The draft crystal: binding and provenance from the pair, an essence of observed facts."""
    fail, fix = pair["fail"], pair["fix"]
    fcmd = redact_line(str(fail.get("command") or ""))
    xcmd = redact_line(str(fix.get("command") or ""))
    errs = redact_lines([str(x) for x in fail.get("error") or []])
    touched = [os.path.basename(t) for t in pair["touched"]]
    day = day_stamp(pair["fail_ts"])
    name = capture.draft_name(pair)
    after = f" after edits to {', '.join(touched)}" if touched else ""
    essence = [f"Observed {day}: `{fcmd}` exited {fail.get('exit')}; `{xcmd}` exited 0{after}."]
    if errs:
        essence.append("The failing run's first lines:")
        essence += [f"    {e}" for e in errs[:5]]
    body = "\n".join(essence)
    if len(body) > 1400:
        body = body[:1400]
    if term is not None:
        binding = ["crystal:", "  deliver: act", "  on: bash", f'  match: "{_quote(term)}"', "  who: all"]
        bound = f"- binding: fires on the failing command and not on the fix (match term `{term}`)"
    else:
        binding = []
        bound = (
            "- binding: none; no match term fires on the failing command and not on the fix "
            "(the same command line, fixed by an edit): yours to write"
        )
    lines = [
        "---",
        f"name: {name}",
        'description: "<one line: what goes wrong here and what to do instead; write it, or reject this draft>"',
        "type: feedback",
        f"last_verified: {time.strftime('%Y-%m-%d')}",
        *binding,
        "---",
        "<!-- A draft geode kept from a command that failed and a variant that then succeeded. The",
        "essence below holds only what was observed: rewrite it as the lesson, in your words (the",
        "trap, how to tell, what to do instead). Where it came from is at the end. -->",
        "<!-- crystal:essence -->",
        body,
        "<!-- /crystal:essence -->",
        "",
        "## Where this came from",
        f"- date: {day}",
        f"- session: {session}",
        f"- failed: `{fcmd}` (exit {fail.get('exit')}), ledger row {pair['fail_id']}",
        f"- then succeeded: `{xcmd}` (exit 0), ledger row {pair['fix_id']}",
        f"- how: {pair['how']}",
        f"- files touched between: {', '.join(touched) if touched else 'none'}",
        bound,
    ]
    if errs:
        lines.append("- first lines of the error (redacted of secrets):")
        lines += [f"    {e}" for e in errs]
    return "\n".join(lines) + "\n"


class Capture:
    """One draft per failed-then-fixed pair kept in the ledger."""

    def __init__(self, run: GardenerRun, session: str | None = None):
        self.run = run
        self.session = session

    def check(self, ctx: Context, engine, report: Report) -> None:
        report.examined["capture_expired"] = expire_raw(engine)
        since = time.time() - capture.RETENTION_DAYS * DAY
        by_session = _sql_rows(engine, since, self.session)
        report.examined["capture_rows"] = sum(len(v) for v in by_session.values())
        found = [(sess, p) for sess, rows in sorted(by_session.items()) for p in capture.pairs(rows)]
        report.examined["capture_pairs"] = len(found)
        domain = ctx.settings.default_domain
        for sess, pair in found:
            path = f"{FOLDER}/{capture.draft_name(pair)}.md"
            term = binding_term(pair["fail"], pair["fix"])
            fcmd = redact_line(str(pair["fail"].get("command") or ""))
            xcmd = redact_line(str(pair["fix"].get("command") or ""))
            finding = Finding(
                "failed-then-fixed",
                path,
                0,
                term or "",
                f"`{fcmd}` exited {pair['fail'].get('exit')}, then `{xcmd}` exited 0 (session {sess})",
                domain,
                severity="info",
            )
            self.run.propose_new_note(
                ctx,
                report,
                finding,
                "capture",
                draft_text(pair, sess, term),
                f"Draft crystal {path}: `{fcmd}` failed, `{xcmd}` passed",
                f"In session {sess} on {day_stamp(pair['fail_ts'])}, `{fcmd}` exited "
                f"{pair['fail'].get('exit')} and `{xcmd}` then exited 0 ({pair['how']}). The binding and "
                "provenance are filled in from those commands; the essence holds only what was observed "
                "and is yours to rewrite.",
                [pair["fail_id"], pair["fix_id"]],
                "draft not proposed",
            )
