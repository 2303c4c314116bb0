"""Settings are read once, checked against one schema, with one precedence.

- precedence: flags, then the environment, then ``geode.toml``, then the defaults, for every
  setting the environment can set (the list comes from ``config.SCHEMA``, so a new variable is
  covered the day it is declared) and for ``--home`` and ``--store``;
- an unknown table or key, or a wrong type, anywhere in ``geode.toml`` is a ``ConfigError`` naming
  the file, the line and the key; the line finder is checked against ``tomllib`` itself and the
  checker against pydantic, on generated documents;
- a typo in ``[cleaner]`` fails ``geode upkeep`` (the real CLI, in a subprocess) and the worker's task;
- ``geode hooks install --home X`` uses X even when ``GEODE_HOME`` says otherwise;
- the hook works with a valid ``geode.toml`` and fails open on an invalid one (exit 0, silence,
  the error in ``hook-errors.log``), and a fixed file works on the next call.
"""

from __future__ import annotations

import datetime
import itertools
import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from geode.kernel import config
from geode.kernel.config import BOOL, DATE, FLOAT, INT, SCHEMA, STR, STRS, ConfigError, load_settings
from geode.kernel.config_check import key_lines, locate, problems_in, table_mismatches
from tests.helpers import REPO, Geode

#: a flat attribute of Settings for ``(table, key)`` (the others are ``settings.<table>.<key>``)
FLAT = {tk: name for name, tk in config._FLAT.items()}


def value_of(s, table: str, key: str):
    if (table, key) in FLAT:
        return getattr(s, FLAT[(table, key)])
    return getattr(getattr(s, table), key)


def toml_value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return json.dumps(v)
    return repr(v)


def write(home: Path, text: str) -> Path:
    home.mkdir(parents=True, exist_ok=True)
    p = home / "geode.toml"
    p.write_text(text, encoding="utf-8")
    return p


def geode_cli(*args: str, env: dict, cwd: Path | None = None) -> subprocess.CompletedProcess:
    e = {k: v for k, v in os.environ.items() if not k.startswith("GEODE_")}
    e["PYTHONPATH"] = str(REPO)
    e.update(env)
    return subprocess.run(
        [sys.executable, "-m", "geode", *args], capture_output=True, text=True, env=e, timeout=180, cwd=cwd
    )


# -- precedence ---------------------------------------------------------------------------------
#: (text in the environment, the value it means, a different value for the file), per kind
SAMPLES = {
    INT: ("111", 111, 222),
    FLOAT: ("0.25", 0.25, 0.5),
    STR: ("from-env", "from-env", "from-file"),
    BOOL: ("off", False, True),  # the default is True: the environment's False must win over it
}
ENV_SETTINGS = sorted(config.env_vars().items())


def test_the_environment_can_set_what_the_brief_names():
    assert {
        "GEODE_DATABASE_URL",
        "GEODE_BROKER_URL",
        "GEODE_WITHHOLD_RATE",
        "GEODE_RECALL_BUDGET_MS",
        "GEODE_EMBED_MODEL",
        "GEODE_CHROMA_URL",
        "GEODE_QUEUE",
        "GEODE_UPKEEP_AT",
        "GEODE_VISIBILITY_TIMEOUT",
    } <= set(config.env_vars())


def test_the_readme_names_every_environment_variable():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert [v for v in config.env_vars() if f"`{v}`" not in readme] == []


@pytest.mark.parametrize("var,where", ENV_SETTINGS, ids=[v for v, _ in ENV_SETTINGS])
@pytest.mark.parametrize(
    "in_env,in_file", list(itertools.product([False, True], repeat=2)), ids=lambda b: "set" if b else "unset"
)
def test_environment_then_file_then_default(tmp_path, var, where, in_env, in_file):
    table, key = where
    kind, default, _ = SCHEMA[table][key]
    env_text, env_value, file_value = SAMPLES[kind]
    home = tmp_path / "home"
    write(home, f"[{table}]\n{key} = {toml_value(file_value)}\n" if in_file else "")
    env = {"GEODE_HOME": str(home)}
    if in_env:
        env[var] = env_text
    expected = env_value if in_env else file_value if in_file else default
    s = load_settings(env=env)
    assert value_of(s, table, key) == expected
    # a flag beats both: --home names another home, whose file says nothing
    other = tmp_path / "other"
    other.mkdir()
    flagged = load_settings(home=other, env=env)
    assert value_of(flagged, table, key) == (env_value if in_env else default)


def test_an_empty_environment_variable_counts_as_unset(tmp_path):
    home = tmp_path / "home"
    write(home, '[database]\nurl = "sqlite:////tmp/from-file.db"\n[upkeep]\nbroker_url = "redis://file/0"\n')
    s = load_settings(env={"GEODE_HOME": str(home), "GEODE_DATABASE_URL": "", "GEODE_BROKER_URL": ""})
    assert s.database_url == "sqlite:////tmp/from-file.db" and s.upkeep.broker_url == "redis://file/0"


