"""What a test does when a prerequisite (Chromium, PostgreSQL, Redis) is not there.

By default it fails, naming what is missing and how to get it: a skipped browser or database
test would be green over nothing, so CI (``.ci/run``, strict) never skips. ``scripts/test``, the
README's test command, installs or starts each one it can; what it cannot provide on this
machine (no root, no apt-get) it names in ``GEODE_TESTS_SKIP`` (``browser``, ``postgres``,
``redis``, comma-separated) after saying so, and the tests that need that one are then skipped,
each with the same one line. Never a collection error either way.
"""

from __future__ import annotations

import os

import pytest

#: how to get each one, the tail of every message
HOW = {
    "browser": "`apt-get install chromium` (scripts/test does it where it can), or set GEODE_CHROMIUM to a Chromium executable",
    "postgres": "`apt-get install postgresql` with trust authentication on 127.0.0.1:5432 and a database `test` (scripts/test starts or installs it where it can)",
    "redis": "`apt-get install redis-server` listening on 127.0.0.1:6379 (scripts/test starts or installs it where it can)",
}


def declared_missing() -> set[str]:
    """The prerequisites ``scripts/test`` said it could not provide here."""
    return {w.strip() for w in os.environ.get("GEODE_TESTS_SKIP", "").split(",") if w.strip()}


def absent(what: str, why: str) -> None:
    """Skip (when ``scripts/test`` declared ``what`` missing) or fail, with one line; never returns."""
    line = why if "`" in why else f"{why}: {HOW[what]}"  # a message that names its command already says how
    if what in declared_missing():
        pytest.skip(f"{what} missing on this machine, skipped: {line}")
    pytest.fail(line, pytrace=False)
