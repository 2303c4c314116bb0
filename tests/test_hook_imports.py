"""The hook is deliberately lean: on a delivering call it loads only the standard library (and
of geode, the ``kernel`` and ``delivery`` rooms), and none of the modules that cost it milliseconds.

The check runs the installer's exact command with ``-X importtime`` added after ``-S``, so the
module list is the real one of the real process. When a forbidden module shows up, a second run
through a small wrapper names the ``kernel`` or ``delivery`` module and line that imported it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import REPO, Geode

FORBIDDEN = ("sqlmodel", "sqlalchemy", "pydantic", "yaml", "re", "json", "typing", "dataclasses", "pathlib")
ALLOWED_TOP = set(sys.stdlib_module_names) | {"geode"}
#: Of geode itself, the hook may load the package root and the modules of two rooms: the kernel
#: and delivery (whichever of their modules it needs), nothing of any other room. The same tuple
#: tells the installer what to byte-compile.
from geode.delivery.hookmain import HOOK_ROOMS  # noqa: E402


def _ours_allowed(name: str) -> bool:
    return name == "geode" or any(name == f"geode.{r}" or name.startswith(f"geode.{r}.") for r in HOOK_ROOMS)


_WRAPPER = r"""
import sys
_seen = {}
class _Finder:
    @staticmethod
    def find_spec(name, path=None, target=None):
        if name not in _seen:
            f = sys._getframe(1)
            who = "?"
            while f is not None:
                mod = f.f_globals.get("__name__", "")
                if mod.startswith(("geode.delivery", "geode.kernel")):
                    who = "%s:%d" % (mod, f.f_lineno)
                    break
                f = f.f_back
            _seen[name] = who
        return None
