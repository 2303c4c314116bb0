"""``geode upkeep`` with a broker that does not answer (issue 22, item 10): a closed port, and a
port that accepts and never says a word. Today it printed a kombu traceback and no JSON (or,
for the silent port, hung). Now: one line naming the broker (password hidden), a JSON object
with the error under ``--json``, exit 1, within seconds."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time

import pytest

from tests.helpers import REPO, Geode

PASSWORD = "hunter2-secret"


def _closed_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now
    return port


@pytest.fixture
def silent_port():
    """A real listener that accepts every connection and never answers (a hung broker)."""
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("127.0.0.1", 0))
    srv.listen(64)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept():
        srv.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(srv.accept()[0])
            except OSError:
                pass

    t = threading.Thread(target=accept, daemon=True)
    t.start()
    yield srv.getsockname()[1]
    stop.set()
    t.join(2)
    for c in held:
        c.close()
    srv.close()


def _upkeep(tmp_path, url: str, *extra: str) -> tuple[subprocess.CompletedProcess, float]:
    g = Geode(tmp_path)
    g.write("a.md", "---\ntitle: A\n---\nA note.\n")
    env = g.env(GEODE_BROKER_URL=url, PYTHONPATH=str(REPO))
    t0 = time.monotonic()
    p = subprocess.run(
        [sys.executable, "-m", "geode", "upkeep", "--wait", "5", *extra],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return p, time.monotonic() - t0


@pytest.mark.parametrize("kind", ["closed", "silent"])
@pytest.mark.parametrize("as_json", [True, False])
def test_upkeep_with_a_broker_that_does_not_answer_says_so_in_one_line(tmp_path, silent_port, kind, as_json):
    port = _closed_port() if kind == "closed" else silent_port
    p, _took = _upkeep(tmp_path, f"redis://:{PASSWORD}@127.0.0.1:{port}/0", *(["--json"] if as_json else []))
    assert p.returncode == 1, (p.returncode, p.stdout[-2000:], p.stderr[-3000:])
    assert "Traceback" not in p.stderr and "Traceback" not in p.stdout, p.stderr[-3000:]
    assert PASSWORD not in p.stderr + p.stdout  # the broker is named with its password hidden
    lines = [x for x in p.stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and lines[0].startswith("geode: the broker redis://:**@127.0.0.1:"), lines
    assert f":{port}/0" in lines[0]
    if as_json:
        out = json.loads(p.stdout)
        assert out["broker"] == f"redis://:**@127.0.0.1:{port}/0" and out["error"] and out["runs"] == []
    else:
        assert p.stdout.strip() == ""
