"""Fixtures every test module may ask for by name (no import needed).

- ``geode_env``: an empty store ``tmp_path/store`` with its GEODE_HOME ``tmp_path/home``
  (``tests.stores.GeodeEnv``): ``write``, ``files``, ``toml``, ``settings``, ``engine``; it
  unpacks as ``settings, engine, root``. The engine is disposed after the test.
- ``pg_url``: a freshly created PostgreSQL database, dropped afterwards.
"""

from __future__ import annotations

import os

import pytest

from tests.stores import GeodeEnv

PG_ADMIN = "host=127.0.0.1 port=5432 user=postgres dbname=test"


@pytest.fixture()
def geode_env(tmp_path):
    env = GeodeEnv(tmp_path)
    yield env
    env.close()


@pytest.fixture()
def pg_url():
    """A freshly created PostgreSQL database, dropped afterwards. Fails if PostgreSQL is down:
    a records backend nobody tests is one that silently loses rows, so there is no skip."""
    import psycopg

    name = "geode_test_" + os.urandom(6).hex()
    admin = psycopg.connect(PG_ADMIN, autocommit=True)  # raises (test error) when unreachable
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