sys.meta_path.insert(0, _Finder)
sys.path.insert(0, REPO)
import geode.delivery.hookmain as _hm
_hm.main(["claude"])
sys.stderr.write("\nIMPORTERS " + repr(_seen) + "\n")
"""


def _imported(stderr: str) -> list[str]:
    names = []
    for line in stderr.splitlines():
        if line.startswith("import time:") and line.count("|") == 2:
            name = line.rsplit("|", 1)[1].strip()
            if name and name != "imported package":
                names.append(name)
    return names


def _importers(g: Geode, payload: dict, withhold: str | None) -> dict:
    """Which kernel or delivery module (and line) caused each import, from a wrapper run."""
    env = g.env(withhold)
    proc = subprocess.run(
        [sys.executable, "-S", "-c", _WRAPPER.replace("REPO", repr(str(REPO)))],
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        env=env,
        cwd=g.cwd,
        timeout=30,
    )
    for line in proc.stderr.splitlines():
        if line.startswith("IMPORTERS "):
            import ast

            return ast.literal_eval(line[len("IMPORTERS ") :])
    return {}


def _check(g: Geode, payload: dict, withhold: str | None = "0", expect_output: bool = True) -> None:
    res = g.run_raw(json.dumps(payload), withhold=withhold, flags="-X importtime")
    assert res.rc == 0 and res.errors == "", res
    if expect_output:
        assert res.stdout, "the call did not deliver; the path under test was not taken"
    mods = _imported(res.stderr)
    assert "geode.delivery.hook" in mods, res.stderr[-2000:]  # the importtime output is there
    assert "site" not in mods  # -S
    bad_top = sorted({m for m in mods if m.split(".")[0] not in ALLOWED_TOP})
    bad_top += sorted({m for m in mods if m.split(".")[0] == "geode" and not _ours_allowed(m)})
    assert any(m.startswith("geode.kernel.") for m in mods), (
        "the hook loaded no kernel module: the check checks nothing"
    )
    forbidden = sorted({m for m in mods if m.split(".")[0] in FORBIDDEN})
    if bad_top or forbidden:
        who = _importers(g, payload, withhold)
        culprits = {m: who.get(m, "?") for m in bad_top + forbidden}
        pytest.fail(f"the hook loaded {bad_top + forbidden}; imported from (kernel/delivery module:line): {culprits}")


def _bash_event(session: str = "s1") -> dict:
    return {
        "session_id": session,
        "transcript_path": "/tmp/t.jsonl",
        "cwd": "/tmp",
        "hook_event_name": "PreToolUse",
        "tool_name": "Bash",
        "tool_input": {"command": "npm run build | tail -20"},
        "tool_use_id": "t1",
    }


def _store(g: Geode) -> None:
    for i in range(5):
        g.crystal(f"c{i}.md", f"Pipe essence {i}.", name=f"pipe-{i}", match="| tail, |tail")
    g.crystal("boot.md", "Boot essence.", deliver="boot", on=None)


def test_delivering_pretooluse_loads_only_the_lean_stdlib(tmp_path):
    g = Geode(tmp_path)
    _store(g)
    g.init_db()
    _check(g, _bash_event())  # first call: builds the index
    _check(g, _bash_event())  # steady state


def test_delivering_pretooluse_with_the_control_arm_on(tmp_path):
    g = Geode(tmp_path, config='[control]\nsalt = "fixed-salt-for-the-test"\nwithhold_rate = 0.1\n')
    _store(g)
    g.init_db(withhold=None)
    # the first call after geode.toml changed may parse it (tomllib); the calls after must not
    g.run_raw(json.dumps(_bash_event("warm-up")), withhold=None)
    _check(g, _bash_event(), withhold=None)
    _check(g, _bash_event("s2"), withhold=None)


def test_settings_cache_is_hit_after_the_first_call(tmp_path):
    """``geode.toml`` is parsed once per change; later calls read the JSON copy keyed by its identity."""
    from geode.kernel.config import read_config_file

    g = Geode(tmp_path, config="[delivery]\nbudget = 3000\n")
    assert read_config_file(str(g.home)) == {"delivery": {"budget": 3000}}
    cache = json.loads((g.home / "index" / "settings-cache.json").read_text())
    assert isinstance(cache, dict) and set(cache) == {"key", "data"}, cache
    assert cache["data"] == {"delivery": {"budget": 3000}}
    g.run_raw(json.dumps(_bash_event()))
    res = g.run_raw(json.dumps(_bash_event()), flags="-X importtime")
    assert "tomllib" not in _imported(res.stderr), "every hook call re-parses geode.toml: the cache never hits"


FULL_TOML = """[store]
default = "main"
[domains]
main = "store"
[delivery]
budget = 3000
[control]
withhold_rate = 0.1
salt = "fixed-salt-for-the-test"
[database]
url = ""
[recall]
budget_ms = 200
tag_aliases.main = { k8s = "kubernetes" }
[cleaner]
cap = 10
[cleaner.caps]
"guides" = 3
[gardener]
window_days = 14
[upkeep]
at = "02:00"
"""


def test_every_table_of_geode_toml_is_checked_once_then_costs_the_hook_nothing(tmp_path):
    """The first call after geode.toml changed parses and checks it; the calls after read the
    checked copy and load neither tomllib nor the checker."""
    g = Geode(tmp_path, config=FULL_TOML)
    _store(g)
    g.init_db(withhold=None)  # this process read (and cached) geode.toml: change it, for the hook to read
    g.config(FULL_TOML + "# edited\n")
    first = g.run_raw(json.dumps(_bash_event("warm-up")), withhold=None, flags="-X importtime")
    assert first.rc == 0 and first.errors == "", first
    assert {"tomllib", "geode.kernel.config_check"} <= set(_imported(first.stderr))  # it was checked
    _check(g, _bash_event(), withhold=None)
    res = g.run_raw(json.dumps(_bash_event("s3")), withhold=None, flags="-X importtime")
    mods = set(_imported(res.stderr))
    assert "geode.delivery.hook" in mods and not mods & {"tomllib", "geode.kernel.config_check", "difflib"}


def test_delivering_pretooluse_before_the_ledger_exists(tmp_path):
    """No geode.db yet (the hook runs before any CLI command created it): events go to the spool."""
    g = Geode(tmp_path)
    _store(g)
    _check(g, _bash_event())
    assert (g.home / "spool" / "events.jsonl").stat().st_size > 0


def test_session_start_loads_only_the_lean_stdlib(tmp_path):
    g = Geode(tmp_path)
    _store(g)
    g.init_db()
    _check(g, {"session_id": "s1", "cwd": "/tmp", "hook_event_name": "SessionStart", "source": "startup"})


def test_blocked_lookup_loads_only_the_lean_stdlib(tmp_path):
    g = Geode(tmp_path)
    _store(g)
    g.init_db()
    payload = _bash_event()
    payload["tool_input"] = {"command": f"grep -r pipe {g.store}"}
    _check(g, payload)


def test_the_installer_byte_compiles_every_room_the_hook_loads(tmp_path):
    """Agent shells often set PYTHONDONTWRITEBYTECODE, so a module the installer did not compile
    is compiled again on every tool call (the kernel alone cost the hook about 15 ms when only
    delivery/ was compiled). Run the installer's compile step over a copy of the package with no
    byte code and check that every module of every room the hook loads has its .pyc."""
    import importlib.util
    import shutil

    pkg = tmp_path / "geode"
    shutil.copytree(REPO / "geode", pkg, ignore=shutil.ignore_patterns("__pycache__"))
    code = "import sys; sys.path.insert(0, sys.argv[1]); from geode.cli.setup_cmds import _precompile; _precompile()"
    env = {"PATH": "/usr/bin:/bin", "PYTHONDONTWRITEBYTECODE": "1"}
    subprocess.run([sys.executable, "-c", code, str(tmp_path)], check=True, env=env, cwd=tmp_path)
    sources = [p for room in HOOK_ROOMS for p in (pkg / room).rglob("*.py")]
    assert len(sources) >= 25, f"examined only {len(sources)} modules of {HOOK_ROOMS}"
    missing = [
        str(p.relative_to(tmp_path)) for p in sources if not Path(importlib.util.cache_from_source(str(p))).exists()
    ]
    assert not missing, missing


def test_team_rules_path_stays_standard_library(tmp_path):
    """A team-rules domain on the hook: the first call derives the notes from the team's files
    (the kernel's reader, ``team_sync``), the Edit delivers the rule a glob attaches; every
    module loaded on the way is the standard library's or the hook rooms'."""
    import shutil

    repo = tmp_path / "acme"
    shutil.copytree(Path(REPO) / "tests" / "fixtures" / "team_repo", repo)
    g = Geode(tmp_path, config=f'[domains]\nmain = "store"\n\n[team_rules]\nacme = "{repo}"\n')
    g.crystal("deploy.md", "Deploys go out from main only.", match="deploy")
    g.init_db()
    g.cwd = repo
    edit = {
        "session_id": "s1",
        "transcript_path": "/tmp/t.jsonl",
        "cwd": str(repo),
        "hook_event_name": "PreToolUse",
        "tool_name": "Edit",
        "tool_input": {"file_path": str(repo / "src/cart.ts"), "old_string": "a", "new_string": "b"},
    }
    _check(g, edit)  # the cold call: the index built, the team notes derived
    _check(g, {**edit, "session_id": "s2"})  # a warm call