@pytest.mark.parametrize(
    "flag,env,file", list(itertools.product([False, True], repeat=3)), ids=lambda b: "set" if b else "unset"
)
def test_store_flag_then_environment_then_domains_then_default(tmp_path, flag, env, file):
    home = tmp_path / "home"
    dirs = {n: tmp_path / n for n in ("flag-store", "env-store", "file-store")}
    for d in dirs.values():
        d.mkdir()
    write(home, f"[domains]\nteam = {json.dumps(str(dirs['file-store']))}\n" if file else "")
    e = {"GEODE_HOME": str(home)}
    if env:
        e["GEODE_STORE"] = str(dirs["env-store"])
    s = load_settings(store=dirs["flag-store"] if flag else None, env=e)
    expected = (
        dirs["flag-store"] if flag else dirs["env-store"] if env else dirs["file-store"] if file else home / "store"
    )
    assert s.domains[s.default_domain] == os.path.realpath(expected)
    assert s.one_off_store is (flag or env)


@pytest.mark.parametrize(
    "flag,env", list(itertools.product([False, True], repeat=2)), ids=lambda b: "set" if b else "unset"
)
def test_home_flag_then_environment_then_default(tmp_path, monkeypatch, flag, env):
    monkeypatch.setenv("HOME", str(tmp_path / "user"))  # the default, ~/.geode, lands in tmp
    e = {"GEODE_HOME": str(tmp_path / "env-home")} if env else {}
    s = load_settings(home=tmp_path / "flag-home" if flag else None, env=e)
    expected = tmp_path / "flag-home" if flag else tmp_path / "env-home" if env else tmp_path / "user" / ".geode"
    assert s.home == str(expected)


def test_the_consumers_see_the_resolved_values(tmp_path):
    """Each module that used to read geode.toml itself now takes the same resolved value."""
    from geode.agents.celery_app import broker_settings, make_app
    from geode.recall.embed import model_spec
    from geode.recall.vectors import chroma_url
    from geode.scheduler.nightly import schedule_config

    home = tmp_path / "home"
    write(
        home,
        '[upkeep]\nbroker_url = "redis://from-file:6379/0"\nat = "04:30"\nqueue = "q-file"\n'
        '[recall]\nmodel = "minilm"\nchroma_url = "http://file:8000"\n',
    )
    env = {
        "GEODE_HOME": str(home),
        "GEODE_BROKER_URL": "redis://from-env:6379/0",
        "GEODE_UPKEEP_AT": "05:15",
        "GEODE_CHROMA_URL": "http://env:8000",
    }
    s = load_settings(env=env)
    assert broker_settings(s)["broker_url"] == "redis://from-env:6379/0"
    assert broker_settings(s)["queue"] == "q-file"
    app = make_app(settings=s)
    assert app.conf.broker_url == "redis://from-env:6379/0" and not app.conf.task_always_eager
    assert schedule_config(s)["hour"] == 5 and schedule_config(s)["minute"] == 15
    assert model_spec(s) == "minilm"
    assert chroma_url(s) == "http://env:8000"


def test_cli_environment_database_url_beats_the_file(tmp_path):
    """The bug this fixes: ``[database] url`` in the file used to beat ``GEODE_DATABASE_URL``."""
    home = tmp_path / "home"
    write(home, '[database]\nurl = "postgresql://nobody@127.0.0.1:1/nothing"\n')
    store = tmp_path / "store"
    store.mkdir()
    db = tmp_path / "from-env.db"
    r = geode_cli(
        "upkeep",
        "--list",
        "--json",
        "--store",
        str(store),
        env={"GEODE_HOME": str(home), "GEODE_DATABASE_URL": f"sqlite:///{db}"},
    )
    assert r.returncode == 0, r.stderr
    assert db.exists() and json.loads(r.stdout) == {"reports": [], "nights": []}


def test_cli_home_flag_beats_the_environment(tmp_path):
    """``--home X`` reads X's geode.toml; the broken one of ``GEODE_HOME`` is never read."""
    broken = tmp_path / "env-home"
    write(broken, "[delivery]\nbudgett = 3000\n")
    good = tmp_path / "flag-home"
    write(good, "[delivery]\nbudget = 3000\n")
    store = tmp_path / "store"
    store.mkdir()
    (store / "n.md").write_text("---\nname: n\n---\nA note.\n")
    r = geode_cli("lint", "--home", str(good), "--store", str(store), "--json", env={"GEODE_HOME": str(broken)})
    assert r.returncode == 0, r.stderr
    r = geode_cli("lint", "--store", str(store), "--json", env={"GEODE_HOME": str(broken)})
    assert r.returncode == 1
    assert f"{broken / 'geode.toml'}:2: [delivery] budgett: unknown key (did you mean budget?)" in r.stderr


# -- unknown keys and wrong types, in every table ------------------------------------------------
PREAMBLE = '# geode configuration\n\n[store]\ndefault = "main"\n\n[domains]\nmain = "store"\n\n'  # 8 lines


def preamble(table: str) -> str:
    """Some lines of a real file before ``[table]`` (without ``[table]`` itself)."""
    return PREAMBLE.replace('[store]\ndefault = "main"\n', "") if table == "store" else PREAMBLE


