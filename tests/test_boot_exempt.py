"""Issue 23, through the installed hook command: a boot channel that keeps its word (the starter
note fits, a cut note's pointer is let through and counted as a follow-up), guard messages that
name the escape of the tool that was used, and crystals exempt from the control arm, counted.

The rates here are forced high (``GEODE_WITHHOLD_RATE=0.5``) so that a crystal that is not
exempt is withheld in about half the sessions: an exemption that did nothing would fail."""

from __future__ import annotations

import json
import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.helpers import Geode

STARTER = Path(__file__).resolve().parents[1] / "geode" / "delivery" / "starter"


@pytest.fixture()
def g(tmp_path) -> Geode:
    g = Geode(tmp_path)
    g.init_db()
    return g


def _essence(path: Path) -> str:
    text = path.read_text(encoding="utf-8")
    return text.split("<!-- crystal:essence -->", 1)[1].split("<!-- /crystal:essence -->", 1)[0].strip()


def _deny_reason(res) -> str:
    assert res.rc == 0 and res.errors == "", res
    hso = res.json["hookSpecificOutput"]
    assert hso["permissionDecision"] == "deny", res
    return hso["permissionDecisionReason"]


# -- boot -------------------------------------------------------------------------------------


def test_every_starter_boot_note_fits_the_default_boot_budget():
    from geode.kernel.config import SCHEMA

    budget = SCHEMA["delivery"]["boot_chars"][1]
    boots = [p for p in STARTER.glob("*.md") if re.search(r"^\s+deliver:.*\bboot\b", p.read_text(), re.M)]
    assert boots, "the starter set has no boot note: nothing was examined"
    for p in boots:
        essence = _essence(p)
        # geode init puts the absolute command in place of `geode `: leave room for a long one
        # (150 characters: this test's own pytest paths give about 145)
        assert len(essence) - len("geode ") + 150 <= budget, (p.name, len(essence))


def test_the_installed_starter_boot_note_arrives_whole(g):
    """The starter note as ``geode init`` writes it (the absolute command in place of ``geode``),
    handed over at session start by the hook: not cut."""
    from geode.cli.setup_cmds import _point_at_this_install

    dest = g.store / "geode-memory-in-this-project.md"
    dest.write_text((STARTER / dest.name).read_text())
    _point_at_this_install(dest, g.settings())
    res = g.run("SessionStart", source="startup")
    ctx = res.context
    assert _essence(dest) in ctx and "[cut at" not in ctx, ctx
    [row] = g.rows("delivered")
    assert row["channel"] == "boot" and row["truncated"] == 0


def test_a_boot_note_cut_then_the_named_path_read_is_a_follow_up(g):
    long = "Deploys go through the release train. " * 20  # 780 characters: cut at 300
    note = g.crystal("boot-long.md", long.strip(), name="release-train", deliver="boot", on=None)
    ctx = g.run("SessionStart", source="startup").context
    m = re.search(r"full note: ([^\]]+)\]", ctx)
    assert m, ctx
    named = m.group(1)
    assert named == str(note)
    assert g.rows("delivered")[0]["truncated"] == 1

    res = g.tool("Read", {"file_path": named})
    assert res.rc == 0 and res.stdout == "" and res.errors == "", res  # let through
    [f] = g.rows("followed_up")
    assert f["action"] == "Read" and f["session"] == "s1" and f["domain"] == "main"
    assert g.rows("blocked") == [] and g.rows("lookup_marked") == []  # not a lookup

    # only that path, only that session
    g.crystal("other.md", "Other.", name="other", deliver="boot", on=None)
    assert "deny" in g.tool("Read", {"file_path": str(g.store / "other.md")}).stdout
    assert "deny" in g.tool("Read", {"file_path": named}, session="s2").stdout
    assert len(g.rows("followed_up")) == 1 and len(g.rows("blocked")) == 2


def test_a_follow_up_is_not_counted_as_a_lookup_by_study(g):
    from geode.evidence.study import compute_study
    from geode.records.models import engine_for

    g.crystal("boot-long.md", "x " * 400, name="long", deliver="boot", on=None)
    ctx = g.run("SessionStart", source="startup").context
    named = re.search(r"full note: ([^\]]+)\]", ctx).group(1)
    g.tool("Read", {"file_path": named})
    s = g.settings()
    d = compute_study(s, engine_for(s))
    assert d["arms"]["delivered"]["units"] == 1 and d["arms"]["delivered"]["lookups"] == 0


# -- the guard's message names the escape of the tool used ------------------------------------


def test_guard_message_for_a_shell_command_names_the_marker_at_the_end_of_the_command(g):
    g.crystal("x.md", "Pipes.", name="pipes", match='"| tail"')
    reason = _deny_reason(g.bash(f"grep -r foo {g.store}"))
    assert "`# geode:lookup` at the end of the shell command" in reason


@pytest.mark.parametrize(
    "tool,tool_input",
    [
        ("Read", {"file_path": "{store}/x.md"}),
        ("Grep", {"pattern": "pipes", "path": "{store}"}),
        ("Glob", {"pattern": "**/*.md", "path": "{store}"}),
    ],
)
def test_guard_message_for_a_file_tool_never_asks_it_to_add_a_marker(g, tool, tool_input):
    g.crystal("x.md", "Pipes.", name="pipes", match='"| tail"')
    inp = {k: v.format(store=g.store) for k, v in tool_input.items()}
    reason = _deny_reason(g.tool(tool, inp))
    assert "at the end of the shell command" not in reason, reason
    assert f"{tool} has no marker to add" in reason
    assert "in the shell with `# geode:lookup` at the end of the command" in reason
    if tool == "Read":
        assert 'names after "full note:" goes through' in reason
    else:
        assert "full note" not in reason


