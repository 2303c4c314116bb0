"""Agents the upkeep tests plug in through ``[upkeep] agents`` (never used outside tests).

- ``HandPicked``: walks one folder named by hand, the way the original Cleaner did; the
  contract must fail its run.
- ``Gated``: the Librarian, but the first attempt stops after filing one proposal, writes its
  pid and waits to be killed (``GEODE_TEST_GATE_DIR``).
- ``Poison``: counts its executions in a file and kills its own process (``os._exit(1)``).
- ``HeldCleaner``: the Cleaner, held at its start until the test lets it go.
"""

from __future__ import annotations

import os
import time

from geode.agents import upkeep
from geode.agents.contract import Agent, Report
from geode.cleaner.agent import Cleaner
from geode.librarian.agent import Librarian


class HandPicked(Agent):
    name = "handpicked"
    FOLDERS = ("guide",)

    def examine(self, ctx) -> Report:
        report = Report(agent=self.name)
        n = 0
        for domain, _root in ctx.domains():
            for note in ctx.load(domain).notes:
                if note.path.split("/", 1)[0] in self.FOLDERS:
                    n += 1
        report.examined["notes"] = n
        return report


_ARMED = {"on": False}
_real_file_one = upkeep.file_one


def _gated_file_one(settings, engine, draft):
    pid = _real_file_one(settings, engine, draft)
    gate = os.environ.get("GEODE_TEST_GATE_DIR")
    if _ARMED["on"] and gate:
        marker = os.path.join(gate, "first-attempt")
        if not os.path.exists(marker):
            with open(marker, "w") as fh:
                fh.write(str(os.getpid()))
            deadline = time.monotonic() + 300
            while time.monotonic() < deadline:  # waits here until the test kills this process
                time.sleep(0.2)
    return pid


upkeep.file_one = _gated_file_one


class Gated(Librarian):
    name = "gated"

    def examine(self, ctx):
        _ARMED["on"] = True
        return super().examine(ctx)


class Poison(Agent):
    name = "poison"

    def examine(self, ctx):
        path = os.path.join(os.environ["GEODE_TEST_GATE_DIR"], "poison-runs")
        with open(path, "a") as fh:
            fh.write(f"{os.getpid()}\n")
        os._exit(1)


class HeldCleaner(Cleaner):
    """The real Cleaner, held at its start until the test says go: the test takes the broker
    away while it runs, so the send of the night's next agent meets the outage
    (``GEODE_TEST_GATE_DIR``: writes ``cleaner-started``, waits for ``cleaner-go``)."""

    def examine(self, ctx):
        gate = os.environ["GEODE_TEST_GATE_DIR"]
        with open(os.path.join(gate, "cleaner-started"), "w") as fh:
            fh.write(str(os.getpid()))
        deadline = time.monotonic() + 120
        while not os.path.exists(os.path.join(gate, "cleaner-go")) and time.monotonic() < deadline:
            time.sleep(0.05)
        return super().examine(ctx)