TABLES = [t for t, spec in SCHEMA.items() if isinstance(spec, dict)]
KEYS = [(t, k) for t in TABLES for k in SCHEMA[t]]
#: a value of the wrong kind, per kind
WRONG = {
    INT: ('"12"', '"12" (a string)'),
    FLOAT: ('"0.5"', '"0.5" (a string)'),
    STR: ("12", "12 (an integer)"),
    BOOL: ('"yes"', '"yes" (a string)'),
    DATE: ("12", "12 (an integer)"),
    STRS: ("[1, 2]", "an array"),
}


def error_of(home: Path) -> str:
    with pytest.raises(ConfigError) as exc:
        load_settings(env={"GEODE_HOME": str(home)})
    return str(exc.value)


@pytest.mark.parametrize("table", TABLES)
def test_an_unknown_key_names_file_line_and_key(tmp_path, table):
    key = next(iter(SCHEMA[table]))
    typo = key[:-1] + ("x" if key[-1] != "x" else "y")
    text = preamble(table)
    header = len(text.splitlines()) + 1
    path = write(tmp_path / "home", f"{text}[{table}]\n# a comment\n{typo} = 1\n")
    msg = error_of(tmp_path / "home")
    assert msg.startswith(f"{path}:{header + 2}: [{table}] {typo}: unknown key (did you mean {key}?)"), msg


@pytest.mark.parametrize("table,key", KEYS, ids=[f"{t}.{k}" for t, k in KEYS])
def test_a_wrong_type_names_file_line_and_key(tmp_path, table, key):
    kind = SCHEMA[table][key][0]
    if isinstance(kind, tuple):  # a table of the user's names: the table itself given as a number
        bad, shown, expected = "7", "7 (an integer)", "a table"
    else:
        (bad, shown), expected = WRONG[kind], None
    text = preamble(table)
    line = len(text.splitlines()) + 3
    path = write(tmp_path / "home", f"{text}[{table}]  # the table\n\n{key} = {bad}   # wrong\n")
    msg = error_of(tmp_path / "home")
    assert msg.startswith(f"{path}:{line}: [{table}] {key}: expected "), msg
    assert msg.endswith(f"got {shown}"), msg
    if expected:
        assert f"expected {expected}," in msg


@pytest.mark.parametrize(
    "text,line,message",
    [
        ('[cleaner.caps]\n"guides/old" = 3\n"notes" = "x"\n', 3, '[cleaner.caps] notes: expected an integer, got "x"'),
        ('[cleaner]\ncap = 5\ncaps = { "a/b" = 2, c = true }\n', 3, "[cleaner.caps] c: expected an integer, got true"),
        ("cleaner.cpa = 1\n", 1, "[cleaner] cpa: unknown key (did you mean cap?)"),
        (
            '[recall.tag_aliases.main]\nk8s = "kubernetes"\nci = 1\n',
            3,
            "[recall.tag_aliases.main] ci: expected a string",
        ),
        ("[recall]\ntag_aliases.main.ci = 1\n", 2, "[recall.tag_aliases.main] ci: expected a string"),
        ('[upkeep.agents]\nx = "m:C"\ny = 2\n', 3, "[upkeep.agents] y: expected a string"),
        ('[domains]\nmain = "store"\nteam = 4\n', 3, "[domains] team: expected a string"),
        ("[cleanr]\ncap = 4\n", 1, "[cleanr]: unknown table (did you mean [cleaner]?)"),
        ("budget = 4000\n", 1, "budget: a key outside any table (budget is a key of [delivery])"),
        (
            "[delivery]\nwithhold_rate = 0.2\n",
            2,
            "[delivery] withhold_rate: unknown key (withhold_rate is a key of [control])",
        ),
        ("[[cleaner]]\ncap = 4\n", 1, "[cleaner]: expected a table, got an array"),
        ("[control]\nstop_date = 2027-02-27T10:00:00\n", 2, "[control] stop_date: expected a date"),
        ('[x]\n[gardener]\n"window days" = 3\n', 1, "[x]: unknown table"),
    ],
)
def test_nested_tables_dotted_keys_and_misplaced_keys(tmp_path, text, line, message):
    path = write(tmp_path / "home", text)
    msg = error_of(tmp_path / "home")
    assert f"{path}:{line}: {message}" in msg, msg


def test_every_problem_is_reported_each_on_its_line(tmp_path):
    path = write(tmp_path / "home", '[cleaner]\ncpa = 1\n[gardener]\nwindow_days = "30"\n[delivery]\nbudget = 3000\n')
    assert error_of(tmp_path / "home").splitlines() == [
        f"{path}:2: [cleaner] cpa: unknown key (did you mean cap?)",
        f'{path}:4: [gardener] window_days: expected an integer, got "30" (a string)',
    ]


def test_value_checks_name_the_line_too(tmp_path):
    path = write(tmp_path / "home", '[store]\ndefault = "nope"\n')
    assert error_of(tmp_path / "home").startswith(f"{path}:2: [store] default = 'nope' names no domain")