# -- exempt crystals ------------------------------------------------------------------------------


def _two(g: Geode) -> None:
    g.crystal(
        "force-push.md",
        "A force push rewrites the remote branch for everyone.",
        name="force-push",
        match='"git push --force"',
        extra="",
    )
    # the exempt one: the same crystal, with `control: never` inside its binding
    text = (g.store / "force-push.md").read_text().replace("name: force-push", "name: force-push-exempt")
    text = text.replace("crystal:\n", "crystal:\n  control: never\n")
    g.write("force-push-exempt.md", text)
    g.crystal("plain.md", "Another note on force pushes.", name="plain", match='"git push --force"')
    (g.store / "force-push.md").unlink()


@pytest.mark.parametrize("n", [pytest.param(1000, marks=pytest.mark.slow), 100])
def test_an_exempt_crystal_is_never_withheld_over_1000_sessions(tmp_path, n):
    """1,000 sessions (the load lane; 100 in the fast one), each one hook call through the
    installed command, the rate forced to 0.5 and the stop rule out of reach."""
    g = Geode(tmp_path)
    _two(g)
    # the plan is recorded when the ledger is created: with the stop rule out of reach
    g.config("[control]\nstop_units = 1000000\n")
    g.init_db(withhold="0.5")  # the plan is recorded with the high rate

    def one(i: int) -> str:
        res = g.bash("git push --force origin main", session=f"sess-{i}", withhold="0.5")
        assert res.rc == 0 and res.errors == "", res
        return res.stdout

    with ThreadPoolExecutor(max_workers=4) as pool:
        outs = list(pool.map(one, range(n)))
    # a hook that found the ledger locked past its budget wrote to the spool, which the next
    # hook or command drains: the last calls' lines can still be there (it failed a CI once,
    # 999 of 1,000). Drained as every command does, and nothing may stay behind.
    from geode.delivery import ledger

    settings = g.settings("0.5")
    ledger.drain_spool(settings)
    assert not list(Path(str(settings.spool_dir)).glob("events*")), "spooled events were left undrained"
    assert ledger.rejected_count(settings) == 0
    withheld = g.rows("withheld")
    delivered = g.rows("delivered")
    exempt_id, plain_id = "main:force-push-exempt.md", "main:plain.md"
    assert not [r for r in withheld if r["crystal_id"] == exempt_id]
    ex = [r for r in delivered if r["crystal_id"] == exempt_id]
    assert len({r["session"] for r in ex}) == n and all(r["detail"] == "control: never" for r in ex)
    assert all("A force push rewrites" in o for o in outs)
    # the arm was really on: the plain crystal was withheld in about half the sessions
    n_plain = len({r["session"] for r in withheld if r["crystal_id"] == plain_id})
    assert 0.4 * n <= n_plain <= 0.6 * n, n_plain
    assert all(r["detail"] != "control: never" for r in delivered if r["crystal_id"] == plain_id)


def test_study_shows_the_exempt_units_beside_the_two_arms(tmp_path):
    from geode.evidence.study import compute_study, render_study
    from geode.records.models import engine_for

    g = Geode(tmp_path)
    _two(g)
    # the plan is recorded when the ledger is created: with the stop rule out of reach
    g.config("[control]\nstop_units = 1000000\n")
    g.init_db(withhold="0.5")
    for i in range(40):
        assert g.bash("git push --force", session=f"s{i}", withhold="0.5").rc == 0
    g.bash(f"cat {g.store}/plain.md", session="s0", withhold="0.5")  # one blocked lookup in s0
    s = g.settings(withhold="0.5")
    d = compute_study(s, engine_for(s))
    arms = d["arms"]
    assert arms["exempt"]["units"] == 40 and d["exempt_crystals"] == 1
    assert arms["delivered"]["units"] + arms["withheld"]["units"] == 40  # the plain crystal's units only
    assert arms["exempt"]["lookups"] == 1 and arms["exempt"]["blocked"] == 1
    text = render_study(d)
    header = text.splitlines()[0].split()
    assert header == ["delivered", "withheld", "exempt"], text
    units_row = next(line for line in text.splitlines() if line.startswith("units (crystal x session)"))
    assert units_row.split()[-1] == "40", text
    assert "40 unit(s) of 1 crystal(s) marked `control: never`" in text


def test_geode_study_json_through_the_command_line_has_the_exempt_column(g, tmp_path):
    import subprocess
    import sys

    _two(g)
    g.init_db(withhold="0.5")
    g.bash("git push --force", session="only", withhold="0.5")
    env = g.env("0.5") | {"PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    r = subprocess.run(
        [sys.executable, "-m", "geode", "study", "--json"], capture_output=True, text=True, env=env, timeout=120
    )
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["arms"]["exempt"]["units"] == 1


def test_a_misspelt_control_value_is_an_error_and_exempts_nothing(g):
    from geode.delivery.binding import parse_binding

    b = parse_binding({"deliver": "act", "on": "bash", "match": "x y", "control": "nevr"}, {"crystal.control": 9})
    [issue] = [i for i in b.issues if i.code == "unknown-control"]
    assert issue.line == 9 and "did you mean 'never'?" in issue.message and not b.exempt
    assert parse_binding({"deliver": "boot", "control": "never"}, {}).exempt
