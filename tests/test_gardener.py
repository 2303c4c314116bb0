"""The Gardener on hand-built ledgers: each rule with exact counts, the window it reports, the
empty ledger, salience within bounds, apply/undo and reruns.

Every ledger here is written row by row through ``geode.delivery.ledger.append`` into a tmp
GEODE_HOME, with fixed timestamps; the store's files are dated well before the window so the
"changed inside the window" rule applies only where a test asks for it.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from geode.agents.contract import NOTHING_TO_LEARN, OK, Context
from geode.agents.upkeep import run_agent
from geode.delivery import ledger
from geode.delivery.binding import parse_binding
from geode.delivery.search_log import record_search, search_event
from geode.kernel.note import parse_note
from geode.queue import apply, proposals
from tests.stores import GeodeEnv

DAY = 86400.0
#: the newest ledger row of every test (2026-09-21); the window ends here
END = 1_790_000_000.0
OLD = END - 90 * DAY  # store files are this old


# -- helpers (imported by the other test_gardener modules) -----------------------------------
def make_env(tmp_path: Path, files: dict[str, str | bytes], toml: str = ""):
    """(settings, engine, root) of a store of ``files``, dated before the window; the folder is
    ``main``, so the domain is "main", the one the ledgers here name."""
    settings, engine, root = GeodeEnv(tmp_path, root="main").files(files, toml)
    age_files(root)
    return settings, engine, root


def age_files(root: Path, ts: float = OLD) -> None:
    for dirpath, _dirs, names in os.walk(root):
        for n in names:
            os.utime(os.path.join(dirpath, n), (ts, ts))


class Ledger:
    """Rows with fixed times, appended through ``geode.delivery.ledger.append``."""

    def __init__(self, settings, root: Path):
        self.settings = settings
        self.root = str(root)
        self.rows: list[dict] = []
        self._n = 0

    def add(self, kind: str, ts: float, session: str, **fields) -> dict:
        self._n += 1
        ev = ledger.new_event(kind, ts=ts, session=session, event_id=f"{self._n:032x}", **fields)
        self.rows.append(ev)
        return ev

    def delivered(self, ts, session, cid, action="bash", term="x"):
        domain, _, path = cid.partition(":")
        return self.add(
            "delivered",
            ts,
            session,
            domain=domain,
            crystal_id=cid,
            path=path,
            action=action,
            channel="act",
            term=term,
            chars=100,
        )

    def blocked(self, ts, session, command=None, tool="Bash", what="grep", tool_input=None, kind="blocked"):
        detail = {"tool": tool, "what": what}
        if command is not None:
            detail["command"] = command.replace("{root}", self.root)
        if tool_input is not None:
            detail["input"] = {k: v.replace("{root}", self.root) for k, v in tool_input.items()}
        return self.add(kind, ts, session, domain="main", action=what, channel="guard", term=what, detail=detail)

    def searched(self, ts, session, query, hits):
        ev = search_event(query, [{"domain": "main", "path": h} for h in hits], session)
        self._n += 1
        ev.update(ts=ts, event_id=f"{self._n:032x}")
        self.rows.append(ev)
        return ev

    def opened(self, ts: float = END - 40 * DAY) -> dict:
        """The ledger's oldest row, long before the rest: a ledger that covers the Gardener's
        window (it files nothing from a younger one). A blocked lookup with no command, outside
        the window: no rule reads it."""
        return self.blocked(ts, "first-session")

    def write(self) -> None:
        assert ledger.append(self.settings, self.rows) == "db"
        self.rows = []


def crystal(name: str, match: str, extra: str = "", on: str = "bash", essence: str = "Do the thing right.") -> str:
    return (
        f"---\nname: {name}\n{extra}crystal:\n  deliver: act\n  on: {on}\n  match: {match}\n  who: all\n---\n"
        f"<!-- crystal:essence -->\n{essence}\n<!-- /crystal:essence -->\n"
    )


def snapshot(root: Path) -> dict[str, str]:
    out = {}
    for dirpath, _dirs, names in os.walk(root):
        for n in names:
            p = Path(dirpath) / n
            out[str(p.relative_to(root))] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def filed(engine, run_id):
    return [proposals.get(engine, p["id"]) for p in proposals.list_proposals(engine, run_id=run_id)]


def after_bytes(engine, pid) -> list[tuple[str, bytes | None, bytes | None]]:
    with engine.connect() as conn:
        _row, changes = proposals.load(conn, pid)
    return [
        (
            c["path"],
            None if c["before"] is None else bytes(c["before"]),
            None if c["after"] is None else bytes(c["after"]),
        )
        for c in changes
    ]


def binding_of(data: bytes, path: str):
    note = parse_note(data.decode("utf-8"), path)
    return parse_binding(note.crystal, note.fm_lines), note


def deliveries_over(L: Ledger, cid: str, n: int, days: float = 35, prefix: str = "d"):
    """``n`` deliveries of ``cid`` spread over ``days`` ending at END, one session each."""
    for i in range(n):
        L.delivered(END - days * DAY + i * (days * DAY / max(n - 1, 1)), f"{prefix}{i}", cid)


# -- blocked lookups become stubs ------------------------------------------------------------
def test_blocked_lookups_become_stubs_with_the_hunted_terms(tmp_path):
    settings, engine, root = make_env(
        tmp_path,
        {
            "ci/pipes.md": crystal("pipes", '"| tail"'),
            "shell/pipestatus.md": "# PIPESTATUS\n\nSome text.\n",
        },
    )
    L = Ledger(settings, root)
    t = END - 2 * DAY
    L.delivered(t, "s1", "main:ci/pipes.md", term="| tail")
    L.blocked(t + 60, "s1", "grep -rn deploy {root}")
    L.blocked(t + 100, "s2", 'rg -i "deploy|rollback" {root}/ops')
    L.blocked(t + 130, "s2", "grep -r rollback {root}")
    L.blocked(t + 200, "s3", tool="Read", what="Read", tool_input={"file_path": "{root}/shell/pipestatus.md"})
    L.blocked(t + 230, "s3", tool="Grep", what="Grep", tool_input={"pattern": "PIPESTATUS", "path": "{root}"})
    L.blocked(t + 300, "s4", "grep kubeconfig {root}")  # a group of one: no stub
    L.blocked(t + 400, "s5")  # no command recorded: no terms
    L.blocked(t + 500, "s6", "cat {root}/ci/pipes.md  # geode:lookup", what="cat", kind="lookup_marked")
    L.opened()
    L.write()

    report = run_agent(settings, engine, "r1", "gardener")
    assert report.status == OK, report.message
    ex = report.examined
    assert (ex["notes"], ex["crystals"], ex["ledger_rows"], ex["window_rows"]) == (2, 1, 10, 9)
    assert (ex["rows_blocked"], ex["rows_delivered"], ex["rows_lookup_marked"]) == (7, 1, 1)
    assert ex["blocked_groups"] == 3 and ex["blocked_without_terms"] == 1
    assert ex["window_first_ts"] == int(t) and ex["window_last_ts"] == int(t + 500)
    assert "ledger window 2026-09-19T" in report.message and "blocked 7" in report.message
    kinds = sorted(f.kind for f in report.findings)
    assert kinds == ["blocked-lookups", "blocked-lookups"]
    stubs = [p for p in report.proposals if p["kind"] == "new_note"]
    assert len(report.proposals) == 2 and len(stubs) == 2
    assert sorted(p["paths"][0] for p in stubs) == ["stubs/lookup-deploy-rollback.md", "stubs/lookup-pipestatus.md"]

    by_path = {}
    for p in filed(engine, "r1"):
        [(path, before, after)] = after_bytes(engine, p["id"])
        assert before is None
        by_path[path] = (p, after)
    p, after = by_path["stubs/lookup-deploy-rollback.md"]
    b, note = binding_of(after, "stubs/lookup-deploy-rollback.md")
    assert list(b.terms) == ["deploy", "rollback", "ops"] and b.on == ("bash",) and b.deliver == ("act",)
    assert note.essence == ""  # left to a person: an empty essence delivers nothing
    ids = {r["id"]: r for r in _ledger_ids(engine)}
    cited = [e["ledger_event"] for e in p["evidence"] if "ledger_event" in e]
    assert len(cited) == 3 and all(ids[i]["kind"] == "blocked" for i in cited)
    assert any("finding" in e for e in p["evidence"])
    p, after = by_path["stubs/lookup-pipestatus.md"]
    b, _note = binding_of(after, "stubs/lookup-pipestatus.md")
    assert list(b.terms) == ["pipestatus"]


def _ledger_ids(engine):
    from geode.records.models import LedgerEvent

    with engine.connect() as conn:
        return [dict(r) for r in conn.execute(LedgerEvent.__table__.select()).mappings()]


# -- never fired: widen or retire --------------------------------------------------------------
def _never_store():
    return {
        "ci/pipes.md": crystal("pipes", '"| tail"'),
        "ops/helm.md": crystal("helm-upgrade", '"helm upgrade"', extra="tags: [deploy]\n"),
        "misc/old.md": crystal("old-trick", "frobnicate"),
        "misc/fresh.md": crystal("fresh-trick", "gizmo"),
        "misc/boot.md": "---\nname: boot\ncrystal:\n  deliver: boot\n---\n<!-- crystal:essence -->\nHi.\n"
        "<!-- /crystal:essence -->\n",
        "misc/retired.md": crystal("gone", "whatever", extra="status: deprecated\n"),
    }


def _never_ledger(settings, root, days=35, deliveries=25):
    L = Ledger(settings, root)
    deliveries_over(L, "main:ci/pipes.md", deliveries, days=days)
    # sessions where helm's topic (its tag "deploy") came up: kubectl and rollout hunted there
    t = END - 5 * DAY
    L.blocked(t, "h1", "grep -rn deploy {root}")
    L.blocked(t + 10, "h1", "grep -rn kubectl {root}")
    L.blocked(t + 20, "h2", 'rg "rollout|kubectl" {root}')
    L.searched(t + 30, "h2", "how do I deploy with rollout status", ["ops/helm.md"])
    L.blocked(t + 40, "h3", "grep -rn unrelated {root}")  # a session without the topic: not counted
    L.blocked(t + 50, "h3", "grep -rn unrelated {root}")
    L.write()


def test_never_fired_crystals_are_widened_with_observed_terms_or_retired(tmp_path):
    settings, engine, root = make_env(tmp_path, _never_store())
    os.utime(root / "misc/fresh.md", (END - DAY, END - DAY))  # changed inside the window
    _never_ledger(settings, root)
    report = run_agent(settings, engine, "r", "gardener")
    assert report.status == OK, report.message
    assert report.examined["never_fired"] == 2
    nf = sorted((f.path, f.line) for f in report.findings if f.kind == "never-fired")
    assert nf == [("misc/old.md", 6), ("ops/helm.md", 7)]
    assert [s.path for s in report.skipped if s.target == "main:misc/fresh.md"] == ["misc/fresh.md"]
    props = {p["paths"][0]: p for p in report.proposals if p["paths"][0] in ("ops/helm.md", "misc/old.md")}
    assert props["ops/helm.md"]["kind"] == "edit" and props["misc/old.md"]["kind"] == "status"
    [(_p, before, after)] = after_bytes(engine, props["ops/helm.md"]["id"])
    b, _ = binding_of(after, "ops/helm.md")
    # deploy (3: two greps and a query word), kubectl (2), rollout (2); "unrelated" is from another session
    assert list(b.terms) == ["helm upgrade", "deploy", "kubectl", "rollout"]
    assert after.replace(b', deploy, kubectl, rollout"', b'"') == before
    [(_p, before, after)] = after_bytes(engine, props["misc/old.md"]["id"])
    assert parse_note(after.decode(), "misc/old.md").status == "deprecated"
    # apply both, undo both: byte-exact
    snap = snapshot(root)
    for p in props.values():
        assert apply.approve(settings, engine, p["id"], "tester")["ok"]
    assert parse_note((root / "misc/old.md").read_text(), "misc/old.md").status == "deprecated"
    nxt = run_agent(settings, engine, "r2", "gardener")  # changed inside the window now: not judged again
    assert [p for p in nxt.proposals if p["paths"][0] in props] == []
    for p in props.values():
        assert apply.undo(settings, engine, p["id"], "tester")["ok"]
    assert snapshot(root) == snap


@pytest.mark.parametrize(
    "days,deliveries,reason",
    [
        (35, 5, "the window holds 4 deliveries, fewer than the 20 needed"),  # the 5th is 35 days old
    ],
)
def test_never_fired_is_not_judged_on_too_little_ledger(tmp_path, days, deliveries, reason):
    settings, engine, root = make_env(tmp_path, _never_store())
    _never_ledger(settings, root, days=days, deliveries=deliveries)
    report = run_agent(settings, engine, "r", "gardener")
    assert report.status == OK
    assert not [f for f in report.findings if f.kind == "never-fired"]
    assert not [p for p in report.proposals if p["kind"] in ("status",) or p["paths"][0] == "ops/helm.md"]
    assert [s.reason for s in report.skipped if s.target == "never-fired"] == ["not judged: " + reason]


def test_a_ledger_younger_than_the_window_files_nothing(tmp_path):
    """10 days of ledger with enough deliveries and blocked lookups for every rule: the Gardener
    files nothing and says why (nothing-to-learn, never green)."""
    settings, engine, root = make_env(tmp_path, _never_store())
    _never_ledger(settings, root, days=10, deliveries=25)
    report = run_agent(settings, engine, "r", "gardener")
    assert report.status == NOTHING_TO_LEARN
    assert report.message.startswith("nothing to learn from yet: the ledger covers 10.0 days of ledger time")
    assert "less than the 30-day window ([gardener] window_days): nothing is filed from it" in report.message
    assert report.proposals == [] and report.examined["ledger_rows"] > 25


def test_a_fresh_ledger_of_seconds_files_no_salience_change(tmp_path):
    """The case from a real first night: deliveries from the last 50 seconds, every one of them
    unlocking work; no salience change is filed."""
    import time

    settings, engine, root = make_env(tmp_path, {"a.md": crystal("a", "alpha")})
    L = Ledger(settings, root)
    now = time.time()
    for i in range(5):
        L.delivered(now - 50 + i * 10, f"a{i}", "main:a.md")
    L.write()
    report = run_agent(settings, engine, "r", "gardener")
    assert report.status == NOTHING_TO_LEARN and report.proposals == []
    assert "the ledger covers 0.0 days" in report.message


def test_hand_calls_of_deliver_are_not_use(tmp_path):
    """Rows of ``geode deliver`` without --session (sessions ``manual:...``) are left out: they
    neither age the ledger nor count as deliveries."""
    from geode.delivery.control import MANUAL_SESSION_PREFIX

    settings, engine, root = make_env(tmp_path, {"a.md": crystal("a", "alpha")})
    L = Ledger(settings, root)
    L.delivered(END - 40 * DAY, f"{MANUAL_SESSION_PREFIX}1-2", "main:a.md")  # a person, 40 days ago
    for i in range(5):
        L.delivered(END - i * 10, f"{MANUAL_SESSION_PREFIX}{i}", "main:a.md")
        L.delivered(END - i * 10 - 1, f"s{i}", "main:a.md")
    L.write()
    report = run_agent(settings, engine, "r", "gardener")
    assert report.examined["ledger_rows"] == 5  # the agent's five; the six by hand left out
    assert report.status == NOTHING_TO_LEARN and report.proposals == []  # 40 s of agent ledger


def test_window_setting_from_geode_toml(tmp_path):
    settings, engine, root = make_env(tmp_path, _never_store(), toml="[gardener]\nwindow_days = 60\n")
    _never_ledger(settings, root)  # 35 days of ledger: less than a 60-day window
    report = run_agent(settings, engine, "r", "gardener")
    assert report.status == NOTHING_TO_LEARN and report.proposals == []
    assert "the ledger covers 35.0 days of ledger time" in report.message
    assert "less than the 60-day window" in report.message


# -- searched again and again, no binding: bind ---------------------------------------------------
def test_notes_found_by_search_again_and_again_are_bound_to_the_preceding_action(tmp_path):
    settings, engine, root = make_env(
        tmp_path,
        {
            "ci/pipes.md": crystal("pipes", '"| tail"'),
            "guides/release.md": "# Releasing\n\nSome words.\n",
            "guides/twice.md": "---\ntitle: Twice\n---\nBody.\n",
            "guides/bound.md": crystal("bound", "cargo"),
        },
    )
    L = Ledger(settings, root)
    t = END - 3 * DAY
    for i in range(3):
        s = f"s{i}"
        L.delivered(t + i * 1000, s, "main:ci/pipes.md", action="bash", term="npm publish")
        L.searched(
            t + i * 1000 + 30,
            s,
            "release steps",
            ["guides/release.md", "guides/twice.md" if i < 2 else "guides/bound.md", "guides/bound.md"],
        )
    L.searched(t + 5000, "", "release", ["guides/bound.md"])  # no session: counted, no context
    L.opened()
    L.write()
    report = run_agent(settings, engine, "r", "gardener")
    assert report.status == OK, report.message
    assert report.examined["searched_notes"] == 3
    # pipes unlocked work each time it was delivered: its salience rises too
    assert sorted((f.kind, f.path) for f in report.findings) == [
        ("searched-unbound", "guides/release.md"),
        ("unlocked-work", "ci/pipes.md"),
    ]
    [p] = [p for p in report.proposals if p["paths"] != ["ci/pipes.md"]]
    assert p["kind"] == "edit" and p["paths"] == ["guides/release.md"]
    [(_path, before, after)] = after_bytes(engine, p["id"])
    b, note = binding_of(after, "guides/release.md")
    assert b.on == ("bash",) and list(b.terms) == ["npm publish"] and b.deliver == ("act",)
    assert note.body == parse_note(before.decode(), "guides/release.md").body
    full = proposals.get(engine, p["id"])
    assert "no essence markers" in full["rationale"]
    assert len([e for e in full["evidence"] if "ledger_event" in e]) == 6  # 3 searches + the 3 rows before them
    snap = snapshot(root)
    assert apply.approve(settings, engine, p["id"], "tester")["ok"]
    assert run_agent(settings, engine, "r2", "gardener").proposals == []  # bound now
    assert apply.undo(settings, engine, p["id"], "tester")["ok"]
    assert snapshot(root) == snap


def test_record_search_appends_one_searched_row_with_the_hits(tmp_path):
    settings, engine, root = make_env(tmp_path, {"a.md": "# A\n"})
    record_search(
        settings,
        "how to deploy",
        [
            {"domain": "main", "path": "a.md", "address": "geode://main/a"},
            {"domain": "main", "path": "a.md"},
            {"domain": "docs", "path": "b.md"},
        ],
        session="sess-1",
    )
    rows = [r for r in _ledger_ids(engine) if r["kind"] == "searched"]
    assert len(rows) == 1
    import json

    assert json.loads(rows[0]["detail"]) == {"query": "how to deploy", "hits": ["main:a.md", "docs:b.md"]}
    assert rows[0]["session"] == "sess-1" and rows[0]["action"] == "search" and rows[0]["domain"] == ""


# -- salience ---------------------------------------------------------------------------------
def test_salience_rises_and_falls_within_bounds_and_counts_each_delivery_once(tmp_path):
    crlf = crystal("crlf", "deploy", extra="salience: 0.3\n").replace("\n", "\r\n").encode()
    settings, engine, root = make_env(
        tmp_path,
        {
            "a.md": crystal("a", "alpha"),  # no salience (0.5): unlocked -> 0.6
            "b.md": b"\xef\xbb\xbf" + crlf,  # 0.3, never unlocked -> 0.2 (BOM and CRLF kept)
            "c.md": crystal("c", "gamma", extra="salience: 1.0\n"),  # unlocked, at the top: no move
            "d.md": crystal("d", "delta", extra="salience: 0.05\n"),  # never unlocked: -> 0 (capped)
            "e.md": crystal("e", "eps", extra="salience: 0.5\n"),  # 1 of 3 unlocked: held
            "f.md": crystal("f", "phi"),  # 2 deliveries: too few to judge
        },
    )
    L = Ledger(settings, root)
    t = END - DAY
    for i in range(4):
        L.delivered(t + i * 100, f"a{i}", "main:a.md")
        L.delivered(t + i * 100, f"c{i}", "main:c.md")
    for i in range(3):
        for name in ("b", "d"):
            L.delivered(t + i * 100, f"{name}{i}", f"main:{name}.md")
            L.blocked(t + i * 100 + 5, f"{name}{i}", "grep -rn something {root}")
        L.delivered(t + i * 100, f"e{i}", "main:e.md")
        if i:
            L.blocked(t + i * 100 + 5, f"e{i}", "grep -rn other {root}")
    for i in range(2):
        L.delivered(t + i * 100, f"f{i}", "main:f.md")
    L.opened()
    L.write()
    report = run_agent(settings, engine, "r1", "gardener")
    assert report.status == OK, report.message
    assert (report.examined["salience_judged"], report.examined["salience_at_bound"]) == (4, 1)
    moves = {}
    for p in filed(engine, "r1"):
        if p["title"].startswith("Salience"):
            [(path, before, after)] = after_bytes(engine, p["id"])
            moves[path] = parse_note(after.decode("utf-8-sig"), path).frontmatter["salience"]
            if path == "b.md":
                assert after.startswith(b"\xef\xbb\xbf") and after.count(b"\r\n") == before.count(b"\r\n")
                assert after.replace(b"salience: 0.2", b"salience: 0.3") == before
    assert moves == {"a.md": 0.6, "b.md": 0.2, "d.md": 0}
    kinds = sorted((f.kind, f.path) for f in report.findings if f.kind != "blocked-lookups")
    assert kinds == [("never-unlocked", "b.md"), ("never-unlocked", "d.md"), ("unlocked-work", "a.md")]
    snap = snapshot(root)
    for p in report.proposals:
        assert apply.approve(settings, engine, p["id"], "tester")["ok"]
    assert snapshot(root) != snap  # the approvals changed the files the undo below must restore
    # the same deliveries are not counted again
    assert run_agent(settings, engine, "r2", "gardener").proposals == []
    # three new unlocking deliveries of a: one more step
    L.delivered(END, "a9", "main:a.md")
    L.delivered(END, "a10", "main:a.md")
    L.delivered(END, "a11", "main:a.md")
    L.write()
    r3 = run_agent(settings, engine, "r3", "gardener")
    [p] = r3.proposals
    [(_path, _before, after)] = after_bytes(engine, p["id"])
    assert parse_note(after.decode(), "a.md").frontmatter["salience"] == 0.7
    for p in reversed(report.proposals):
        assert apply.undo(settings, engine, p["id"], "tester")["ok"]
    for name in ("a.md", "b.md", "d.md"):
        assert hashlib.sha256((root / name).read_bytes()).hexdigest() == snap[name]


# -- the window and nothing to learn --------------------------------------------------------------
def test_no_ledger_file_at_all_is_nothing_to_learn_and_creates_none(geode_env):
    from geode.gardener.agent import Gardener

    settings = geode_env.files({"a.md": "# A\n"}).settings
    report = Gardener().examine(Context(settings, None, "adhoc"))
    assert report.status == NOTHING_TO_LEARN and report.examined["notes"] == 1
    assert not os.path.exists(settings.records_file)


def test_rows_outside_the_window_are_not_examined(tmp_path):
    settings, engine, root = make_env(tmp_path, {"a.md": "# A\n"})
    L = Ledger(settings, root)
    L.blocked(END - 40 * DAY, "old1", "grep -rn kubeconfig {root}")
    L.blocked(END - 39 * DAY, "old2", "grep -rn kubeconfig {root}")
    L.blocked(END, "new", "grep -rn kubeconfig {root}")
    L.write()
    report = run_agent(settings, engine, "r", "gardener")
    assert (report.examined["ledger_rows"], report.examined["window_rows"]) == (3, 1)
    assert report.examined["ledger_first_ts"] == int(END - 40 * DAY)
    assert report.proposals == []  # one blocked lookup in the window: below the group minimum of 2


def test_at_most_max_proposals_per_rule_per_run_the_rest_stay_findings(tmp_path):
    settings, engine, root = make_env(tmp_path, {"a.md": "# A\n"}, toml="[gardener]\nmax_proposals = 1\n")
    L = Ledger(settings, root)
    for i in range(2):
        L.blocked(END - i, f"s{i}", "grep -rn kubeconfig {root}")
        L.blocked(END - 10 - i, f"t{i}", "grep -rn vault {root}")
    L.opened()
    L.write()
    report = run_agent(settings, engine, "r", "gardener")
    assert len([f for f in report.findings if f.kind == "blocked-lookups"]) == 2
    assert len(report.proposals) == 1
    assert [s.reason for s in report.skipped if s.target == "stub"] == [
        "1 more stub proposal(s) not made this run: at most 1 per rule"
    ]