def test_the_default_domain_is_not_a_team_rules_domain(tmp_path):
    """Writes without a domain go to ``[store] default``; a team-rules domain is derived from a
    repository and refuses every write, so naming it is a settings error, said on its line."""
    repo = tmp_path / "repo"
    repo.mkdir()
    path = write(tmp_path / "home", f'[store]\ndefault = "team"\n[team_rules]\nteam = "{repo}"\n')
    msg = error_of(tmp_path / "home")
    assert msg.startswith(f"{path}:2: [store] default = 'team' is a team-rules domain"), msg
    write(tmp_path / "home", f'[team_rules]\nteam = "{repo}"\n')
    assert load_settings(home=tmp_path / "home").default_domain == "main"
    path = write(tmp_path / "home", '[delivery]\nact_mode = "loud"\nbudget = 100\n')
    assert error_of(tmp_path / "home").startswith(f"{path}:3: [delivery] budget = 100 is too small")
    path = write(tmp_path / "home", "[control]\n\nwithhold_rate = 1.5\n")
    assert error_of(tmp_path / "home").startswith(f"{path}:3: [control] withhold_rate = 1.5: ")


def test_a_syntax_error_names_the_line(tmp_path):
    path = write(tmp_path / "home", "[delivery]\nbudget = 3000\nact_mode = \n")
    assert error_of(tmp_path / "home").startswith(f"{path}:3: ")


@pytest.mark.parametrize(
    "var,text", [("GEODE_VISIBILITY_TIMEOUT", "2h"), ("GEODE_WITHHOLD_RATE", "ten"), ("GEODE_RECALL_BUDGET_MS", "0.5")]
)
def test_a_bad_environment_value_names_the_variable(tmp_path, var, text):
    with pytest.raises(ConfigError, match=f"{var}='{text}' is not a"):
        load_settings(env={"GEODE_HOME": str(tmp_path), var: text})


def test_a_valid_file_with_every_table_loads(tmp_path):
    home = tmp_path / "home"
    write(
        home,
        PREAMBLE
        + """
[delivery]
budget = 3000
agents = "Explore"
[control]
withhold_rate = 0
stop_date = 2027-02-27
[database]
url = ""
[recall]
salience_weight = 1
tag_aliases.main = { k8s = "kubernetes" }
[cleaner]
cap = 10
[cleaner.caps]
"guides/old" = 3
[gardener]
salience_step = 0.2
stub_folder = "inbox"
[upkeep]
agents = { extra = "tests.upkeep_agents:HandPicked" }
misfire_grace_hours = 2
""",
    )
    s = load_settings(env={"GEODE_HOME": str(home)})
    assert s.budget == 3000 and s.known_agents == ("Explore",) and s.withhold_rate == 0.0
    assert s.stop_date == "2027-02-27" and s.database_url is None
    assert s.recall.salience_weight == 1.0 and isinstance(s.recall.salience_weight, float)
    assert s.recall.tag_aliases == {"main": {"k8s": "kubernetes"}}
    assert s.cleaner.as_dict() == {
        "cap": 10,
        "caps": {"guides/old": 3},
        "archive_dir": "archive",
        "max_archives": 1000,
        "archive_evidence_days": 30,
    }
    assert s.gardener.salience_step == 0.2 and s.gardener.window_days == 30
    assert s.upkeep.agents == {"extra": "tests.upkeep_agents:HandPicked"} and s.upkeep.misfire_grace_hours == 2.0
    # the second load is served by the cache, and it says the same
    assert (home / "index" / "settings-cache.json").exists()
    again = load_settings(env={"GEODE_HOME": str(home)})
    assert again.as_dict() == s.as_dict()


def test_a_cache_written_by_other_code_is_not_trusted(tmp_path):
    """A cache from before the check (or another schema) must not let a typo through."""
    home = tmp_path / "home"
    path = write(home, "[cleaner]\ncpa = 3\n")
    st_ = os.stat(path)
    (home / "index").mkdir()
    (home / "index" / "settings-cache.json").write_text(
        json.dumps({"key": f"{st_.st_ino}:{st_.st_size}:{st_.st_mtime_ns}", "data": {"cleaner": {"cpa": 3}}})
    )
    assert "[cleaner] cpa: unknown key" in error_of(home)


def test_the_checker_knows_the_kinds_the_schema_uses():
    from geode.kernel import config_check

    assert (
        config_check.INT,
        config_check.FLOAT,
        config_check.STR,
        config_check.BOOL,
        config_check.DATE,
        config_check.STRS,
    ) == (INT, FLOAT, STR, BOOL, DATE, STRS)


def test_settings_built_in_code_carry_every_table_with_its_defaults():
    s = config.Settings(home="/h", domains={"main": "/h/store"}, default_domain="main")
    for table in config.SECTIONS:
        assert getattr(s, table).as_dict() == {k: spec[1] for k, spec in SCHEMA[table].items()}
    assert s.cleaner is not config.Settings(home="/h", domains={}, default_domain="main").cleaner


def test_each_table_of_settings_has_one_typed_field_per_schema_key():
    """SCHEMA stays the one declaration: every key of a table handed out whole is a field of its
    class, in SCHEMA's order, annotated with the type its kind means."""
    assert set(config.TABLES) == set(config.SECTIONS)
    for name in config.SECTIONS:
        cls = config.TABLES[name]
        assert cls.TABLE == name
        assert table_mismatches(cls, SCHEMA[name]) == [], name
        # and Settings names that class for the attribute
        assert config.Settings.__annotations__[name] == cls.__name__


def test_the_table_check_fails_a_missing_key_and_a_wrong_type():
    """The check above could fail: a key without a field, and a field of another type, are named."""

    class Skewed(config.Table):
        TABLE = "cleaner"
        __slots__ = ("cap", "caps", "archive_dir", "max_archives")  # archive_evidence_days is missing
        cap: str  # SCHEMA: an integer
        caps: dict[str, int]
        archive_dir: str
        max_archives: int

    got = table_mismatches(Skewed, SCHEMA["cleaner"])
    assert got == [
        "[cleaner] archive_evidence_days: in SCHEMA, no field of Skewed",
        "[cleaner] cap: Skewed says 'str', SCHEMA's kind means 'int'",
    ]
    # a key that SCHEMA gains without a field in its class fails too
    spec = dict(SCHEMA["web"], theme=(STR, "light", None))
    assert table_mismatches(config.WebSettings, spec) == ["[web] theme: in SCHEMA, no field of WebSettings"]
    assert table_mismatches(config.WebSettings, SCHEMA["web"]) == []


def test_a_table_is_read_only_and_replace_gives_a_changed_copy():
    s = config.Settings(home="/h", domains={"main": "/h/store"}, default_domain="main")
    with pytest.raises(AttributeError, match="read-only"):
        s.recall.budget_ms = 1  # type: ignore[misc]
    with pytest.raises(TypeError, match=r"\[recall\] has no key budgetms"):
        config.RecallSettings(budgetms=1)
    changed = s.recall.replace(hop_anchors=3)
    assert changed.hop_anchors == 3 and s.recall.hop_anchors == 1
    assert changed != s.recall and changed.replace(hop_anchors=1) == s.recall
    assert s.replace(recall=changed).recall.hop_anchors == 3


def test_no_module_but_config_reads_geode_toml():
    offenders = []
    #: TOML that is not geode.toml: the installer edits Codex's config.toml ([mcp_servers.geode])
    other_toml = {"geode/install/codex_toml.py", "geode/kernel/header_format.py"}  # and Hugo's +++ front matter
    for path in (REPO / "geode").rglob("*.py"):
        if path.name in ("config.py", "config_check.py"):
            continue
        if str(path.relative_to(REPO)) in other_toml:
            assert "read_config_file" not in path.read_text(encoding="utf-8")
            continue
        text = path.read_text(encoding="utf-8")
        if "read_config_file" in text or "tomllib" in text:
            offenders.append(str(path.relative_to(REPO)))
    assert offenders == []


# -- a typo in [cleaner] fails the upkeep run ----------------------------------------------------
@pytest.mark.slow
def test_a_typo_in_cleaner_fails_geode_upkeep_with_file_line_and_key(tmp_path):
    home = tmp_path / "home"
    path = write(home, "[cleaner]\ncap = 10\ncpa = 20\n")
    store = tmp_path / "store"
    store.mkdir()
    (store / "a.md").write_text("---\nname: a\n---\nA note.\n")
    r = geode_cli("upkeep", "--store", str(store), "--agent", "cleaner", env={"GEODE_HOME": str(home)})
    assert r.returncode == 1, r.stdout
    assert f"geode: {path}:3: [cleaner] cpa: unknown key (did you mean cap?)" in r.stderr
    assert "upkeep run" not in r.stdout  # nothing ran on defaults
    path.write_text("[cleaner]\ncap = 10\n")
    assert (
        geode_cli("init", str(store), env={"GEODE_HOME": str(home)}).returncode == 0
    )  # the recall index doctor checks
    r = geode_cli("upkeep", "--store", str(store), "--agent", "cleaner", env={"GEODE_HOME": str(home)})
    assert r.returncode == 0, r.stdout + r.stderr
    assert "cap 10 per folder" in r.stdout


def test_a_typo_in_cleaner_fails_the_workers_task(tmp_path):
    from geode.agents.celery_app import run_task

    home = tmp_path / "home"
    write(home, "[cleaner]\ncpa = 20\n")
    with pytest.raises(ConfigError, match=r"geode.toml:2: \[cleaner\] cpa: unknown key"):
        run_task("run-1", "cleaner", home=str(home), store=str(tmp_path))


# -- geode hooks install --home ------------------------------------------------------------------
@pytest.mark.slow
def test_hooks_install_home_flag_beats_geode_home(tmp_path):
    flag_home, env_home, project = tmp_path / "flag-home", tmp_path / "env-home", tmp_path / "project"
    project.mkdir()
    env = {"GEODE_HOME": str(env_home)}
    assert geode_cli("init", "--home", str(flag_home), env=env).returncode == 0
    r = geode_cli("hooks", "install", "--home", str(flag_home), "--project", str(project), "--print", "--json", env=env)
    assert r.returncode == 0, r.stderr
    cmd = json.loads(r.stdout)[0]["events"]["PreToolUse"]["command"]
    assert cmd.startswith(f"GEODE_HOME={flag_home.resolve()} ") and str(env_home) not in cmd
    user = ("--home-dir", str(tmp_path / "user"))  # the local MCP scope writes ~/.claude.json: never the real one
    r = geode_cli("hooks", "install", "--home", str(flag_home), "--project", str(project), *user, env=env)
    assert r.returncode == 0, r.stderr
    local = project / ".claude" / "settings.local.json"  # the default scope: the file nobody commits
    installed = json.loads(local.read_text())["hooks"]["PreToolUse"][0]["hooks"][0]
    assert installed["command"] == cmd
    assert not env_home.exists()  # nothing was built in the home the flag overrode
    # the agent's own GEODE_HOME is the other one; the installed command still uses the flag's
    event = {
        "hook_event_name": "PreToolUse",
        "session_id": "s",
        "cwd": str(project),
        "tool_name": "Bash",
        "tool_input": {"command": "pytest -k slow | tail -3"},
    }
    e = {k: v for k, v in os.environ.items() if not k.startswith("GEODE_")}
    e.update(GEODE_HOME=str(env_home), GEODE_WITHHOLD_RATE="0")
    out = subprocess.run(
        ["/bin/sh", "-c", cmd], input=json.dumps(event), capture_output=True, text=True, env=e, timeout=60
    )
    assert out.returncode == 0 and "exit-code-through-a-pipe" in out.stdout, (out.stdout, out.stderr)


# -- the hook with a valid and an invalid geode.toml ---------------------------------------------
PIPE_CMD = "npm run build | tail -20"


def _pipe_store(g: Geode) -> None:
    g.crystal("pipe.md", "Pipe essence.", name="pipe", match="| tail")


def test_the_hook_works_with_a_valid_geode_toml(tmp_path):
    g = Geode(
        tmp_path,
        config='[delivery]\nbudget = 3000\n[cleaner]\ncap = 10\n[recall]\nbudget_ms = 500\n[upkeep]\nat = "02:00"\n',
    )
    _pipe_store(g)
    res = g.bash(PIPE_CMD)
    assert res.rc == 0 and "Pipe essence." in res.context and res.errors == "", res
    assert "Pipe essence." in g.bash(PIPE_CMD, session="s2").context  # from the cache


def test_the_hook_fails_open_on_an_invalid_geode_toml_and_recovers(tmp_path):
    g = Geode(tmp_path)
    _pipe_store(g)
    assert "Pipe essence." in g.bash(PIPE_CMD).context  # the cache of no file, the index built
    g.config("[delivery]\nbudget = 3000\n[cleaner]\ncpa = 10\n")
    for session in ("s2", "s3"):  # an invalid file is never cached: every call says so
        res = g.bash(PIPE_CMD, session=session)
        assert (res.rc, res.stdout, res.stderr) == (0, "", ""), res
        assert f"{g.home / 'geode.toml'}:4: [cleaner] cpa: unknown key (did you mean cap?)" in res.errors
    g.config("[delivery]\nbudget = 3000\n[cleaner]\ncap = 10\n")
    res = g.bash(PIPE_CMD, session="s4")
    assert "Pipe essence." in res.context and res.errors == "", res


def test_the_hook_reads_its_recall_budget_through_settings(tmp_path):
    from geode.delivery.hook import HookRun

    g = Geode(tmp_path, config="[recall]\nbudget_ms = 750\n")
    run = HookRun("claude", {"session_id": "s"}, g.env())
    try:
        assert run.settings.recall.budget_ms == 750
    finally:
        run.close()
    run = HookRun("claude", {"session_id": "s"}, g.env(GEODE_RECALL_BUDGET_MS="20000"))
    try:
        assert run.settings.recall.budget_ms == 20000
    finally:
        run.close()


# -- the line finder, against tomllib ------------------------------------------------------------
def _dict_paths(data: dict, prefix: tuple = ()) -> list[tuple]:
    out = []
    for k, v in data.items():
        out.append(prefix + (k,))
        if isinstance(v, dict):
            out.extend(_dict_paths(v, prefix + (k,)))
    return out


def _has(data, path: tuple) -> bool:
    for k in path:
        if not isinstance(data, dict) or k not in data:
            return False
        data = data[k]
    return True


def assert_lines_agree_with_tomllib(text: str) -> int:
    """For every key path of ``text``, ``locate`` names the line where the statement defining it
    starts. The oracle is tomllib on the document's prefixes: the prefix that ends just before that
    line parses without the key, and every longer prefix up to the first that holds the key does
    not parse (it cuts the defining statement). Returns how many paths were checked."""
    data = tomllib.loads(text)
    lines = text.split("\n")
    prefixes = []
    for k in range(len(lines) + 1):
        try:
            prefixes.append(tomllib.loads("\n".join(lines[:k])))
        except tomllib.TOMLDecodeError:
            prefixes.append(None)
    paths = _dict_paths(data)
    for path in paths:
        first = next(k for k, p in enumerate(prefixes) if p is not None and _has(p, path))
        line = locate(text, path)
        assert line is not None and line <= first, (path, line, first, text)
        assert prefixes[line - 1] is not None and not _has(prefixes[line - 1], path), (path, line, text)
        assert all(prefixes[k] is None for k in range(line, first)), (path, line, first, text)
    return len(paths)


LOCATOR_CASES = [
    '[store]\ndefault = "main"\n[cleaner]\ncap = 1\n[cleaner.caps]\n"a/b" = 2\n',
    'cleaner.cap = 1\ncleaner . caps . "x y" = 2\n[upkeep]\nagents = { a = "m:A", b = { c = "d" } }\n',
    '[a.b]\nx = 1\n[a]\ny = 2\n[a.c]\nz = """\n[fake]\nk = 1\n"""\nw = 3\n',
    "m = '''\n[x]\ny = 1'''\n[t]\n# [u]\nk = [\n  1, # ]\n  2,\n]\nq = \"#[\\\"]\"  # c\n",
    '["a.b"]\n\'c.d\' = 1\n"e\\"f" = { "g#h" = 1 }\n[[arr]]\nk = 1\n[[arr]]\nk = 2\n[z]\nd = 1979-05-27 07:32:00\n',
    'x = """a\\"""\n"""\ny = """""q"""""\n[t]\nz = 1\n',
]


@pytest.mark.parametrize("text", LOCATOR_CASES)
def test_the_line_finder_on_hand_made_layouts(text):
    assert assert_lines_agree_with_tomllib(text) >= 4


@st.composite
def toml_documents(draw) -> str:
    counter = itertools.count()

    def name() -> str:
        return draw(st.sampled_from(["k", "cap", "x-y", "n_1", "7", "cleaner"])) + str(next(counter))

    def key() -> str:
        nm = name()
        style = draw(st.sampled_from(["bare", "bare", "basic", "literal", "odd"]))
        if style == "bare":
            return nm
        if style == "literal":
            return f"'{nm}'"
        if style == "odd":
            nm += draw(st.sampled_from([" sp", ".dot", "#h", "=e", "]b", '"q', "\\s", "é"]))
        return json.dumps(nm, ensure_ascii=draw(st.booleans()))

    def dotted(most: int = 3) -> str:
        sep = draw(st.sampled_from([".", " . ", ". "]))
        return sep.join(key() for _ in range(draw(st.integers(1, most))))

    decoy = st.sampled_from(["[fake]", "k = 1", "# not a comment", "[[arr]]", "x.y = { a = 1 }", "'", '"', "]"])

    def value(single_line: bool) -> str:
        kinds = ["int", "float", "bool", "date", "str", "lit", "array", "inline"]
        if not single_line:
            kinds += ["ml", "mllit", "mlarray"]
        kind = draw(st.sampled_from(kinds))
        if kind == "int":
            return str(draw(st.integers(-(10**6), 10**6)))
        if kind == "float":
            return draw(st.sampled_from(["0.5", "-1e3", "inf", "3.0"]))
        if kind == "bool":
            return draw(st.sampled_from(["true", "false"]))
        if kind == "date":
            return draw(st.sampled_from(["2027-02-27", "1979-05-27T07:32:00Z", "1979-05-27 07:32:00", "07:32:00"]))
        if kind == "str":
            return json.dumps(draw(st.text(st.sampled_from("ab #=[]{}'\",.\\é"), max_size=8)))
        if kind == "lit":
            return "'" + draw(st.text(st.sampled_from('ab #=[]{}",.\\'), max_size=8)) + "'"
        if kind == "array":
            return "[" + ", ".join(value(True) for _ in range(draw(st.integers(0, 3)))) + "]"
        if kind == "inline":
            return "{ " + ", ".join(f"{dotted(2)} = {value(True)}" for _ in range(draw(st.integers(0, 3)))) + " }"
        if kind == "ml":
            body = "\n".join(draw(st.lists(decoy.filter(lambda d: d != '"'), max_size=3)))
            return '"""\n' + body + '"""'
        if kind == "mllit":
            body = "\n".join(draw(st.lists(decoy.filter(lambda d: d != "'"), max_size=3)))
            return "'''\n" + body + "'''"
        items = [value(True) for _ in range(draw(st.integers(0, 3)))]
        return "[\n" + "".join(f"  {v}, # c\n" for v in items) + "]"

    def statement() -> str:
        line = f"{dotted()} = {value(False)}"
        if draw(st.booleans()):
            line += "  # " + draw(st.sampled_from(["note", "k = 2", "[x]"]))
        return line

    out = [statement() for _ in range(draw(st.integers(0, 3)))]
    headers: list[str] = []
    for _ in range(draw(st.integers(0, 4))):
        if headers and draw(st.booleans()):
            header = f"{draw(st.sampled_from(headers))}.{key()}"
        else:
            header = dotted(2)
        headers.append(header)
        if draw(st.integers(0, 5)) == 0:
            out.append(f"[[{header}]]")  # an array of tables: its keys live in a list
        else:
            out.append(f"[{header}]" + draw(st.sampled_from(["", "  # t", " "])))
        out.extend(statement() for _ in range(draw(st.integers(0, 3))))
        if draw(st.booleans()):
            out.append("")
    return "\n".join(out) + draw(st.sampled_from(["", "\n"]))


@pytest.mark.slow
@hsettings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(toml_documents())
def test_the_line_finder_agrees_with_tomllib_on_generated_documents(text):
    assert_lines_agree_with_tomllib(text)


def test_key_lines_reads_a_real_config():
    text = (REPO / "README.md").read_text(encoding="utf-8").split("```toml\n[store]", 1)[1].split("```", 1)[0]
    text = "[store]" + text
    assert assert_lines_agree_with_tomllib(text) > 20
    assert (
        dict(key_lines(text))[("delivery", "agents")]
        == text.split("\n").index(next(line for line in text.split("\n") if line.startswith("agents"))) + 1
    )


# -- the checker, against pydantic ---------------------------------------------------------------
def _pydantic_model():

    from pydantic import ConfigDict, create_model

    def py_type(kind):
        if isinstance(kind, tuple):
            return dict[str, py_type(kind[1])]
        return {
            INT: int,
            FLOAT: float,
            STR: str,
            BOOL: bool,
            DATE: str | datetime.date,
            STRS: str | list[str],
        }[kind]

    strict = ConfigDict(extra="forbid", strict=True)
    fields = {}
    for table, spec in SCHEMA.items():
        if isinstance(spec, tuple):
            fields[table] = (py_type(spec), None)
        else:
            sub = create_model(f"T_{table}", __config__=strict, **{k: (py_type(v[0]), None) for k, v in spec.items()})
            fields[table] = (sub, None)
    return create_model("GeodeToml", __config__=strict, **fields)


def _pydantic_problems(model, data: dict) -> set[tuple]:
    from pydantic import ValidationError

    try:
        model.model_validate(data)
    except ValidationError as exc:
        out = set()
        for err in exc.errors():
            path, node = [], data
            for part in err["loc"]:  # up to the deepest key of the data (drop union branch names, indexes)
                if not isinstance(node, dict) or part not in node:
                    break
                path.append(part)
                node = node[part]
            out.add(tuple(path))
        return out
    return set()


_ANY = st.one_of(
    st.integers(-5, 5),
    st.floats(allow_nan=False, width=32),
    st.booleans(),
    st.text(max_size=3),
    st.dates(),
    st.datetimes(),
    st.lists(st.text(max_size=2), max_size=2),
    st.lists(st.integers(), min_size=1, max_size=2),
    st.dictionaries(st.sampled_from(["a", "b"]), st.one_of(st.integers(), st.text(max_size=2)), max_size=2),
)


def _good(kind):
    if isinstance(kind, tuple):
        return st.dictionaries(st.sampled_from(["main", "a/b", "x y"]), _good(kind[1]), max_size=2)
    return {
        INT: st.integers(-10, 10**6),
        FLOAT: st.one_of(st.integers(0, 9), st.floats(0, 1)),
        STR: st.text(max_size=4),
        BOOL: st.booleans(),
        DATE: st.one_of(st.dates(), st.text(max_size=4)),
        STRS: st.one_of(st.text(max_size=3), st.lists(st.text(max_size=3), max_size=2)),
    }[kind]


@st.composite
def config_data(draw) -> dict:
    data: dict = {}
    for table in draw(st.lists(st.sampled_from(list(SCHEMA) + ["cleanr", "budget"]), unique=True, max_size=4)):
        spec = SCHEMA.get(table)
        if spec is None or draw(st.integers(0, 9)) == 0:
            data[table] = draw(_ANY)
        elif isinstance(spec, tuple):
            data[table] = draw(st.one_of(_good(spec), _ANY))
        else:
            keys = draw(st.lists(st.sampled_from(list(spec) + ["cpa", "bogus"]), unique=True, max_size=4))
            data[table] = {k: draw(st.one_of(_good(spec[k][0]), _ANY) if k in spec else _ANY) for k in keys}
    return data


_MODEL = None


@pytest.mark.slow
@hsettings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(config_data())
def test_the_checker_agrees_with_pydantic(data):
    global _MODEL
    if _MODEL is None:
        _MODEL = _pydantic_model()
    mine = {path for path, _msg in problems_in(data, SCHEMA)}
    assert mine == _pydantic_problems(_MODEL, data), data


def test_every_settings_slot_is_declared_with_a_type():
    """``Settings`` declares each slot with its type (for the type checker) and nothing else: a
    slot added to ``_DEFAULTS`` without an annotation, or an annotation for no slot, fails here."""
    from geode.kernel.config import Settings

    assert set(Settings.__annotations__) == set(Settings.__slots__)
    assert len(Settings.__slots__) == len(set(Settings.__slots__))
    s = Settings("/tmp/h", {"d": "/tmp/d"}, "d")
    assert s.as_dict().keys() == set(Settings.__slots__)
